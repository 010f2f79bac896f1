"""``ithaca demo``: play Ithaca's main job in a throwaway repository."""

from __future__ import annotations

import click


@click.command("demo")
@click.option("--keep", is_flag=True, help="Keep the temporary repository for inspection.")
def command(keep: bool) -> None:
    """Create a temporary git repository and play an agent turn through the real hooks
    and MCP server, printing what happens."""
    from ithaca.demo import run

    raise SystemExit(run(click.echo, keep=keep))
