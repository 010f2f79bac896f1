"""``ithaca notebook``: the notebook facility from a terminal (docs/ulysses.md, "Validators").

Each command is one operation of the ``notebook`` tool with dashes for underscores, over the
same ``NotebookService`` and its checks, so a refusal carries the same code here as over
MCP. Sources come from ``--source TEXT`` or ``--file PATH`` (``-`` reads standard input);
``run-cell`` takes ``--observed JSON`` (``-`` reads standard input; default ``null``) and
exits 1 when the validator does not pass, like ``protocols test``.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel import invalid_field
from ithaca.validators import NotebookService


@click.group("notebook")
def group() -> None:
    """Notebooks of validator cells; every cell version is kept."""


def _service(ctx: click.Context, as_json: bool) -> NotebookService:
    return opened(ctx, as_json).notebooks


def _source_options(command: Any) -> Any:
    options = [
        click.option("--source", help="The cell's source text."),
        click.option(
            "--file",
            "source_file",
            type=click.File("r", encoding="utf-8"),
            help="Read the source from a file ('-' for standard input).",
        ),
        click.option("--language", help="python, javascript, typescript or shell."),
        click.option("--filename", help="The cell's file name, such as check.py."),
        click.option("--mode", help="judge (default) or probe."),
        click.option("--timeout-s", "timeout_s", type=float, help="At most this many seconds."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _cell_fields(source: str | None, source_file: IO[str] | None, **flags: Any) -> dict[str, Any]:
    """The service arguments the source and field flags give."""
    if source is not None and source_file is not None:
        raise invalid_field("/source", "CONFLICT", "give --source or --file, not both")
    fields = {name: value for name, value in flags.items() if value is not None}
    if isinstance(fields.get("timeout_s"), float) and fields["timeout_s"].is_integer():
        fields["timeout_s"] = int(fields["timeout_s"])
    if source_file is not None:
        try:
            with source_file:
                fields["source"] = source_file.read()
        except UnicodeDecodeError as exc:
            raise invalid_field("/source", "NOT_UTF8", f"{source_file.name} is not UTF-8") from exc
    elif source is not None:
        fields["source"] = source
    return fields


@group.command("create")
@click.argument("title")
@click.option("--language", help="The notebook's default cell language (python).")
@json_option
@click.pass_context
def create_command(ctx: click.Context, title: str, language: str | None, as_json: bool) -> None:
    """Create a notebook."""
    service = _service(ctx, as_json)
    arguments: dict[str, Any] = {"title": title}
    if language is not None:
        arguments["language"] = language
    with errors_to_exit(as_json):
        created = service.create(arguments)
    show(
        created,
        as_json,
        lambda value: click.echo(
            f"Created notebook {value['notebookId']} ({value['language']}): {value['title']}"
        ),
    )


@group.command("add-cell")
@click.argument("notebook_id")
@_source_options
@click.option("--kind", help="code (default) or markdown.")
@json_option
@click.pass_context
def add_cell_command(
    ctx: click.Context,
    notebook_id: str,
    source: str | None,
    source_file: IO[str] | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Add a cell at the end of a notebook."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        fields = _cell_fields(source, source_file, **flags)
        if "source" not in fields:
            raise invalid_field("/source", "REQUIRED", "give --source or --file")
        added = service.add_cell({"notebookId": notebook_id, **fields})
    show(added, as_json, lambda value: click.echo(f"Added {_cell_line(value)}"))


@group.command("update-cell")
@click.argument("notebook_id")
@click.argument("cell_id")
@_source_options
@json_option
@click.pass_context
def update_cell_command(
    ctx: click.Context,
    notebook_id: str,
    cell_id: str,
    source: str | None,
    source_file: IO[str] | None,
    as_json: bool,
    **flags: Any,
) -> None:
    """Store a new version of a cell (nothing when nothing changes)."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        fields = _cell_fields(source, source_file, **flags)
        updated = service.update_cell({"notebookId": notebook_id, "cellId": cell_id, **fields})
    show(
        updated,
        as_json,
        lambda value: click.echo(f"Cell {value['cellId']} is at version {value['version']}."),
    )


