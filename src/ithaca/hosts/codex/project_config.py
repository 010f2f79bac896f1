"""What Ithaca adds to a project's ``.codex/config.toml``, each as a checked addition.

Codex reads a project's MCP servers from ``[mcp_servers.<name>]``; Ithaca's is one table
of its own at the end of the file. In the sandboxed profile, Ithaca's permission profile
becomes the project's default. Hooks are on by default in Codex (``[features] hooks``; the
older ``codex_hooks`` name only draws a deprecation warning), so no feature flag is set; a
user's ``false`` is reported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ithaca.hosts.codex.checked_toml import CheckedToml
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install import server as install_server
from ithaca.hosts.install.files import invalid_settings
from ithaca.hosts.install.report import InstallReport
from ithaca.kernel import Conflict

FEATURE_KEYS = ("hooks", "codex_hooks")  # the second is the older, deprecated name
# The sandboxed profile: a permission profile (Codex 0.169.0) that extends the workspace
# sandbox, whose built-in rules keep .codex, .agents and .aws read-only, and .git too.
# Ithaca's state and Claude Code's wiring become read-only as well; .git is opened for
# commits and worktrees, except what git would run or obey outside the sandbox; the
# journal's seal key in the user's Ithaca home is denied outright.
PROFILE_SWITCH = "default_permissions"
PROFILE_NAME = "ithaca"


def permission_profile(root: Path) -> dict[str, Any]:
    """Ithaca's permission profile for the project at ``root``. ``.mcp.json`` and
    ``.claude`` are protected only where they exist: Codex stands a read-only placeholder
    in for a protected path that does not exist, a real ``.mcp.json`` would be hidden from
    ``git status`` by the exclusion of that stand-in, and with a denied path in the profile
    (the seal key) Codex 0.169.0 sometimes binds the ``.claude`` stand-in before making it,
    so that the session fails to start ("bwrap: Can't find source path .claude"). Where
    Claude Code is installed after Codex, `ithaca install codex` again protects it; the
    effect check sees its wiring either way."""
    names = [
        ".ithaca",
        *(name for name in (".claude", ".mcp.json") if (root / name).exists()),
    ]
    in_workspace = {
        ".git": "write",
        **{name: "read" for name in (*install_sandbox.GIT_PROTECTED, *names)},
    }
    return {
        "extends": ":workspace",
        "filesystem": {
            ":workspace_roots": in_workspace,
            **{name: "read" for name in install_sandbox.HOME_PROTECTED},
            # Not even readable: the key that seals the journal (Codex 0.169.0 stands an
            # unreadable empty file in for a path it denies).
            install_sandbox.seal_key(): "deny",
        },
    }


def register_server(
    config: CheckedToml,
    server_name: str,
    entry: dict[str, Any],
    previous: dict[str, Any] | None,
    report: InstallReport,
) -> None:
    """Add Ithaca's server table, replacing only a table an earlier install added."""
    servers = config.get(["mcp_servers"])
    if servers is not None and not isinstance(servers, dict):
        raise invalid_settings(config.path, "mcp_servers is not a table")
    key = ["mcp_servers", server_name]
    label = f"mcp server {server_name}"
    earlier = _addition(previous, "mcp_servers")
    if earlier is not None and earlier["key"] != key:
        config.take_back(earlier, report)  # the server was renamed
        earlier = None
    current = config.get(key)
    if install_server.same_server(current, entry):
        config.keep(earlier)
        report.unchanged.append(label)
        return
    if current is not None and not (
        earlier is not None and earlier["value"] == current and config.take_back(earlier, report)
    ):
        # Another program's server, or Ithaca's old table edited since: the user decides.
        raise Conflict(
            "MCP_SERVER_NAME_TAKEN",
            f"{config.path} already registers a different MCP server as {server_name!r}; "
            "choose another server name",
            {"path": str(config.path), "serverName": server_name},
        )
    if not config.append(label, key, entry, _server_table(server_name, entry)):
        raise invalid_settings(config.path, f"{label} could not be added as a table of its own")
    report.added.append(label)


