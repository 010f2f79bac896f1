"""``ithaca sync inspect|import|publish|migrate|merge-driver|install-driver``.

The first four build the request the MCP ``sync`` tool takes and run it through the same
service function, so refusals carry the same codes. ``import --rehash`` is the user-only
exception: it shows a hand-edited ledger's edits and asks a person at a terminal to
confirm before accepting them. ``merge-driver`` is what Git runs for the ledger (it opens
no database and exits 0, 1 or 2 as Git expects); ``install-driver`` registers it. The
group also runs on its own (``python -m ithaca.cli.commands.sync``), for the project in
the current folder.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, fail, json_option, show
from ithaca.delivery import run_merge_driver
from ithaca.kernel import IthacaError, ids

key_option = click.option("--key", help="Idempotency key (made up and printed when omitted).")


@click.group("sync")
@click.pass_context
def group(ctx: click.Context) -> None:
    """Share delivery state through the team ledger .ithaca/tasks/tasks.json."""
    ctx.ensure_object(dict).setdefault("project_path", ".")


@group.command("inspect")
@json_option
@click.pass_context
def inspect(ctx: click.Context, as_json: bool) -> None:
    """Show how the ledger file, the last sync and the database relate (writes nothing)."""
    _run(ctx, {"action": "inspect"}, as_json)


@group.command("import")
@click.option(
    "--resolve",
    "choices",
    multiple=True,
    metavar="TYPE:ID=ours|theirs",
    help="Choose a side for a conflicting record (repeatable).",
)
@click.option(
    "--rehash",
    is_flag=True,
    help="Accept a ledger edited by hand, after seeing the edits (user only).",
)
@key_option
@json_option
@click.pass_context
def import_(
    ctx: click.Context, choices: tuple[str, ...], rehash: bool, key: str | None, as_json: bool
) -> None:
    """Merge the ledger file into the database, record by record."""
    if rehash:
        if choices:
            raise click.UsageError("--rehash takes no --resolve; resolve after it")
        _rehash(ctx, _key(key), as_json)
        return
    resolve = {}
    for choice in choices:
        label, equals, side = choice.rpartition("=")
        if not equals or not label:
            raise click.UsageError(f"--resolve takes TYPE:ID=ours|theirs, not {choice!r}")
        resolve[label] = side
    request: dict[str, Any] = {"action": "import", "idempotency_key": _key(key)}
    if resolve:
        request["resolve"] = resolve
    _run(ctx, request, as_json)


@group.command("publish")
@key_option
@json_option
@click.pass_context
def publish(ctx: click.Context, key: str | None, as_json: bool) -> None:
    """Write the database's team-visible state to the ledger file."""
    _run(ctx, {"action": "publish", "idempotency_key": _key(key)}, as_json)


@group.command("migrate")
@key_option
@json_option
@click.pass_context
def migrate(ctx: click.Context, key: str | None, as_json: bool) -> None:
    """Rewrite the ledger file in this version's form (backed up first)."""
    _run(ctx, {"action": "migrate", "idempotency_key": _key(key)}, as_json)


@group.command("merge-driver")
@click.argument("base")
@click.argument("ours")
@click.argument("theirs")
@click.argument("path", required=False)
def merge_driver(base: str, ours: str, theirs: str, path: str | None) -> None:
    """Git's merge driver for the ledger: %O %A %B [%P]."""
    sys.exit(run_merge_driver([base, ours, theirs, *([path] if path else [])]))


@group.command("install-driver")
@click.option("--command", "command", help="Driver command (default: this ithaca).")
@json_option
@click.pass_context
def install_driver(ctx: click.Context, command: str | None, as_json: bool) -> None:
    """Register the ledger merge driver in .gitattributes and the repository config."""
    project = opened(ctx, as_json)
    with errors_to_exit(as_json):
        changed = project.delivery.register_merge_driver(command)
    show({"changed": changed}, as_json, _render_installed)


def _rehash(ctx: click.Context, key: str, as_json: bool) -> None:
    """Show each hand-edited record against the last sync, then ask the user to confirm."""
    from ithaca.kernel import require_user

    project = opened(ctx, as_json)
    with errors_to_exit(as_json):
        state_digest, edited, lines = project.delivery.ledger_edits()
        for line in lines:
            click.echo(line, err=as_json)
        require_user(f"accept {edited} hand-edited ledger record(s)", state_digest[:12])
        answer = project.delivery.rehash(state_digest, key)
    show(answer, as_json, _render)


def _key(key: str | None) -> str:
    if key is None:
        key = f"cli-{ids.ulid()}"
        click.echo(f"idempotency key: {key}", err=True)
    return key


def _run(ctx: click.Context, request: dict[str, Any], as_json: bool) -> None:
    project = opened(ctx, as_json)
    try:
        answer = project.delivery.sync(request)
    except IthacaError as exc:
        fail(exc, as_json)
    show(answer, as_json, _render)


def _render(answer: dict[str, Any]) -> None:
    out = console()
    head = "replayed" if answer.get("replayed") else answer["status"]
    facts = [
        f"{name.replace('_', ' ')} {answer[name]}"
        for name in ("generation", "records", "changed", "applied", "local_unpublished", "incoming")
        if answer.get(name) is not None
    ]
    out.print(f"{head}" + (f": {', '.join(facts)}" if facts else ""), markup=False)
    for name in ("state_digest", "file_state_digest", "base_state_digest", "backup"):
        if answer.get(name):
            out.print(f"  {name.replace('_', ' ')}: {answer[name]}", markup=False)
    for found in answer.get("conflicts", []):
        out.print(f"  conflict {found['type']}:{found['id']} ({found['reason']})", markup=False)
    if "merge_driver_registered" in answer:
        out.print(f"  merge driver registered: {answer['merge_driver_registered']}", markup=False)
    for note in answer["diagnostics"]:
        about = f" [{note['subject']}]" if "subject" in note else ""
        out.print(f"  {note['severity']} {note['code']}{about}: {note['message']}", markup=False)
    if answer.get("journal_seq") is not None:
        out.print(f"journal seq {answer['journal_seq']}", style="dim", markup=False)


def _render_installed(answer: dict[str, Any]) -> None:
    out = console()
    if not answer["changed"]:
        out.print("the ledger merge driver was already registered", markup=False)
    for line in answer["changed"]:
        out.print(f"registered {line}", markup=False)


if __name__ == "__main__":
    group()
