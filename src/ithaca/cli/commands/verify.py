"""``ithaca verify [--fresh] [--json]`` and ``ithaca verify accept-config``.

``verify`` runs the project's tests the way Ithaca counts them (``ithaca.verification``):
its own run, in the validator sandbox, with its own environment; a settled run of the
same content is shown again instead. From a coding agent's shell it is refused: there
the environment is the agent's, so the agent calls the ``verify`` MCP tool instead,
whose server the host started. ``accept-config`` is the user's: it accepts the runner
configuration as it is now, so a turn that changed it can end verified.
"""

from __future__ import annotations

from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show


@click.group("verify", invoke_without_command=True)
@click.option("--fresh", is_flag=True, help="Run even when a run of this content exists.")
@json_option
@click.pass_context
def group(ctx: click.Context, fresh: bool, as_json: bool) -> None:
    """Run the project's tests as Ithaca counts them."""
    if ctx.invoked_subcommand is not None:
        return
    from ithaca.kernel import Refused, agent_caller

    with errors_to_exit(as_json):
        caller = agent_caller()
        if caller is not None:
            raise Refused(
                "VERIFY_FROM_AGENT_SHELL",
                f"Ithaca runs no tests from a coding agent's shell ({caller}): the agent"
                " shapes its environment. Call the `verify` MCP tool instead.",
            )
    service = opened(ctx, as_json).verification
    with errors_to_exit(as_json):
        answer = service.verify(fresh=fresh)
    show(answer, as_json, render)
    if answer["status"] != "passed":
        ctx.exit(1)


@group.command("accept-config")
@json_option
@click.pass_context
def accept_config(ctx: click.Context, as_json: bool) -> None:
    """Accept the test runner's configuration as it is now (the user's)."""
    from ithaca.kernel import require_user

    service = opened(ctx, as_json).verification
    with errors_to_exit(as_json):
        runner = service.runner()
        click.echo(f"Accepting the configuration of {runner.name} as it is now.")
        require_user("accept the test runner's configuration", "accept")
        answer = service.accept_config()
    show(answer, as_json, _render_accepted)


def render(answer: dict[str, Any]) -> None:
    out = console()
    counts = answer["counts"]
    counted = (
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors,"
        f" {counts['skipped']} skipped of {counts['collected']}"
        if counts
        else "tests not counted (the runner gives no report)"
    )
    reused = " (a run of this same content, reused)" if answer["reused"] else ""
    out.print(
        f"{answer['status']}: {answer['runner']} — {counted}, {answer['duration_s']} s{reused}",
        markup=False,
    )
    if answer["status"] != "passed":
        out.print(f"  {answer['reason']}", markup=False)
    if answer.get("problems"):
        out.print(f"  not verified for this turn: {answer['problems']}", markup=False)
    if answer.get("tail"):
        out.print(answer["tail"], markup=False)


def _render_accepted(answer: dict[str, Any]) -> None:
    click.echo(f"accepted: {answer['runner']} configuration ({len(answer['files'])} files)")
