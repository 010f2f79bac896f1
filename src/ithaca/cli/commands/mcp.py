"""``ithaca mcp``: serve Ithaca's tools to an agent over stdio.

The ``mcp`` SDK is imported only when this command runs, so no other command pays for it.
Standard output carries the protocol; errors go to standard error with their code.
"""

from __future__ import annotations

import click

from ithaca.cli.output import errors_to_exit


@click.command("mcp")
@click.option(
    "--plugin",
    is_flag=True,
    help="Started by the Claude Code plugin: offer no tools where the project's own "
    ".mcp.json registers Ithaca's server (ithaca install claude).",
)
@click.pass_context
def command(ctx: click.Context, plugin: bool) -> None:
    """Serve Ithaca's MCP tools to an agent over stdio (load_protocols first, then the
    protocols, notebook, ulysses, knowledge, delivery and ultragoal tools)."""
    from ithaca.mcp.server import main

    with errors_to_exit():
        main(ctx.obj["project_path"], plugin=plugin)
