"""Wire Ithaca into a Codex project, and take exactly that wiring back out.

Codex reads a project's MCP servers from ``.codex/config.toml`` (``[mcp_servers.<name>]``)
and its hooks from ``.codex/hooks.json``. The hooks file has Claude Code's layout, so it
is merged as Claude Code's is (``install_hooks``). The TOML file is the user's, and the
standard library reads TOML but cannot write it, so the installer never rewrites it: it
adds text only (Ithaca's server table at the end), checks with ``tomllib`` that the
result means exactly the old file plus that key, and records each addition verbatim in
the manifest. Uninstall takes back each addition that is still there as written and still
means only that, so the rest of the file stays byte for byte. Hooks are on by default in
Codex (``[features] hooks``; the older ``codex_hooks`` name only draws a deprecation
warning), so the install sets no feature flag; a user's ``false`` is reported.

Codex runs a project's hooks only once the user's own Codex config trusts the project and
each hook's hash (``codex_trust``). The install, run by the user in a terminal, records
that trust in ``$CODEX_HOME/config.toml`` the same way, by checked text additions that the
manifest lists and uninstall takes back, and prints what it wrote.

Ownership is decided by the manifest ``<state root>/.runtime/installs/codex.json``, as
for Claude Code, which also lists the surfaces Codex offers less of than Claude Code
(``DEGRADED``), and the provenance ``ithaca install --doctor`` checks. Everything is read
and checked before anything is written; the writes are staged, preflighted and swapped in
together (``install_staged``).
"""

from __future__ import annotations

