"""``ithaca install <host>``: wire Ithaca into a host, check that wiring
(``ithaca install --doctor``), and take it back out (also ``ithaca uninstall``)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

import click

from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel import Project

HOSTS = ("claude", "codex")


def _project(ctx: click.Context) -> Project:
    from ithaca.kernel import find_project, planned_project

    return find_project(ctx.obj["project_path"]) or planned_project(ctx.obj["project_path"])


def _installer(host: str) -> ModuleType:
    from ithaca.hosts.claude import installer as install_claude
    from ithaca.hosts.codex import installer as install_codex

    return {"claude": install_claude, "codex": install_codex}[host]


def _render(report: dict[str, Any]) -> None:
    out = console()
    for key, mark in (("added", "+"), ("removed", "-"), ("unchanged", "=")):
        for item in report.get(key, []):
            out.print(f"  {mark} {item}", markup=False)
    for note in report.get("notes", []):
        out.print(f"  ! {note}", markup=False)
    if report.get("files"):
        out.print("Files: " + ", ".join(report["files"]), markup=False)
    if report.get("degraded"):
        out.print("Degraded on this host:", markup=False)
        for surface in report["degraded"]:
            out.print(f"  ~ {surface}", markup=False)


PLUGIN_NOTE = (
    "profile plugin: the Ithaca plugin ({plugin}) wires Claude Code here, without a sandbox"
    " or deny rules (shell commands are checked by their text only); for the sandboxed"
    " profile, disable it (`claude plugin disable {plugin}`) and run `ithaca install claude`"
)
BESIDE_PLUGIN = (
    "the Ithaca plugin ({plugin}) is enabled too; its hooks and MCP server step aside in this"
    " project for the install's"
)


def _render_doctor(result: dict[str, Any]) -> None:
    from ithaca.hosts.install.doctor import PLUGIN_PROFILE
    from ithaca.hosts.install.sandbox import UNSANDBOXED_NOTE

    out = console()
    for host in result["hosts"]:
        if host.get("profile") == PLUGIN_PROFILE:
            out.print(f"{host['host']}: {PLUGIN_NOTE.format(plugin=host['plugin'])}", markup=False)
            continue
        if host.get("plugin"):
            out.print(
                f"{host['host']}: {BESIDE_PLUGIN.format(plugin=host['plugin'])}", markup=False
            )
        if host.get("profile") == "unsandboxed":
            out.print(f"{host['host']}: {UNSANDBOXED_NOTE}", markup=False)
        elif host.get("profile"):
            out.print(f"{host['host']}: profile {host['profile']}", markup=False)
        if not host["findings"]:
            out.print(f"{host['host']}: {host['checked']} entries as installed", markup=False)
            continue
        state = "installed" if host["installed"] else "not installed"
        out.print(f"{host['host']}: {state}, {len(host['findings'])} problem(s)", markup=False)
        for item in host["findings"]:
            out.print(f"  ! {item['code']}: {item['message']}", markup=False)


@click.command("install")
@click.argument("host", type=click.Choice(HOSTS), metavar="[HOST]", required=False)
@click.option(
    "--doctor",
    is_flag=True,
    help="Check the install against its recorded provenance without changing anything; "
    "exit 1 when an entry is missing or was edited. Without HOST: every installed host.",
)
@click.option(
    "--uninstall",
    "remove",
    is_flag=True,
    help="Remove exactly what the install added (the same as `ithaca uninstall HOST`).",
)
@click.option(
    "--stop-hook-block-cap",
    type=click.IntRange(min=0),
    metavar="N",
    help="Claude Code only: consecutive Stop-hook blocks it allows (0: no cap). By default "
    "ultragoal.max_iterations_default + 2, unless the project already has 0 or more.",
)
@click.option(
    "--profile",
    type=click.Choice(["sandboxed", "unsandboxed"]),
    help="sandboxed (Claude Code's default): the agent's shell runs in Claude Code's OS "
    "sandbox, with Ithaca's state and wiring read-only. unsandboxed: only the hooks' text "
    "guard (Codex's only profile for now).",
)
@json_option
@click.pass_context
def command(
    ctx: click.Context,
    host: str | None,
    doctor: bool,
    remove: bool,
    stop_hook_block_cap: int | None,
    profile: str | None,
    as_json: bool,
) -> None:
    """Register Ithaca's hooks, MCP server, skills and reviewer agent with a host (claude or
    codex), keeping your own settings. Codex gets the hooks and the MCP server; the report
    lists what it offers less of than Claude Code."""
    if doctor and remove:
        raise click.UsageError("--doctor and --uninstall do not go together")
    if stop_hook_block_cap is not None and (doctor or remove or host != "claude"):
        raise click.UsageError(
            "--stop-hook-block-cap sets Claude Code's Stop-hook cap; it goes only with "
            "`ithaca install claude`"
        )
    if profile is not None and (doctor or remove):
        raise click.UsageError("--profile goes only with an install")
    if doctor:
        _doctor(ctx, host, as_json)
        return
    if host is None:
        raise click.UsageError("Missing argument 'HOST' (claude or codex).")
    if remove:
        remove_wiring(ctx, host, as_json)
        return
    from ithaca.kernel import config

    project = _project(ctx)
    with errors_to_exit(as_json):
        # The MCP server, the hooks and the installer all take the name from configuration.
        configured = config.load(project.state_root)
        server_name = configured["protocols"]["mcp_server_name"]
        root = Path(project.root)
        if host == "claude":
            done = _installer(host).install(
                root,
                server_name=server_name,
                max_iterations_default=configured["ultragoal"]["max_iterations_default"],
                stop_hook_block_cap=stop_hook_block_cap,
                profile=profile or "sandboxed",
            )
        else:
            done = _installer(host).install(
                root, server_name=server_name, profile=profile or "sandboxed"
            )
        _accept(project, f"ithaca install {host}")
    _compile_hook_modules()
    show(done.to_dict(), as_json, _render)


def _compile_hook_modules() -> None:
    """Write Ithaca's bytecode now, so no hook call pays for compiling (a host may run
    hooks with ``PYTHONDONTWRITEBYTECODE`` set, which would make every call recompile)."""
    import compileall

    import ithaca

    compileall.compile_dir(Path(ithaca.__file__).parent, quiet=1)


def _doctor(ctx: click.Context, host: str | None, as_json: bool) -> None:
    from ithaca.hosts.install.doctor import check

    root = Path(_project(ctx).root)
    with errors_to_exit(as_json):
        checked = [check(root, name) for name in ([host] if host else HOSTS)]
    installed = [result for result in checked if result["installed"]]
    hosts = checked if host else (installed or checked)
    result = {"ok": not any(item["findings"] for item in hosts), "hosts": hosts}
    show(result, as_json, _render_doctor)
    if not result["ok"]:
        ctx.exit(1)


def remove_wiring(ctx: click.Context, host: str, as_json: bool) -> None:
    """Take out exactly what the install of ``host`` added, and say what was removed."""
    project = _project(ctx)
    with errors_to_exit(as_json):
        report = _installer(host).uninstall(Path(project.root)).to_dict()
        _accept(project, f"ithaca uninstall {host}")
    show(report, as_json, _render)


def _accept(project: Project, reason: str) -> None:
    """The wiring Ithaca just wrote is what the effect check protects from now on."""
    from ithaca.kernel import find_project, lockdown

    found = find_project(project.root)  # an install before `ithaca init` has no database
    if found is not None:
        lockdown.accept(found, reason=reason)
