"""``ithaca run-plan CHANGE [--max-parallel N] [--dry-run] [--json]``.

Runs the change's accepted plan wave by wave with the worker the user configured
(``[run_plan] worker`` in ``.ithaca/.runtime/config.toml``), or resumes the run a
previous invocation paused. The exit status says whether the plan converged: 0 when
every wave completed (or for ``--dry-run``), 1 when the run paused (the reason is
printed; fix it and run the command again) or was refused.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, fail, json_option, show
from ithaca.kernel import IthacaError


@click.command("run-plan")
@click.argument("change_id")
@click.option("--max-parallel", type=click.IntRange(min=1), help="Workers at once (default 4).")
@click.option("--dry-run", is_flag=True, help="Show what would run; change nothing.")
@json_option
@click.pass_context
def command(
    ctx: click.Context, change_id: str, max_parallel: int | None, dry_run: bool, as_json: bool
) -> None:
    """Run (or resume) CHANGE_ID's accepted plan with the configured worker."""
    project = opened(ctx, as_json)
    try:
        answer = project.delivery.run_plan(change_id, max_parallel=max_parallel, dry_run=dry_run)
    except IthacaError as exc:
        fail(exc, as_json)
    show(answer, as_json, _render)
    if answer.get("status") == "paused":
        sys.exit(1)


def _render(answer: dict[str, Any]) -> None:
    out = console()
    if answer.get("dry_run"):
        out.print(f"plan of {answer['change_id']} ({answer['checkpoint_id']}):", markup=False)
        for wave in answer["waves"]:
            listed = ", ".join(
                f"{task['id']} {task['status']} → {task['verdict']}"
                + (f" (blocked: {', '.join(task['blockers'])})" if task["blockers"] else "")
                for task in wave["tasks"]
            )
            out.print(f"  wave {wave['index']}: {listed}", markup=False)
        return
    run = answer["run"]
    out.print(
        f"run {run['id']} ({run['how']}) on {run['integration_branch']}: {answer['status']}",
        markup=False,
    )
    for wave in answer["waves"]:
        for task in wave["tasks"]:
            reason = f" ({task['reason']})" if task["reason"] else ""
            out.print(
                f"  wave {wave['index']} {task['id']}: {task['status']}{reason}", markup=False
            )
    if answer["pause"] is not None:
        out.print(f"paused: {answer['pause']['reason']}; fix it and run again", markup=False)
    else:
        out.print(
            f"merge {run['integration_branch']} into your branch when you are ready", markup=False
        )
