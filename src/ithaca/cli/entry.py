"""The ``ithaca`` command: one click group per tool, each in its own module, all thin.

Commands find the project from ``--project`` (default: the current folder) and call the
same service functions the MCP server and hooks use. A command's module is imported only
when that command runs (or when help lists them all): each module pulls in its part's
service, and loading every part for one ``ithaca ultragoal get`` would cost a cold start
several times over.
"""

from __future__ import annotations

import importlib

import click

from ithaca import __version__, mapping

# Command name -> "module:attribute", in the order help lists them: each part's commands
# from its manifest, then the adapters' own.
COMMANDS = {
    **mapping("CLI_COMMANDS"),
    "mcp": "ithaca.cli.commands.mcp:command",
    "demo": "ithaca.cli.commands.demo:command",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported by name when first needed."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command)
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(version=__version__, prog_name="ithaca")
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


def main() -> None:
    cli(prog_name="ithaca")
