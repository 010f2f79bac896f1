"""Wire Ithaca into a Claude Code project, and take exactly that wiring back out.

Claude Code reads hooks from ``.claude/settings.json`` and project MCP servers from
``.mcp.json``. Both files belong to the user as much as to Ithaca (they are often
committed, and hold the user's own hooks and servers), so the installer merges its
entries in place and never reorders, rewrites or removes anything else.

Ownership is decided by the install manifest, never by guessing which commands look like
Ithaca's: ``<state root>/.runtime/installs/claude.json`` lists every hook and the MCP entry
an install added. Uninstall removes what it lists; a later install replaces the listed
entries in place, so moving the Ithaca executable never leaves stale or duplicate hooks
behind.

It also copies the skills and the Ultragoal reviewer agent Ithaca ships into
``.claude/skills/`` and ``.claude/agents/``. The manifest keeps each file's digest: a file
at one of those paths that Ithaca did not write refuses the install, and uninstall removes
only files that are still as installed.

The install also raises Claude Code's cap on consecutive Stop-hook blocks
(``env.CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``) so a whole Ultragoal no-progress run fits under
it. That value is the user's setting too: a sufficient one (0, no cap, or at least ours) is
kept, and the manifest records whether Ithaca wrote the value and what it replaced, so an
uninstall puts back exactly what was there, and only while the value is still Ithaca's.

Everything is read and checked before anything is written, so a refusal (malformed
JSON, a server name taken by another program, an unsafe path) changes nothing; the
writes themselves are staged, preflighted and swapped in together (``hosts.install.staged``),
and the manifest records their provenance (``hosts.install.manifest``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ithaca.hosts.claude import EVENTS, TIMEOUTS, enabled_plugin
from ithaca.hosts.install import bundled as install_bundled
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install import server as install_server
from ithaca.hosts.install import transaction as install_transaction
from ithaca.hosts.install.bundled import Bundled
from ithaca.hosts.install.files import (
    object_at,
    originals,
    pretty,
    read_json_document,
    read_json_object,
    restored_text,
)
from ithaca.hosts.install.hooks import HostEvent, place_hooks, remove_listed_hooks
from ithaca.hosts.install.hooks import hook_command as host_hook_command
from ithaca.hosts.install.manifest import (
    hook_entry,
    provenance,
    read_manifest,
    value_entry,
)
from ithaca.hosts.install.report import InstallReport
from ithaca.hosts.install.staged import Staged, staging
from ithaca.hosts.install.transaction import commit_install, roots
from ithaca.kernel import Conflict, Refused, clock, invalid_field
from ithaca.ultragoal import hostcap

HOST = "claude"
SETTINGS_RELPATH = ".claude/settings.json"
MCP_RELPATH = ".mcp.json"
SKILLS_RELPATH = ".claude/skills"
AGENTS_RELPATH = ".claude/agents"
# Skills shipped in the ``ithaca.skills`` package, installed as ``.claude/skills/<name>/``.
SKILLS = ("ulysses", "ultragoal")
# Subagents shipped as ``ithaca.skills/agents/<name>.md``, installed as
# ``.claude/agents/<name>.md``: the reviewer the ultragoal skill starts.
AGENTS = ("code-reviewer",)
# A whole Ultragoal no-progress run: ``max_iterations`` blocks, one wait and one error block.
STOP_CAP_HEADROOM = 2
CAP_LABEL = f"env {hostcap.VARIABLE}"
_ABSENT: Any = object()  # a setting the file does not hold (JSON null is a value)

DEGRADED: tuple[str, ...] = (
    "failed hooks let the tool run: a hook that runs past its timeout (PreToolUse: 5 s) or"
    " exits non-zero other than 2 does not block the call; Ithaca's own errors inside a"
    " hook are answered by its failure policy",
)


BUNDLED: tuple[Bundled, ...] = (
    *(
        Bundled(
            "skills",
            name,
            f"{SKILLS_RELPATH}/{name}/SKILL.md",
            (name, "SKILL.md"),
            "SKILL_PATH_TAKEN",
        )
        for name in SKILLS
    ),
    *(
        Bundled(
            "agents",
            name,
            f"{AGENTS_RELPATH}/{name}.md",
            ("agents", f"{name}.md"),
            "AGENT_PATH_TAKEN",
        )
        for name in AGENTS
    ),
)


# Each event with its matcher and the adapter's timeout, which the hook also assumes.
MATCHERS = {"PreToolUse": "*", "PostToolUse": "*"}
CLAUDE_EVENTS: tuple[HostEvent, ...] = tuple(
    HostEvent(event, MATCHERS.get(event), TIMEOUTS[event]) for event in EVENTS
)


def hook_command(event: str) -> str:
    """The shell command Claude Code runs for ``event`` (see ``hosts.install.hooks``)."""
    return host_hook_command(event, HOST, TIMEOUTS[event])


def install(
    project_root: Path,
    *,
    server_name: str = "ithaca",
    max_iterations_default: int = 10,
    stop_hook_block_cap: int | None = None,
    profile: str = install_sandbox.DEFAULT_PROFILE,
) -> InstallReport:
    """Merge Ithaca's hooks, MCP server, skills, reviewer agent, Stop-block cap and sandbox
    profile into the project and record them. The cap is ``max_iterations_default + 2``
    unless ``stop_hook_block_cap`` (0: no cap) overrides it, which also replaces a value
    the project already had."""
    install_server.check_server_name(server_name)
    install_sandbox.check_profile(profile)
    if profile == "sandboxed":
        install_sandbox.require_sandbox()
    if stop_hook_block_cap is not None and stop_hook_block_cap < 0:
        raise invalid_field(
            "/stopHookBlockCap",
            "INVALID_STOP_HOOK_BLOCK_CAP",
            f"stop hook block cap {stop_hook_block_cap} must be a whole number (0: no cap)",
        )
    root, state = roots(project_root)
    _refuse_beside_the_plugin(root)
    previous = _read_manifest(state)
    settings, settings_text = read_json_document(root, SETTINGS_RELPATH)
    mcp, mcp_text = read_json_document(root, MCP_RELPATH)
    settings_before = copy.deepcopy(settings)
    mcp_before = copy.deepcopy(mcp)
    report = InstallReport(degraded=list(DEGRADED))

    entry = install_server.mcp_entry()
    _register_server(mcp, server_name, entry, previous, root / MCP_RELPATH, report)
    settings_path = root / SETTINGS_RELPATH
    installed = place_hooks(settings, settings_path, CLAUDE_EVENTS, HOST, previous, report)
    if stop_hook_block_cap is None:
        wanted, override = str(max_iterations_default + STOP_CAP_HEADROOM), False
    else:
        wanted, override = str(stop_hook_block_cap), True
    previous_cap = previous.get("stopHookBlockCap") if previous else None
    stop_cap = _place_stop_cap(settings, wanted, override, previous_cap, settings_path, report)
    previous_sandbox = previous.get("sandbox") if previous else None
    sandbox = install_sandbox.place(settings, profile, previous_sandbox, settings_path, report)
    bundled = install_bundled.plan(root, BUNDLED, previous, report)
    manifest = {
        "host": HOST,
        "serverName": server_name,
        "settingsPath": SETTINGS_RELPATH,
        "mcpPath": MCP_RELPATH,
        "hooks": installed,
        "mcpEntry": entry,
        **install_bundled.manifest_lists(bundled),
        "stopHookBlockCap": stop_cap,
        "sandbox": sandbox,
        "originals": originals(previous, {SETTINGS_RELPATH: settings_text, MCP_RELPATH: mcp_text}),
        "degraded": list(DEGRADED),
        "provenance": provenance(
            _entries(settings, mcp, server_name, installed, bundled, stop_cap["set"], profile)
        ),
        "installedAt": clock.now(),
    }
    with staging(HOST) as staged:
        if settings != settings_before:
            staged.write(root, SETTINGS_RELPATH, pretty(settings))
        if mcp != mcp_before:
            staged.write(root, MCP_RELPATH, pretty(mcp))
        install_bundled.stage_writes(staged, root, bundled)
        install_sandbox.stage_exclusions(staged, root, HOST, profile == "sandboxed")
        commit_install(staged, HOST, root, previous, manifest, report)
    _note_local_cap(root, stop_cap["value"], report)
    return report


def _refuse_beside_the_plugin(root: Path) -> None:
    """``CLAUDE_PLUGIN_ENABLED`` where the Ithaca plugin already wires this project."""
    found = enabled_plugin.enabling(root)
    if found is None:
        return
    plugin_id, path = found
    scope = ""  # where `claude plugin disable` defaults to: the user's settings
    if path.is_relative_to(root):
        scope = " --scope local" if path.name == "settings.local.json" else " --scope project"
    raise Refused(
        "CLAUDE_PLUGIN_ENABLED",
        f"the Ithaca plugin ({plugin_id}, enabled in {path}) already wires Claude Code's"
        " hooks and Ithaca's MCP server for this project. Keep one: the plugin (every"
        " project, no sandbox profile), or `claude plugin disable"
        f" {plugin_id}{scope}` and then `ithaca install claude` again (the sandboxed"
        " profile and its deny rules)",
        {"plugin": plugin_id, "settings": str(path)},
    )


def uninstall(project_root: Path) -> InstallReport:
    """Remove exactly the entries the manifest lists, then the manifest itself."""
    return install_transaction.uninstall(project_root, HOST, _read_manifest, _take_back)


def _take_back(staged: Staged, root: Path, manifest: dict[str, Any], report: InstallReport) -> None:
    settings_relpath, mcp_relpath = manifest["settingsPath"], manifest["mcpPath"]
    settings = read_json_object(root, settings_relpath)
    mcp = read_json_object(root, mcp_relpath)
    settings_changed = settings is not None and remove_listed_hooks(
        settings, manifest["hooks"], root / settings_relpath, report
    )
    stop_cap = manifest.get("stopHookBlockCap")
    if settings is not None and stop_cap is not None and stop_cap["set"]:
        cap_restored = _restore_stop_cap(settings, stop_cap, root / settings_relpath, report)
        settings_changed = cap_restored or settings_changed
    sandbox = manifest.get("sandbox")
    relpath = root / settings_relpath
    if (
        settings is not None
        and isinstance(sandbox, dict)
        and install_sandbox.take_back(settings, sandbox, relpath)
    ):
        report.removed.append(f"{install_sandbox.LABEL} {sandbox['profile']}")
        settings_changed = True
    mcp_changed = mcp is not None and _remove_listed_server(
        mcp, manifest["serverName"], manifest["mcpEntry"], root / mcp_relpath, report
    )
    # A file no original was kept of was created by the install.
    kept = manifest.get("originals") or {}
    if settings is not None and settings_changed:
        text = restored_text(settings, manifest, settings_relpath)
        staged.settle(
            root, settings_relpath, text, remove=not settings and settings_relpath not in kept
        )
    if mcp is not None and mcp_changed:
        text = restored_text(mcp, manifest, mcp_relpath)
        staged.settle(root, mcp_relpath, text, remove=not mcp and mcp_relpath not in kept)
    install_bundled.take_back(staged, root, manifest, report)
    install_sandbox.stage_exclusions(staged, root, HOST, False)


def _entries(
    settings: dict[str, Any],
    mcp: dict[str, Any],
    server_name: str,
    installed: list[dict[str, Any]],
    bundled: install_bundled.Planned,
    cap_set: bool,
    profile: str,
) -> list[dict[str, Any]]:
    """The provenance entries of what this install placed, read from the documents."""
    entries = [hook_entry(SETTINGS_RELPATH, settings, i["event"], i["command"]) for i in installed]
    server_key = ["mcpServers", server_name]
    entries.append(value_entry("json", f"mcp server {server_name}", MCP_RELPATH, server_key, mcp))
    entries += install_bundled.entries(bundled)
    if cap_set:
        cap_key = ["env", hostcap.VARIABLE]
        entries.append(value_entry("json", CAP_LABEL, SETTINGS_RELPATH, cap_key, settings))
    if profile == "sandboxed":
        label = f"{install_sandbox.LABEL} {profile}"
        entries.append(value_entry("json", label, SETTINGS_RELPATH, ["sandbox"], settings))
    return entries


def _register_server(
    mcp: dict[str, Any],
    server_name: str,
    entry: dict[str, Any],
    previous: dict[str, Any] | None,
    mcp_path: Path,
    report: InstallReport,
) -> None:
    """Add Ithaca's server under ``server_name``, replacing only a previous install's entry."""
    servers = object_at(mcp, "mcpServers", mcp_path, create=True)
    label = f"mcp server {server_name}"
    current = servers.get(server_name)
    ours_before = previous["mcpEntry"] if previous else None
    if current is None:
        servers[server_name] = entry
        report.added.append(label)
    elif install_server.same_server(current, entry):
        report.unchanged.append(label)
    elif previous and previous["serverName"] == server_name and current == ours_before:
        servers[server_name] = entry
        report.removed.append(label)
        report.added.append(label)
    else:
        raise Conflict(
            "MCP_SERVER_NAME_TAKEN",
            f"{mcp_path} already registers a different MCP server as {server_name!r}; "
            "choose another server name",
            {"path": str(mcp_path), "serverName": server_name},
        )
    if previous and previous["serverName"] != server_name:
        old_name = previous["serverName"]
        if servers.get(old_name) == ours_before:
            del servers[old_name]
            report.removed.append(f"mcp server {old_name}")


def _place_stop_cap(
    settings: dict[str, Any],
    wanted: str,
    override: bool,
    previous: dict[str, Any] | None,
    settings_path: Path,
    report: InstallReport,
) -> dict[str, Any]:
    """Set the Stop-block cap in ``settings`` (in memory) and return its manifest record.

    Decisions are made against the project's own value: the one a previous install
    replaced while the current value is still Ithaca's, else the current value. Without
    an override, a value of 0 or at least ``wanted`` is the project's to keep.
    """
    had_env = "env" in settings
    env = object_at(settings, "env", settings_path, create=True)
    current = env.get(hostcap.VARIABLE, _ABSENT)
    if previous is not None and previous["set"] and current == previous["value"]:
        own = previous.get("previous", _ABSENT)
        created_env = bool(previous.get("createdEnv"))
    else:
        own, created_env = current, not had_env
    if not override and _sufficient(own, int(wanted)):
        value, owned = own, False
    else:
        value, owned = wanted, own != wanted
    env[hostcap.VARIABLE] = value
    if current == value:
        report.unchanged.append(CAP_LABEL)
    elif owned:
        report.added.append(CAP_LABEL)
    else:
        report.removed.append(CAP_LABEL)
    if value != wanted:
        meaning = "no cap" if hostcap.whole_number(value) == 0 else f"at least Ithaca's {wanted}"
        report.notes.append(
            f"kept {hostcap.VARIABLE}={value} in {SETTINGS_RELPATH} ({meaning}); "
            "`ithaca install claude --stop-hook-block-cap N` sets another value"
        )
    elif owned and own is not _ABSENT and current != value:
        report.notes.append(
            f"replaced {hostcap.VARIABLE}={own} in {SETTINGS_RELPATH} with {value}; "
            "`ithaca uninstall claude` puts it back"
        )
    record: dict[str, Any] = {"set": owned, "value": value, "createdEnv": owned and created_env}
    if owned and own is not _ABSENT:
        record["previous"] = own
    return record


def _restore_stop_cap(
    settings: dict[str, Any], record: dict[str, Any], settings_path: Path, report: InstallReport
) -> bool:
    """Put back the value Ithaca's cap replaced, if the cap is still Ithaca's; True if so."""
    env = object_at(settings, "env", settings_path, create=False)
    if env is None or env.get(hostcap.VARIABLE, _ABSENT) != record["value"]:
        report.unchanged.append(CAP_LABEL)
        return False
    if "previous" in record:
        env[hostcap.VARIABLE] = record["previous"]
    else:
        del env[hostcap.VARIABLE]
        if not env and record.get("createdEnv"):
            del settings["env"]
    report.removed.append(CAP_LABEL)
    return True


def _note_local_cap(root: Path, value: Any, report: InstallReport) -> None:
    """Warn when ``settings.local.json``, which Claude Code prefers, sets another cap."""
    in_force = hostcap.stop_cap(str(root), {})
    if in_force != hostcap.whole_number(value):
        report.notes.append(
            f".claude/settings.local.json sets {hostcap.VARIABLE}={in_force}, "
            f"which Claude Code uses instead of {value}"
        )


def _sufficient(value: Any, wanted: int) -> bool:
    number = hostcap.whole_number(value)
    return number is not None and (number == 0 or number >= wanted)


def _remove_listed_server(
    mcp: dict[str, Any],
    server_name: str,
    entry: dict[str, Any],
    mcp_path: Path,
    report: InstallReport,
) -> bool:
    """Remove Ithaca's server only if it still equals what was installed."""
    servers = object_at(mcp, "mcpServers", mcp_path, create=False)
    if servers is None or server_name not in servers:
        return False
    label = f"mcp server {server_name}"
    if servers[server_name] != entry:
        report.unchanged.append(label)
        return False
    del servers[server_name]
    if not servers:
        del mcp["mcpServers"]
    report.removed.append(label)
    return True


def _read_manifest(state: Path) -> dict[str, Any] | None:
    return read_manifest(state, HOST, ("settingsPath", "mcpPath"), _cap_record_ok)


def _cap_record_ok(manifest: dict[str, Any]) -> bool:
    record = manifest.get("stopHookBlockCap")
    return record is None or (
        isinstance(record, dict) and isinstance(record.get("set"), bool) and "value" in record
    )
