"""``ithaca init``: create ``.ithaca/`` in this repository (safe to run again)."""

from __future__ import annotations

import click

from ithaca.cli.output import emit_json, errors_to_exit, json_option


@click.command("init")
@json_option
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """Create .ithaca/ in this repository (safe to run again)."""
    from ithaca.app import init_project

    with errors_to_exit(as_json):
        project, made = init_project(ctx.obj["project_path"])
    ctx.call_on_close(project.close)
    result = {"root": str(project.project.root), "created": made}
    if as_json:
        emit_json(result)
    elif made:
        click.echo(f"Initialised Ithaca in {project.project.root}:")
        for item in made:
            click.echo(f"  + {item}")
    else:
        click.echo(f"Ithaca is already set up in {project.project.root}.")
