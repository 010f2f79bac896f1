"""``ithaca record KIND ACTION --data JSON|@FILE [--key K]`` and ``ithaca record --batch @FILE``.

The command builds the same ``{entries: [...]}`` request the MCP ``record`` tool takes and
hands it to the same ``DeliveryService``, so a refusal carries the same code here. Every
entry needs an idempotency key; when the caller gives none the command makes one and
prints it on standard error, so a failed or interrupted call can be retried with it and
replay instead of applying twice. ``baseline initialize`` also works before ``ithaca
init``: it sets the project up first (docs/delivery.md, "The `record` tool").
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, emit_json, errors_to_exit, fail, json_option, show
from ithaca.delivery import DeliveryService, validation_error
from ithaca.kernel import IthacaError, find_project, ids


class _RecordCommand(click.Command):
    """``record``, whose help ends with every kind, action and field."""

    def format_epilog(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from ithaca.delivery import record_fields

        formatter.write(
            "\nKinds, actions and their fields (* required; `--example KIND ACTION` prints a"
            " valid --data):\n\n"
        )
        for line in record_fields().splitlines():
            formatter.write(f"  {line}\n")


@click.command("record", cls=_RecordCommand)
@click.argument("kind", required=False)
@click.argument("action", required=False)
@click.option("--data", "data_text", help="The entry's data: JSON text, or @FILE (@- for stdin).")
@click.option(
    "--example", is_flag=True, help="Print a valid --data for KIND ACTION, and record nothing."
)
@click.option("--key", help="Idempotency key (made up and printed when omitted).")
@click.option(
    "--batch", "batch_text", help="@FILE with {entries: [...]} (or a list of entries) to run."
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    kind: str | None,
    action: str | None,
    data_text: str | None,
    key: str | None,
    batch_text: str | None,
    example: bool,
    as_json: bool,
) -> None:
    """Record delivery facts: a baseline, change, decision, task, artifact or event."""
    if example:
        _print_example(kind, action, as_json)
        return
    if batch_text is not None and (kind or action or data_text or key):
        raise click.UsageError("--batch takes the entries from the file; give no KIND or ACTION")
    if batch_text is None and not (kind and action):
        raise click.UsageError("give KIND and ACTION (e.g. `record decision accept`), or --batch")
    with errors_to_exit(as_json):
        if batch_text is not None:
            request = _batch_request(json_argument(batch_text, "/entries"))
        else:
            data = {} if data_text is None else json_argument(data_text, "/entries/0/data")
            entry = {"kind": kind, "action": action, "data": data}
            if key is not None:
                entry["idempotency_key"] = key
            request = {"entries": [entry]}
        request = _with_keys(request)
        if (kind, action) == ("baseline", "initialize"):
            _init_if_absent(ctx)
    service = _service(ctx, as_json)
    try:
        answer = service.record(request)
    except IthacaError as exc:
        committed = exc.details.get("committed")
        if committed and not as_json:
            listed = ", ".join(str(index) for index in committed)
            click.echo(
                f"entries committed before the error: {listed} (retry with the same keys)",
                err=True,
            )
        fail(exc, as_json)
    show(answer, as_json, _render)


def _print_example(kind: str | None, action: str | None, as_json: bool) -> None:
    from ithaca.delivery import record_example

    if not (kind and action):
        raise click.UsageError("give KIND and ACTION, e.g. `record --example decision accept`")
    with errors_to_exit(as_json):
        data = record_example(kind, action)
    emit_json(data)
    if not as_json:
        text = json.dumps(data, ensure_ascii=False)
        click.echo(f"\n# record it:  ithaca record {kind} {action} --data '{text}'", err=True)


def _service(ctx: click.Context, as_json: bool) -> DeliveryService:
    return opened(ctx, as_json).delivery


def json_argument(text: str, pointer: str) -> Any:
    """JSON given inline, or ``@FILE`` (``@-`` reads standard input)."""
    if text.startswith("@"):
        name = text[1:]
        try:
            if name == "-":
                text = sys.stdin.read()
            else:
                with open(name, encoding="utf-8") as stream:
                    text = stream.read()
        except OSError as exc:
            raise validation_error(pointer, "UNREADABLE", f"cannot read {name}: {exc}") from exc
    try:
        return json.loads(text)
    except ValueError as exc:
        raise validation_error(pointer, "INVALID_JSON", f"is not JSON: {exc}") from exc


def _batch_request(value: Any) -> Any:
    """A batch file holds the request itself or just its list of entries."""
    return {"entries": value} if isinstance(value, list) else value


def _with_keys(request: Any) -> Any:
    """Fill in a generated key for every entry without one, and say which."""
    if not isinstance(request, dict) or not isinstance(request.get("entries"), list):
        return request
    entries = []
    for index, entry in enumerate(request["entries"]):
        if isinstance(entry, dict) and "idempotency_key" not in entry:
            entry = {**entry, "idempotency_key": f"cli-{ids.ulid()}"}
            click.echo(f"idempotency key for entry {index}: {entry['idempotency_key']}", err=True)
        entries.append(entry)
    return {**request, "entries": entries}


def _init_if_absent(ctx: click.Context) -> None:
    """``baseline initialize`` runs ``init`` when the project has no ``.ithaca/`` yet."""
    found = find_project(ctx.obj["project_path"])
    if found is not None and os.path.exists(found.db_path):
        return
    from ithaca.app import init_project

    project, made = init_project(ctx.obj["project_path"])
    project.close()
    if made:
        click.echo(f"Initialised Ithaca in {project.project.root}.", err=True)


def _render(answer: dict[str, Any]) -> None:
    out = console()
    for result in answer["results"]:
        subject = _subject(result.get("result") or {})
        done = "unchanged" if (result.get("result") or {}).get("unchanged") else result["status"]
        out.print(f"{done}: {result['kind']} {result['action']} {subject}".rstrip(), markup=False)
        for found in result["diagnostics"]:
            about = f" [{found['subject']}]" if "subject" in found else ""
            out.print(
                f"  {found['severity']} {found['code']}{about}: {found['message']}", markup=False
            )
    if answer["journal_seq"] is not None:
        out.print(f"journal seq {answer['journal_seq']}", style="dim", markup=False)


def _subject(result: dict[str, Any]) -> str:
    """The id (and revision or status) of what an entry recorded."""
    for name in ("baseline", "change", "decision", "task", "artifact"):
        if name in result:
            item = result[name]
            detail = f" r{item['revision']}" if "revision" in item else ""
            return f"{item['id']}{detail} ({item['status']})"
    if "event" in result:
        return f"{result['event']['kind']} (seq {result['event']['seq']})"
    return ""
