"""``ithaca mcp``: serve Ithaca's tools to an agent over stdio.

The ``mcp`` SDK is imported only when this command runs, so no other command pays for it.
Standard output carries the protocol; errors go to standard error with their code.
"""

from __future__ import annotations

import click

from ithaca.cli.output import errors_to_exit


@click.command("mcp")
@click.pass_context
def command(ctx: click.Context) -> None:
    """Serve Ithaca's MCP tools (load_protocols, protocols) over stdio."""
    from ithaca.mcp.server import main

    with errors_to_exit():
        main(ctx.obj["project_path"])