import copy
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ithaca.hosts.codex.reviewer_role import codex_role
from ithaca.hosts.codex.trust import codex_home, missing_trust, trust_entries
from ithaca.hosts.install import bundled as install_bundled
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install import server as install_server
from ithaca.hosts.install import transaction as install_transaction
from ithaca.hosts.install.bundled import Bundled
from ithaca.hosts.install.files import (
    invalid_settings,
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
from ithaca.kernel.errors import Conflict

HOST = "codex"
CONFIG_RELPATH = ".codex/config.toml"
HOOKS_RELPATH = ".codex/hooks.json"
FEATURE_KEYS = ("hooks", "codex_hooks")  # the second is the older, deprecated name
USER_CONFIG = "config.toml"
# The sandboxed profile: a permission profile (Codex 0.169.0) that extends the workspace
# sandbox, whose built-in rules keep .codex, .agents and .aws read-only, and .git too.
# Ithaca's state and Claude Code's wiring become read-only as well; .git is opened for
# commits and worktrees, except what git would run or obey outside the sandbox.
PROFILE_SWITCH = "default_permissions"
PROFILE_NAME = "ithaca"


def permission_profile(root: Path) -> dict[str, Any]:
    """Ithaca's permission profile for the project at ``root``. Codex stands a read-only
    placeholder in for a protected path that does not exist (excluded from Git with the
    other stand-ins); ``.mcp.json`` is protected only where it exists, since a real one
    would be hidden from ``git status`` by the same exclusion."""
    names = [".ithaca", ".claude", *([".mcp.json"] if (root / ".mcp.json").exists() else [])]
    in_workspace = {
        ".git": "write",
        **{name: "read" for name in (*install_sandbox.GIT_PROTECTED, *names)},
    }
    return {
        "extends": ":workspace",
        "filesystem": {
            ":workspace_roots": in_workspace,
            **{name: "read" for name in install_sandbox.HOME_PROTECTED},
        },
    }


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


# No matcher: every tool and every session source, in every Codex version.
CODEX_EVENTS: tuple[HostEvent, ...] = (
    HostEvent("SessionStart", None, 10),
    HostEvent("UserPromptSubmit", None, 10),
    HostEvent("PreToolUse", None, 5),
    HostEvent("PostToolUse", None, 10),
    HostEvent("PreCompact", None, 10),
    HostEvent("Stop", None, 90),  # the critic may run the verification itself (critic_run)
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
    """The shell command Codex runs for ``event`` (see ``install_hooks``)."""
    return host_hook_command(event, HOST)


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
    config = _Toml(root / CONFIG_RELPATH, config_before)
    entry = install_server.mcp_entry()
    _permission_profile(config, profile, previous, report)
    _register_server(config, server_name, entry, previous, report)
    hooks_off = _hooks_feature(config, previous, report)
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
    user = _Toml(user_path, user_before)
    earlier = (previous or {}).get("userConfigAdditions", [])
    untrusted = _record_trust(user, root, expected, earlier, report)
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
    config = _Toml(root / config_path, config_before)
    for addition in reversed(manifest["configAdditions"]):
        config.take_back(addition, report)
    hooks_changed = settings is not None and remove_listed_hooks(
        settings, manifest["hooks"], root / hooks_path, report
    )
    if config_before is not None and config.text != config_before:
        empty = not config.text.strip()
        _settle(staged, root, config_path, config.text, empty and config_path in created)
    if settings is not None and hooks_changed:
        empty = not settings
        text = restored_text(settings, manifest, hooks_path)
        _settle(staged, root, hooks_path, text, empty and hooks_path in created)
    user_path = Path(manifest.get("userConfig") or codex_home() / USER_CONFIG)
    if user_path.is_file():
        user_before = user_path.read_text(encoding="utf-8")
        user = _Toml(user_path, user_before)
        for addition in reversed(manifest.get("userConfigAdditions", [])):
            user.take_back(addition, report)
        if user.text != user_before:
            staged.write(user_path.parent, USER_CONFIG, user.text)
    install_bundled.take_back(staged, root, manifest, report)
    install_sandbox.stage_exclusions(staged, root, HOST, False)


class _Toml:
    """``config.toml`` as text and as what it means, changed only by checked additions."""

    def __init__(self, path: Path, text: str | None):
        self.path = path
        self.text = text or ""
        self.meaning = _parse(self.text, path)
        self.additions: list[dict[str, Any]] = []

    def get(self, key: list[str]) -> Any:
        value: Any = self.meaning
        for part in key:
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    def add(self, label: str, key: list[str], value: Any, at: int, anchor: str, text: str) -> bool:
        """Insert ``text`` at offset ``at``, just after ``anchor``, if the file then means
        exactly what it meant plus ``key = value``; False (and nothing changed) if not."""
        changed = self.text[:at] + text + self.text[at:]
        expected = _with(self.meaning, key, value)
        if _normal(_parse_or_none(changed)) != _normal(expected):
            return False
        self.text, self.meaning = changed, expected
        self.additions.append(
            {"label": label, "key": key, "value": value, "anchor": anchor, "text": text}
        )
        return True

    def append(self, label: str, key: list[str], value: Any, block: str) -> bool:
        """Add ``block`` at the end of the file, after a blank line."""
        separator = "" if not self.text else ("\n" if self.text.endswith("\n") else "\n\n")
        return self.add(label, key, value, len(self.text), "", separator + block)

    def keep(self, addition: dict[str, Any] | None) -> None:
        """Carry an earlier install's addition forward when it is still as written."""
        if addition is not None and self._without(addition) is not None:
            self.additions.append(addition)

    def take_back(self, addition: dict[str, Any], report: InstallReport) -> bool:
        """Remove ``addition`` when it is still there and still means only its key."""
        without = self._without(addition)
        if without is None:
            report.unchanged.append(addition["label"])
            return False
        self.text, self.meaning = without
        report.removed.append(addition["label"])
        return True

    def _without(self, addition: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        anchor, text, key = addition["anchor"], addition["text"], addition["key"]
        at = self.text.rfind(anchor + text)
        if at < 0 or self.get(key) != addition["value"]:
            return None
        start = at + len(anchor)
        remaining = self.text[:start] + self.text[start + len(text) :]
        expected = _with(self.meaning, key, None)
        if _normal(_parse_or_none(remaining)) != _normal(expected):
            return None
        return remaining, expected


def _register_server(
    config: _Toml,
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


def _permission_profile(
    config: _Toml, profile: str, previous: dict[str, Any] | None, report: InstallReport
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


def _hooks_feature(config: _Toml, previous: dict[str, Any] | None, report: InstallReport) -> str:
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


def _record_trust(
    user: _Toml,
    root: Path,
    expected: dict[str, str],
    earlier: list[dict[str, Any]],
    report: InstallReport,
) -> str:
    """Add the project's and each hook's trust to the user's Codex config, where it is not
    there yet, keeping what an earlier install recorded that is still wanted and taking back
    the rest (a hook whose hash changed); returns a degraded surface when some trust could
    not be added, else ""."""
    wanted: list[tuple[str, list[str], dict[str, str], str]] = [
        (
            "codex trust: project",
            ["projects", str(root)],
            {"trust_level": "trusted"},
            f'[projects.{json.dumps(str(root))}]\ntrust_level = "trusted"\n',
        )
    ]
    for hook_key, digest in expected.items():
        event = hook_key.rsplit(":", 3)[1]
        wanted.append(
            (
                f"codex trust: hook {event}",
                ["hooks", "state", hook_key],
                {"trusted_hash": digest},
                f"[hooks.state.{json.dumps(hook_key)}]\ntrusted_hash = {json.dumps(digest)}\n",
            )
        )
    values = {json.dumps(key): value for _, key, value, _ in wanted}
    kept = {}
    for addition in reversed(earlier):
        where = json.dumps(addition["key"])
        if values.get(where) == addition["value"]:
            kept[where] = addition
        else:
            user.take_back(addition, InstallReport())
    written = []
    for label, key, value, block in wanted:
        current = user.get(key)
        if isinstance(current, dict) and all(current.get(k) == v for k, v in value.items()):
            user.keep(kept.get(json.dumps(key)))
            report.unchanged.append(label)
        elif current is None and user.append(label, key, value, block):
            report.added.append(label)
            written.append(block)
    if written:
        report.notes.append(
            f"Recorded in {user.path}, with your consent as the user running this install,"
            " so that Codex runs Ithaca's hooks:\n" + "\n".join(written).rstrip()
        )
    problems = missing_trust(user.meaning, root, expected)
    if not problems:
        return ""
    return (
        f"Codex will not run Ithaca's hooks: {problems[0]} and the entry in {user.path} could"
        " not be added (set it there, or trust the hooks in Codex's hook review)"
    )


def _settle(staged: Staged, root: Path, relpath: str, text: str, remove: bool) -> None:
    """Stage what uninstall left of a file, or its removal (and that of a folder left
    empty) when install created it and nothing else is in it now."""
    if remove:
        staged.remove(root, relpath, prune=True)
    else:
        staged.write(root, relpath, text)


def _server_table(server_name: str, entry: dict[str, Any]) -> str:
    """``[mcp_servers.<name>]`` as TOML text (a JSON string is a TOML basic string)."""
    args = ", ".join(json.dumps(arg, ensure_ascii=False) for arg in entry["args"])
    command = json.dumps(entry["command"], ensure_ascii=False)
    return f"[mcp_servers.{server_name}]\ncommand = {command}\nargs = [{args}]\n"


def _table_headers(text: str, name: str) -> Iterator[tuple[str, int]]:
    """Each line that reads as the ``[name]`` header, with the offset just past it; a line
    inside a multi-line string may read so too, which the caller's check rules out."""
    offset = 0
    for line in text.splitlines(keepends=True):
        offset += len(line)
        code = line.split("#", 1)[0].strip()
        is_table = code.startswith("[") and not code.startswith("[[") and code.endswith("]")
        if is_table and code[1:-1].strip() == name:
            yield line, offset


def _addition(manifest: dict[str, Any] | None, table: str) -> dict[str, Any] | None:
    """The addition an earlier install made to ``table``, if any."""
    additions = (manifest or {}).get("configAdditions", [])
    return next((item for item in additions if item["key"][0] == table), None)


def _with(meaning: dict[str, Any], key: list[str], value: Any) -> dict[str, Any]:
    """A copy of ``meaning`` with ``key`` set to ``value`` (removed when None)."""
    changed = copy.deepcopy(meaning)
    table = changed
    for part in key[:-1]:
        table = table.setdefault(part, {})
    if value is None:
        table.pop(key[-1], None)
    else:
        table[key[-1]] = value
    return changed


def _normal(value: Any) -> Any:
    """``value`` without empty tables: a file that loses its only server loses the table."""
    if not isinstance(value, dict):
        return value
    kept = {key: _normal(item) for key, item in value.items()}
    return {key: item for key, item in kept.items() if item != {}}


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise invalid_settings(path, f"the file is not valid TOML ({exc})") from exc


def _parse_or_none(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None


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
