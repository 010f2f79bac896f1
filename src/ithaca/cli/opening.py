"""Opening the project a CLI command works on."""

from __future__ import annotations

import click

from ithaca.app import IthacaProject, open_project
from ithaca.cli.output import errors_to_exit


def opened(ctx: click.Context, as_json: bool = False) -> IthacaProject:
    """The project at ``--project``, migrated and reconciled; exits with a code if absent."""
    with errors_to_exit(as_json):
        project = open_project(ctx.obj["project_path"])
    ctx.call_on_close(project.close)
    return project
