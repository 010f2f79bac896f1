"""``ithaca next``: the single next thing to do here, and the command that does it."""

from __future__ import annotations

import click

from ithaca.cli.glance import area_lines, next_step
from ithaca.cli.opening import opened
from ithaca.cli.output import json_option, show


@click.command("next")
@json_option
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """The single next thing to do, and its command."""
    step = next_step(area_lines(opened(ctx, as_json)))

    def render(value: dict[str, str]) -> None:
        click.echo(f"{value['area']}: {value['state']}")
        if value["next"]:
            click.echo(f"  {value['next']}")

    show(step, as_json, render)
