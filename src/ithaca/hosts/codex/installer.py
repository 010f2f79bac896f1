"""Wire Ithaca into a Codex project, and take exactly that wiring back out.

Codex reads a project's MCP servers from ``.codex/config.toml`` and its hooks from
``.codex/hooks.json``. The hooks file has Claude Code's layout, so it is merged as Claude
Code's is (``hosts.install.hooks``). The TOML files are the user's and are changed only by checked
text additions (``checked_toml``): Ithaca's server and permission profile in the project's
config (``project_config``), the trust Codex needs to run the hooks in the user's own
(``user_config``). Uninstall takes back each addition that is still there as written.

Ownership is decided by the manifest ``<state root>/.runtime/installs/codex.json``, as
for Claude Code, which also lists the surfaces Codex offers less of than Claude Code
(``DEGRADED``), and the provenance ``ithaca install --doctor`` checks. Everything is read
and checked before anything is written; the writes are staged, preflighted and swapped in
together (``hosts.install.staged``).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from ithaca.hosts.codex import EVENTS, TIMEOUTS
from ithaca.hosts.codex.checked_toml import CheckedToml
from ithaca.hosts.codex.project_config import (
    check_hooks_feature,
    place_permission_profile,
    register_server,
)
from ithaca.hosts.codex.reviewer_role import codex_role
from ithaca.hosts.codex.trust import codex_home, trust_entries
from ithaca.hosts.codex.user_config import USER_CONFIG, record_trust, take_back_trust
from ithaca.hosts.install import bundled as install_bundled
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install import server as install_server
from ithaca.hosts.install import transaction as install_transaction
from ithaca.hosts.install.bundled import Bundled
from ithaca.hosts.install.files import (
    originals,
    pretty,
    read_json_document,
    read_json_object,
    read_text,
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
from ithaca.kernel import clock

HOST = "codex"
CONFIG_RELPATH = ".codex/config.toml"
HOOKS_RELPATH = ".codex/hooks.json"

# No matcher: every tool and every session source, in every Codex version. Each event's
# timeout is the adapter's, which the hook also assumes.
CODEX_EVENTS: tuple[HostEvent, ...] = tuple(
    HostEvent(event, None, TIMEOUTS[event]) for event in EVENTS
)

DEGRADED: tuple[str, ...] = (
    "trust lives in the user's Codex config: the install records it there, but a hook whose"
    " command changes, or hooks.json edited by hand, runs only once trusted again"
    " (`ithaca install codex`, or Codex's own hook review)",
    "failed hooks let the tool run: a hook that times out, exits non-zero other than 2 or"
    " answers what Codex does not accept is ignored",
    "no ask: Codex treats a PreToolUse ask as a failed hook and runs the call, so a call a"
    " protocol asks about is denied with an approval request",
    "only the tools Codex sends to PreToolUse are gated: older versions send shell commands"
    " and apply_patch only, and hosted tools (web search) never reach a hook",
    "missing events: no SessionEnd (sessions are never marked ended; they lapse after 6 h"
    " of silence), no PreCompact before the versions that have it",
    "no CODEX_ENV_FILE: ITHACA_SESSION_ID is not exported; the CLI finds the session"
    " through CODEX_THREAD_ID, which Codex sets for shell commands",
    "Stop sees no background work: running child threads are not probed and count as 0, so"
    " waiting on subagents spends the pursuit's no-progress budget",
    "no skills: Ithaca's skills are installed for Claude Code only; the Ultragoal reviewer"
    " is installed as a Codex agent role, which Codex starts only with its subagents on"
    " ([features] multi_agent_v2 = true in the user's Codex config)",
)
AGENTS_RELPATH = ".codex/agents"
# The Ultragoal reviewer as a Codex agent role (``spawn_agent`` with ``agent_type``).
BUNDLED: tuple[Bundled, ...] = (
    Bundled(
        "agents",
        "code-reviewer",
        f"{AGENTS_RELPATH}/code-reviewer.toml",
        ("agents", "code-reviewer.md"),
        "AGENT_PATH_TAKEN",
        render=codex_role,
    ),
)


def hook_command(event: str) -> str:
    """The shell command Codex runs for ``event`` (see ``hosts.install.hooks``)."""
    return host_hook_command(event, HOST, TIMEOUTS[event])


def install(
    project_root: Path, *, server_name: str = "ithaca", profile: str = "sandboxed"
) -> InstallReport:
    """Add Ithaca's MCP server and hooks to the project's ``.codex/`` and record them."""
    install_server.check_server_name(server_name)
    install_sandbox.check_profile(profile)
    root, state = roots(project_root)
    previous = _read_manifest(state)
    report = InstallReport()
    config_before = read_text(root, CONFIG_RELPATH)
    config = CheckedToml(root / CONFIG_RELPATH, config_before)
    entry = install_server.mcp_entry()
    place_permission_profile(config, profile, previous, report)
    register_server(config, server_name, entry, previous, report)
    hooks_off = check_hooks_feature(config, previous, report)
    if hooks_off:
        report.notes.append(hooks_off)
    report.degraded = [*DEGRADED, hooks_off] if hooks_off else list(DEGRADED)
    if profile == "unsandboxed":
        report.notes.append(install_sandbox.UNSANDBOXED_NOTE)
    settings, hooks_text = read_json_document(root, HOOKS_RELPATH)
    hooks_created = hooks_text is None
    settings_before = copy.deepcopy(settings)
    path = root / HOOKS_RELPATH
    installed = place_hooks(settings, path, CODEX_EVENTS, HOST, previous, report)
    expected = trust_entries(path, settings, {item["command"] for item in installed})
    user_path = codex_home() / USER_CONFIG
    user_before = user_path.read_text(encoding="utf-8") if user_path.is_file() else None
    user = CheckedToml(user_path, user_before)
    earlier = (previous or {}).get("userConfigAdditions", [])
    untrusted = record_trust(user, root, expected, earlier, report)
    if untrusted:
        report.degraded.append(untrusted)
        report.notes.append(untrusted)

    bundled = install_bundled.plan(root, BUNDLED, previous, report)

    created = [
        relpath
        for relpath, absent in (
            (CONFIG_RELPATH, config_before is None),
            (HOOKS_RELPATH, hooks_created),
        )
        if absent or relpath in (previous or {}).get("createdFiles", [])
    ]
    entries = [
        *(hook_entry(HOOKS_RELPATH, settings, i["event"], i["command"]) for i in installed),
        *(
            value_entry("toml", item["label"], CONFIG_RELPATH, item["key"], config.meaning)
            for item in config.additions
        ),
        *install_bundled.entries(bundled),
    ]
    manifest = {
        "host": HOST,
        "serverName": server_name,
        "configPath": CONFIG_RELPATH,
        "hooksPath": HOOKS_RELPATH,
        "hooks": installed,
        "mcpEntry": entry,
        "configAdditions": config.additions,
        "userConfig": str(user_path),
        "userConfigAdditions": user.additions,
        # Whether this install (or the first of a line of them) wrote the file first.
        "userConfigCreated": user_before is None or bool((previous or {}).get("userConfigCreated")),
        "trust": expected,
        "sandbox": {"profile": profile},
        **install_bundled.manifest_lists(bundled),
        "createdFiles": created,
        "originals": originals(previous, {HOOKS_RELPATH: hooks_text}),
        "degraded": list(report.degraded),
        "provenance": provenance(entries),
        "installedAt": clock.now(),
    }
    with staging(HOST) as staged:
        if config.text != (config_before or ""):
            staged.write(root, CONFIG_RELPATH, config.text)
        if settings != settings_before or hooks_created:
            staged.write(root, HOOKS_RELPATH, pretty(settings))
        if user.text != (user_before or ""):
            staged.write(user_path.parent, USER_CONFIG, user.text)
        install_bundled.stage_writes(staged, root, bundled)
        install_sandbox.stage_exclusions(staged, root, HOST, profile == "sandboxed")
        commit_install(staged, HOST, root, previous, manifest, report)
    return report


def uninstall(project_root: Path) -> InstallReport:
    """Remove exactly what the manifest lists, then the manifest itself."""
    return install_transaction.uninstall(project_root, HOST, _read_manifest, _take_back)


def _take_back(staged: Staged, root: Path, manifest: dict[str, Any], report: InstallReport) -> None:
    created = manifest.get("createdFiles", [])
    config_path, hooks_path = manifest["configPath"], manifest["hooksPath"]
    config_before = read_text(root, config_path)
    settings = read_json_object(root, hooks_path)
    config = CheckedToml(root / config_path, config_before)
    for addition in reversed(manifest["configAdditions"]):
        config.take_back(addition, report)
    hooks_changed = settings is not None and remove_listed_hooks(
        settings, manifest["hooks"], root / hooks_path, report
    )
    if config_before is not None and config.text != config_before:
        empty = not config.text.strip()
        staged.settle(root, config_path, config.text, remove=empty and config_path in created)
    if settings is not None and hooks_changed:
        empty = not settings
        text = restored_text(settings, manifest, hooks_path)
        staged.settle(root, hooks_path, text, remove=empty and hooks_path in created)
    take_back_trust(staged, manifest, report)
    install_bundled.take_back(staged, root, manifest, report)
    install_sandbox.stage_exclusions(staged, root, HOST, False)


def _read_manifest(state: Path) -> dict[str, Any] | None:
    return read_manifest(state, HOST, ("configPath", "hooksPath"), _additions_ok)


def _additions_ok(manifest: dict[str, Any]) -> bool:
    additions = manifest.get("configAdditions")
    return isinstance(additions, list) and all(
        isinstance(item, dict)
        and isinstance(item.get("label"), str)
        and isinstance(item.get("key"), list)
        and len(item["key"]) in (1, 2)  # a table's key, or a top-level switch
        and isinstance(item.get("anchor"), str)
        and isinstance(item.get("text"), str)
        for item in additions
    )
