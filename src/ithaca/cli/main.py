"""The ``ithaca`` command: one click group per tool, each in its own module, all thin.

Commands find the project from ``--project`` (default: the current folder) and call the
same service functions the MCP server and hooks use.
"""

from __future__ import annotations

import click

from ithaca.cli import (
    archive,
    checkpoint,
    context_command,
    demo,
    hook,
    install,
    knowledge,
    mcp_command,
    notebook,
    project,
    protocols,
    record,
    ultragoal,
    ulysses,
)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ithaca")
@click.option(
    "--project",
    "project_path",
    default=".",
    show_default=True,
    type=click.Path(exists=True, file_okay=False),
    help="Folder inside the project.",
)
@click.pass_context
def cli(ctx: click.Context, project_path: str) -> None:
    """Ithaca: commitments for coding agents, held outside the agent and enforced by hooks."""
    ctx.obj = {"project_path": project_path}


for command in (
    project.init,
    project.status,
    project.log,
    project.doctor,
    protocols.group,
    notebook.group,
    ulysses.group,
    ultragoal.group,
    knowledge.group,
    context_command.context,
    record.record,
    checkpoint.checkpoint,
    archive.archive,
    install.install,
    install.uninstall,
    mcp_command.mcp,
    hook.hook,
    demo.demo,
):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="ithaca")
