"""``ithaca context``: the Canonical Context Envelope of the current delivery work.

It goes through the same service the MCP ``context`` tool calls: ``--json`` gives exactly
what an agent receives, the text form a short reading of it. A cursor from an earlier
answer, given with the same scope options, prints the next slice of the list it names.
"""

from __future__ import annotations

from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.delivery import CONTEXT_STAGES


@click.command("context")
@click.option(
    "--stage", type=click.Choice(CONTEXT_STAGES), help="The stage the context is read for."
)
@click.option("--change", "change_id", help="Describe this change.")
@click.option("--task", "task_id", help="Describe this task (and its change).")
@click.option("--full", is_flag=True, help="The full envelope (64 KiB) instead of the summary.")
@click.option("--cursor", help="A cursor from an earlier answer: print that list's next slice.")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stage: str | None,
    change_id: str | None,
    task_id: str | None,
    full: bool,
    cursor: str | None,
    as_json: bool,
) -> None:
    """Show what the current delivery work is about: the context envelope."""
    arguments: dict[str, Any] = {"detail": "full" if full else "summary"}
    if stage is not None:
        arguments["stage"] = stage
    scope = {
        name: value for name, value in (("change_id", change_id), ("task_id", task_id)) if value
    }
    if scope:
        arguments["scope"] = scope
    if cursor is not None:
        arguments["cursor"] = cursor
    service = opened(ctx, as_json).delivery
    with errors_to_exit(as_json):
        answer = service.context(arguments)
    show(answer, as_json, _render_slice if cursor is not None else _render)


def _render(envelope: dict[str, Any]) -> None:
    out = console()
    scope = envelope["scope"]
    checkout = envelope["git"]  # what Git says of the checkout (``kernel.git`` read it)
    out.print(f"{envelope['id']} ({envelope['detail']}, scope {scope['type']})", markup=False)
    branch = checkout.get("branch") or "detached"
    drift = f", {checkout['drift']}" if "drift" in checkout else ""
    head = (checkout.get("head") or "no commit")[:12]
    out.print(f"git: {branch} @ {head}{drift}", markup=False)
    if envelope.get("baseline"):
        found = envelope["baseline"]
        out.print(f"baseline: r{found['revision']} {found['status']} ({found['mode']})")
    if envelope.get("change"):
        found = envelope["change"]
        out.print(
            f"change: {found['id']} [{found['kind']}, {found['status']}] {found['title']}",
            markup=False,
        )
    if envelope.get("task"):
        found = envelope["task"]
        out.print(f"task: {found['id']} [{found['status']}]", markup=False)
    for name in ("decisions", "checkpoints", "evidence"):
        value = envelope.get(name)
        count = value["count"] if isinstance(value, dict) else len(value or [])
        more = " (more with a cursor)" if name in envelope.get("cursors", {}) else ""
        out.print(f"{name}: {count}{more}")
    for group, found_list in envelope["diagnostics"].items():
        for found in found_list if isinstance(found_list, list) else []:
            if isinstance(found, dict):
                out.print(f"  {group} {found['code']}: {found['message']}", markup=False)
    for name, value in envelope.get("cursors", {}).items():
        out.print(f"cursor {name}: {value}", style="dim", markup=False)


def _render_slice(answer: dict[str, Any]) -> None:
    out = console()
    end = answer["offset"] + len(answer["items"])
    out.print(f"{answer['section']} {answer['offset']}–{end} of {answer['total']}", markup=False)
    for item in answer["items"]:
        label = item.get("id") or item.get("stage") if isinstance(item, dict) else item
        out.print(f"  {label}", markup=False)
    if "cursor" in answer:
        out.print(f"cursor: {answer['cursor']}", style="dim", markup=False)
