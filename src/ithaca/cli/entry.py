"""The ``ithaca`` command: one click group per tool, each in its own module, all thin.

Commands find the project from ``--project`` (default: the current folder) and call the
same service functions the MCP server and hooks use. A command's module is imported only
when that command runs (or when help lists them all): each module pulls in its part's
service, and loading every part for one ``ithaca ultragoal get`` would cost a cold start
several times over.
"""

from __future__ import annotations

import importlib
import os
import sys

import click

from ithaca import __version__, mapping
from ithaca.cli.output import fail, remember_project, state_database
from ithaca.kernel import InvalidInput, IthacaError, storage_fault

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
    help="Folder inside the project.",
)
@click.pass_context
def cli(ctx: click.Context, project_path: str) -> None:
    """Ithaca: commitments for coding agents, held outside the agent and enforced by hooks."""
    if not os.path.isdir(project_path):
        what = "is not a folder" if os.path.exists(project_path) else "does not exist"
        fail(
            InvalidInput(
                "PROJECT_PATH_MISSING",
                f"{project_path} {what}; pass --project a folder inside your repository",
                {"path": project_path},
            )
        )
    ctx.obj = {"project_path": project_path}
    remember_project(project_path)


def main() -> None:
    """``ithaca``: the group, with a last word for what no command turned into a coded error
    (a coded error a command let through, a storage fault, an interrupt, a bug), so that no
    traceback reaches a user; with ``--json`` that word is JSON too. A full disk, a
    read-only file system, a permission refused and a locked store are each named with
    their fix (``kernel.storage_faults``). ``ITHACA_DEBUG=1`` lets the traceback through.
    Click runs without its own last word (``standalone_mode=False``), which would turn an
    interrupt into a bare "Aborted!"; its usage errors are shown as it shows them."""
    as_json = "--json" in sys.argv[1:]
    try:
        code = cli.main(prog_name="ithaca", standalone_mode=False)
    except (KeyboardInterrupt, click.Abort):
        click.echo("error INTERRUPTED: stopped by the user; nothing half-done is kept", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except IthacaError as exc:
        fail(exc, as_json)
    except Exception as exc:
        if os.environ.get("ITHACA_DEBUG"):
            raise
        fault = storage_fault(exc, state_database())
        if fault is not None:
            fail(fault, as_json)
        fail(
            IthacaError(
                "INTERNAL_ERROR",
                f"Ithaca failed unexpectedly ({type(exc).__name__}: {exc}); run `ithaca doctor`,"
                " and rerun with ITHACA_DEBUG=1 to see the traceback for a bug report",
            ),
            as_json,
        )
    sys.exit(code if isinstance(code, int) else 0)