def place_permission_profile(
    config: CheckedToml, profile: str, previous: dict[str, Any] | None, report: InstallReport
) -> None:
    """In the sandboxed profile, make Ithaca's permission profile the project's default:
    Codex's workspace sandbox, with Ithaca's state and the host wiring read-only to the
    agent's commands and patches. An earlier install's profile is taken back first."""
    wanted = permission_profile(config.path.parents[1])
    earlier = [_addition(previous, table) for table in (PROFILE_SWITCH, "permissions")]
    if profile == "sandboxed" and (
        config.get([PROFILE_SWITCH]) == PROFILE_NAME
        and config.get(["permissions", PROFILE_NAME]) == wanted
        and all(addition is not None for addition in earlier)
    ):
        for addition in earlier:
            config.keep(addition)
        report.unchanged.append(f"{install_sandbox.LABEL} (sandboxed)")
        return
    for addition in earlier:
        if addition is not None:
            config.take_back(addition, report)
    if profile != "sandboxed":
        return
    chosen = config.get([PROFILE_SWITCH])
    if chosen is not None or config.get(["permissions", PROFILE_NAME]) is not None:
        raise Conflict(
            "PERMISSIONS_TAKEN",
            f"{config.path} already sets {PROFILE_SWITCH} = {chosen!r} or a permission profile"
            f" named {PROFILE_NAME!r}; remove it, or install with --profile unsandboxed",
            {"path": str(config.path)},
        )
    switch = f'{PROFILE_SWITCH} = "{PROFILE_NAME}"\n\n'
    if not config.add(install_sandbox.LABEL, [PROFILE_SWITCH], PROFILE_NAME, 0, "", switch):
        raise invalid_settings(config.path, f"{PROFILE_SWITCH} could not be added")
    key = ["permissions", PROFILE_NAME]
    label = f"{install_sandbox.LABEL}: permissions"
    if not config.append(label, key, wanted, _profile_table(wanted)):
        raise invalid_settings(config.path, "Ithaca's permission profile could not be added")
    report.added.append(f"{install_sandbox.LABEL} (sandboxed)")


def check_hooks_feature(
    config: CheckedToml, previous: dict[str, Any] | None, report: InstallReport
) -> str:
    """Leave Codex's hooks feature to its default (on), taking back the deprecated
    ``codex_hooks = true`` an earlier install added; returns a degraded surface when the
    user switched hooks off, else ""."""
    earlier = _addition(previous, "features")
    if earlier is not None:
        config.take_back(earlier, report)
    features = config.get(["features"])
    if features is not None and not isinstance(features, dict):
        raise invalid_settings(config.path, "features is not a table")
    off = [name for name in FEATURE_KEYS if (features or {}).get(name) is False]
    return f"hooks are switched off ([features] {off[0]} = false)" if off else ""


def _profile_table(profile: dict[str, Any]) -> str:
    filesystem = dict(profile["filesystem"])
    in_workspace = filesystem.pop(":workspace_roots")
    inline = ", ".join(f"{json.dumps(name)} = {json.dumps(a)}" for name, a in in_workspace.items())
    return (
        f"[permissions.{PROFILE_NAME}]\n"
        f"extends = {json.dumps(profile['extends'])}\n\n"
        f"[permissions.{PROFILE_NAME}.filesystem]\n"
        f'":workspace_roots" = {{ {inline} }}\n'
        + "".join(f"{json.dumps(name)} = {json.dumps(a)}\n" for name, a in filesystem.items())
    )


def _server_table(server_name: str, entry: dict[str, Any]) -> str:
    """``[mcp_servers.<name>]`` as TOML text (a JSON string is a TOML basic string)."""
    args = ", ".join(json.dumps(arg, ensure_ascii=False) for arg in entry["args"])
    command = json.dumps(entry["command"], ensure_ascii=False)
    return f"[mcp_servers.{server_name}]\ncommand = {command}\nargs = [{args}]\n"


def _addition(manifest: dict[str, Any] | None, table: str) -> dict[str, Any] | None:
    """The addition an earlier install made to ``table``, if any."""
    additions = (manifest or {}).get("configAdditions", [])
    return next((item for item in additions if item["key"][0] == table), None)
