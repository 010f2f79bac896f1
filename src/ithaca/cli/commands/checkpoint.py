"""``ithaca checkpoint STAGE [--change ID] [--task ID] [--baseline] [--draft|--abandon]
[--payload JSON|@FILE] [--key K] [--json]``.

The command builds the request the MCP ``checkpoint`` tool takes and runs it through the
same service, so every refusal carries the same code. Without ``--payload`` it accepts the
existing draft. The idempotency key is made up and printed on standard error when none is
given, so an interrupted call can be retried with it and replay instead of applying twice.
"""

from __future__ import annotations

from typing import Any

import click

from ithaca.cli.commands.record import json_argument
from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, fail, json_option, show
from ithaca.delivery import CHECKPOINT_STAGES
from ithaca.kernel import IthacaError, ids


@click.command("checkpoint")
@click.argument("stage", type=click.Choice(CHECKPOINT_STAGES))
@click.option("--change", "change_id", help="Checkpoint a change.")
@click.option("--task", "task_id", help="Checkpoint a task (with --change: must belong to it).")
@click.option("--baseline", is_flag=True, help="Checkpoint the baseline.")
@click.option("--draft", "as_draft", is_flag=True, help="Save a draft instead of accepting.")
@click.option("--abandon", is_flag=True, help="Drop the stage's draft.")
@click.option("--payload", "payload_text", help="The payload: JSON text, or @FILE (@- stdin).")
@click.option("--key", help="Idempotency key (made up and printed when omitted).")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    stage: str,
    change_id: str | None,
    task_id: str | None,
    baseline: bool,
    as_draft: bool,
    abandon: bool,
    payload_text: str | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Declare STAGE done for a change, task, the baseline or the project."""
    if as_draft and abandon:
        raise click.UsageError("--draft and --abandon exclude each other")
    if baseline and (change_id or task_id):
        raise click.UsageError("--baseline names no change or task")
    scope: dict[str, Any] = {}
    if change_id:
        scope["change_id"] = change_id
    if task_id:
        scope["task_id"] = task_id
    if baseline:
        scope["baseline"] = True
    request: dict[str, Any] = {
        "stage": stage,
        "scope": scope,
        "operation": "draft" if as_draft else "abandon" if abandon else "accept",
    }
    with errors_to_exit(as_json):
        if payload_text is not None:
            request["payload"] = json_argument(payload_text, "/payload")
    if key is None:
        key = f"cli-{ids.ulid()}"
        click.echo(f"idempotency key: {key}", err=True)
    request["idempotency_key"] = key
    project = opened(ctx, as_json)
    service = project.delivery
    try:
        answer = service.checkpoint(request)
    except IthacaError as exc:
        fail(exc, as_json)
    show(answer, as_json, _render)


def _render(answer: dict[str, Any]) -> None:
    out = console()
    found = answer["checkpoint"]
    scope = found["scope"]
    where = scope["type"] if scope["id"] is None else f"{scope['type']} {scope['id']}"
    if answer.get("replayed"):
        done = "replayed"
    elif answer.get("unchanged"):
        done = "unchanged"
    elif found["status"] == "accepted":
        done = "accepted"
    else:
        done = found["status"]
    revision = "" if found["revision"] is None else f" r{found['revision']}"
    out.print(f"{done}: {found['stage']} {where}{revision} ({found['id']})", markup=False)
    for wave in (answer.get("plan") or {}).get("waves", []):
        mode = "parallel" if wave["parallel"] else "alone"
        out.print(f"  wave {wave['index']} ({mode}): {', '.join(wave['tasks'])}", markup=False)
    for note in answer["diagnostics"]:
        about = f" [{note['subject']}]" if "subject" in note else ""
        out.print(f"  {note['severity']} {note['code']}{about}: {note['message']}", markup=False)
    if answer["journal_seq"] is not None:
        out.print(f"journal seq {answer['journal_seq']}", style="dim", markup=False)
