"""``ithaca uninstall HOST``: remove exactly what ``ithaca install`` added."""

from __future__ import annotations

import click

from ithaca.cli.commands.install import HOSTS, remove_wiring
from ithaca.cli.output import json_option


@click.command("uninstall")
@click.argument("host", type=click.Choice(HOSTS), metavar="HOST")
@json_option
@click.pass_context
def command(ctx: click.Context, host: str, as_json: bool) -> None:
    """Remove exactly what `ithaca install` added."""
    remove_wiring(ctx, host, as_json)
