"""``ithaca knowledge``: search and read the lessons closed Ulysses sessions left behind.

Both commands only read (the index catches up with ``.ithaca/knowledge/`` on the way) and
go through the same ``KnowledgeService`` as the MCP ``knowledge`` tool, so ``--json``
prints exactly what an agent receives.
"""

from __future__ import annotations

from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.ulysses import SEARCH_LIMIT_DEFAULT, KnowledgeService


@click.group("knowledge")
def group() -> None:
    """Lessons from closed Ulysses sessions (.ithaca/knowledge/)."""


def _service(ctx: click.Context, as_json: bool) -> KnowledgeService:
    return opened(ctx, as_json).knowledge


@group.command("search")
@click.argument("query")
@click.option(
    "--limit",
    type=int,
    default=SEARCH_LIMIT_DEFAULT,
    show_default=True,
    help="How many lessons (1-20).",
)
@json_option
@click.pass_context
def search_command(ctx: click.Context, query: str, limit: int, as_json: bool) -> None:
    """Lessons whose words match QUERY, best first."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        found = service.search({"query": query, "limit": limit})

    def render(value: dict[str, Any]) -> None:
        out = console()
        for diagnostic in value.get("diagnostics", []):
            out.print(f"note {diagnostic['code']}: {diagnostic['message']}", markup=False)
        if not value["results"]:
            out.print("No lessons match.")
            return
        for hit in value["results"]:
            out.print(
                f"{hit['id']}  {hit['date']}  {hit['terminalState']}", style="bold", markup=False
            )
            out.print(f"  {hit['title']}", markup=False)
            out.print(f"  {hit['snippet']}", markup=False)
            out.print(f"  {hit['path']}", style="dim", markup=False)

    show(found, as_json, render)


@group.command("get")
@click.argument("lesson_id", metavar="ID")
@json_option
@click.pass_context
def get_command(ctx: click.Context, lesson_id: str, as_json: bool) -> None:
    """One lesson: its record (--json) or its Markdown."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        lesson = service.get({"id": lesson_id})

    def render(value: dict[str, Any]) -> None:
        from rich.markdown import Markdown

        out = console()
        out.print(f"{value['id']}  {value['path']}", markup=False)
        out.print(Markdown(value["markdown"]))

    show(lesson, as_json, render)
