"""``ithaca install <host>`` and ``ithaca uninstall <host>``: wire Ithaca into a host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel.project import Project

HOSTS = ("claude",)


def _project(ctx: click.Context) -> Project:
    from ithaca.kernel.project import find_project, planned_project

    return find_project(ctx.obj["project_path"]) or planned_project(ctx.obj["project_path"])


def _render(report: dict[str, Any]) -> None:
    out = console()
    for key, mark in (("added", "+"), ("removed", "-"), ("unchanged", "=")):
        for item in report.get(key, []):
            out.print(f"  {mark} {item}", markup=False)
    for note in report.get("notes", []):
        out.print(f"  ! {note}", markup=False)
    if report.get("files"):
        out.print("Files: " + ", ".join(report["files"]), markup=False)


@click.command()
@click.argument("host", type=click.Choice(HOSTS), metavar="HOST")
@click.option(
    "--stop-hook-block-cap",
    type=click.IntRange(min=0),
    metavar="N",
    help="Consecutive Stop-hook blocks Claude Code allows (0: no cap). By default "
    "ultragoal.max_iterations_default + 2, unless the project already has 0 or more.",
)
@json_option
@click.pass_context
def install(ctx: click.Context, host: str, stop_hook_block_cap: int | None, as_json: bool) -> None:
    """Register Ithaca's hooks, MCP server and skills with a host, keeping your own settings."""
    from ithaca.hosts import install_claude
    from ithaca.kernel import config

    project = _project(ctx)
    with errors_to_exit(as_json):
        # The MCP server, the hooks and the installer all take the name from configuration.
        configured = config.load(project.state_root)
        report = install_claude.install(
            Path(project.root),
            server_name=configured["protocols"]["mcp_server_name"],
            max_iterations_default=configured["ultragoal"]["max_iterations_default"],
            stop_hook_block_cap=stop_hook_block_cap,
        ).to_dict()
    _compile_hook_modules()
    show(report, as_json, _render)


def _compile_hook_modules() -> None:
    """Write Ithaca's bytecode now, so no hook call pays for compiling (a host may run
    hooks with ``PYTHONDONTWRITEBYTECODE`` set, which would make every call recompile)."""
    import compileall

    import ithaca

    compileall.compile_dir(Path(ithaca.__file__).parent, quiet=1)


@click.command()
@click.argument("host", type=click.Choice(HOSTS), metavar="HOST")
@json_option
@click.pass_context
def uninstall(ctx: click.Context, host: str, as_json: bool) -> None:
    """Remove exactly what `ithaca install` added."""
    from ithaca.hosts import install_claude

    with errors_to_exit(as_json):
        report = install_claude.uninstall(Path(_project(ctx).root)).to_dict()
    show(report, as_json, _render)
