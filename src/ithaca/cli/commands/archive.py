"""``ithaca archive CHANGE --summary TEXT (--baseline-update TARGET=SOURCE … |
--no-baseline-change REASON) [--key K] [--json]``.

The command builds the request the MCP ``archive`` tool takes and hands it to the same
service, so errors carry the same codes. Saying nothing about the baseline is allowed
(the archive then reports ``BASELINE_RECONCILIATION_MISSING``), saying both is not. As
with ``record``, a key is made up and printed on standard error when none is given, so
an interrupted archive can be retried and replay instead of running twice.
"""

from __future__ import annotations

from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel import ids


@click.command("archive")
@click.argument("change")
@click.option("--summary", required=True, help="What the change delivered.")
@click.option(
    "--baseline-update",
    "updates",
    multiple=True,
    metavar="TARGET=SOURCE",
    help="Copy SOURCE (in the change folder) to TARGET (under specs/ or docs/research/).",
)
@click.option("--no-baseline-change", "reason", help="Why the baseline stays as it is.")
@click.option("--key", help="Idempotency key (made up and printed when omitted).")
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    change: str,
    summary: str,
    updates: tuple[str, ...],
    reason: str | None,
    key: str | None,
    as_json: bool,
) -> None:
    """Archive a change into changes/archive/<date>-<id>."""
    if updates and reason is not None:
        raise click.UsageError("give --baseline-update or --no-baseline-change, not both")
    payload: dict[str, Any] = {"summary": summary}
    if updates:
        payload["baseline_updates"] = [_update(text) for text in updates]
    if reason is not None:
        payload["no_baseline_change_reason"] = reason
    if key is None:
        key = f"cli-{ids.ulid()}"
        click.echo(f"idempotency key: {key}", err=True)
    service = opened(ctx, as_json).delivery
    request = {"change_id": change, "payload": payload, "idempotency_key": key}
    with errors_to_exit(as_json):
        answer = service.archive(request)
    show(answer, as_json, _render)


def _update(text: str) -> dict[str, str]:
    target, sep, source = text.partition("=")
    if not sep or not target or not source:
        raise click.BadParameter(f"{text!r} is not TARGET=SOURCE", param_hint="--baseline-update")
    return {"target": target, "source": source}


def _render(answer: dict[str, Any]) -> None:
    out = console()
    done = "replayed" if answer.get("replayed") else "archived"
    change = answer["change"]
    out.print(f"{done}: {change['id']} → {change['path']}", markup=False)
    reconciliation = answer["reconciliation"]
    revision = reconciliation.get("baseline_revision")
    line = f"baseline: {reconciliation['status']}"
    if revision is not None:
        line += f" (baseline r{revision})"
    out.print(line, markup=False)
    for found in answer["diagnostics"]:
        about = f" [{found['subject']}]" if "subject" in found else ""
        out.print(f"  {found['severity']} {found['code']}{about}: {found['message']}", markup=False)
    if answer["journal_seq"] is not None:
        out.print(f"journal seq {answer['journal_seq']}", style="dim", markup=False)