@group.command("get")
@click.argument("notebook_id")
@click.option("--cell", "cell_id", help="Show one cell and its versions.")
@click.option("--version", type=int, help="That cell's version (default: the latest).")
@json_option
@click.pass_context
def get_command(
    ctx: click.Context, notebook_id: str, cell_id: str | None, version: int | None, as_json: bool
) -> None:
    """Show a notebook with its latest cells, or one cell version."""
    service = _service(ctx, as_json)
    arguments: dict[str, Any] = {"notebookId": notebook_id}
    if cell_id is not None:
        arguments["cellId"] = cell_id
    if version is not None:
        arguments["version"] = version
    with errors_to_exit(as_json):
        found = service.get(arguments)

    def render(value: dict[str, Any]) -> None:
        if "cell" in value:
            _print_cell(value["cell"])
            listed = ", ".join(f"v{entry['version']} {entry['at']}" for entry in value["versions"])
            click.echo(f"Versions: {listed}")
            return
        click.echo(f"{value['title']}  ({value['notebookId']}, {value['language']})")
        for cell in value["cells"]:
            click.echo()
            _print_cell(cell)

    show(found, as_json, render)


@group.command("list")
@json_option
@click.pass_context
def list_command(ctx: click.Context, as_json: bool) -> None:
    """List notebooks, most recently changed first."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        found = service.list({})

    def render(rows: list[dict[str, Any]]) -> None:
        if not rows:
            click.echo("No notebooks.")
            return
        from rich.table import Table

        table = Table(box=None, header_style="bold")
        table.add_column("id", no_wrap=True)  # whole, to copy: the title wraps instead
        table.add_column("title", overflow="fold", min_width=10)
        for column in ("language", "cells", "updated"):
            table.add_column(column, no_wrap=True)
        for row in rows:
            table.add_row(
                row["notebookId"],
                row["title"],
                row["language"],
                str(row["cellCount"]),
                row["updatedAt"],
            )
        console().print(table)

    show(found, as_json, render)


@group.command("run-cell")
@click.argument("notebook_id")
@click.argument("cell_id")
@click.option("--observed", default="null", help="Observed data as JSON ('-' for stdin).")
@click.option("--version", type=int, help="Run this version (default: the latest).")
@json_option
@click.pass_context
def run_cell_command(
    ctx: click.Context,
    notebook_id: str,
    cell_id: str,
    observed: str,
    version: int | None,
    as_json: bool,
) -> None:
    """Dry-run a validator cell on observed data; exit 1 unless it passes."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        arguments: dict[str, Any] = {
            "notebookId": notebook_id,
            "cellId": cell_id,
            "observed": _parse_observed(observed),
        }
        if version is not None:
            arguments["version"] = version
        result = service.run_cell(arguments)

    def render(value: dict[str, Any]) -> None:
        verdict = "PASS" if value["pass"] else "FAIL"
        cause = f" (cause: {value['cause']})" if value.get("cause") else ""
        click.echo(f"{verdict}: {value['reason']}{cause}")
        click.echo(f"exit code {value['exitCode']}, {value['durationMs']} ms")
        for diagnostic in value.get("diagnostics") or []:
            click.echo(f"note {diagnostic['code']}: {diagnostic['message']}")
        for stream in ("stdout", "stderr"):
            if value.get(stream):
                click.echo(f"--- {stream}\n{value[stream].rstrip()}")

    show(result, as_json, render)
    if not result["pass"]:
        ctx.exit(1)


@group.command("export")
@click.argument("notebook_id")
@json_option
@click.pass_context
def export_command(ctx: click.Context, notebook_id: str, as_json: bool) -> None:
    """Print a notebook as Markdown."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        exported = service.export({"notebookId": notebook_id})
    show(exported, as_json, lambda value: click.echo(value["markdown"], nl=False))


def _parse_observed(text: str) -> Any:
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)  # NaN and Infinity parse; the service refuses them
    except ValueError as exc:
        raise invalid_field("/observed", "INVALID_JSON", f"--observed is not JSON: {exc}") from exc


def _cell_line(cell: dict[str, Any]) -> str:
    if cell["role"] == "markdown":
        return f"cell {cell['cellId']} v{cell['version']}: markdown"
    mode = f", {cell['mode']}" if cell.get("mode") else ""
    return (
        f"cell {cell['cellId']} v{cell['version']}: {cell['role']} {cell['filename']}"
        f" ({cell['language']}{mode})"
    )


def _print_cell(cell: dict[str, Any]) -> None:
    click.echo(_cell_line(cell))
    for line in cell["source"].splitlines():
        click.echo(f"    {line}")
