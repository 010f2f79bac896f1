"""Wire Ithaca into a Claude Code project, and take exactly that wiring back out.

Claude Code reads hooks from ``.claude/settings.json`` and project MCP servers from
``.mcp.json``. Both files belong to the user as much as to Ithaca (they are often
committed, and hold the user's own hooks and servers), so the installer merges its
entries in place and never reorders, rewrites or removes anything else.

Ownership is decided by a provenance manifest, never by guessing which commands look
like Ithaca's: ``<state root>/.runtime/installs/claude.json`` lists every hook and the MCP
entry an install added. Uninstall removes what it lists; a later install replaces the
listed entries in place, so moving the Ithaca executable never leaves stale or duplicate
hooks behind. The manifest also names the MCP server, which is how the hook and MCP code
learn the ``mcp__<server>__…`` prefix of Ithaca's own tools.

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
JSON, a server name taken by another program, an unsafe path) changes nothing.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from ithaca.kernel import clock
from ithaca.kernel.canon import canonical, digest_bytes, digest_excluding
from ithaca.kernel.errors import Conflict, InvalidInput, invalid_field
from ithaca.kernel.files import remove_confined, resolve_confined, write_atomic
from ithaca.kernel.project import RUNTIME_DIR_NAME, STATE_DIR_NAME
from ithaca.ultragoal import hostcap

HOST = "claude"
SETTINGS_RELPATH = ".claude/settings.json"
MCP_RELPATH = ".mcp.json"
MANIFEST_RELPATH = f"{RUNTIME_DIR_NAME}/installs/{HOST}.json"
SKILLS_RELPATH = ".claude/skills"
AGENTS_RELPATH = ".claude/agents"
# Skills shipped in the ``ithaca.skills`` package, installed as ``.claude/skills/<name>/``.
SKILLS = ("ulysses", "ultragoal")
# Subagents shipped as ``ithaca.skills/agents/<name>.md``, installed as
# ``.claude/agents/<name>.md``: the reviewer the ultragoal skill starts.
AGENTS = ("code-reviewer",)
SERVER_NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")
# A whole Ultragoal no-progress run: ``max_iterations`` blocks, one wait and one error block.
STOP_CAP_HEADROOM = 2
CAP_LABEL = f"env {hostcap.VARIABLE}"
_ABSENT: Any = object()  # a setting the file does not hold (JSON null is a value)


class Bundled(NamedTuple):
    """One file Ithaca ships into the project: the manifest list that records it, its
    label in reports, where it goes, where it comes from, and the code refusing a path
    someone else holds."""

    kind: str
    name: str
    relpath: str
    resource: tuple[str, ...]
    taken_code: str

    @property
    def label(self) -> str:
        return f"{KIND_LABELS[self.kind]} {self.name}"


KIND_LABELS = {"skills": "skill", "agents": "agent"}
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


class HostEvent(NamedTuple):
    """One hook event Ithaca registers: its name, tool matcher (None: none) and timeout."""

    event: str
    matcher: str | None
    timeout: int


CLAUDE_EVENTS: tuple[HostEvent, ...] = (
    HostEvent("SessionStart", None, 10),
    HostEvent("UserPromptSubmit", None, 10),
    HostEvent("UserPromptExpansion", None, 10),
    HostEvent("PreToolUse", "*", 5),
    HostEvent("PostToolUse", "*", 10),
    HostEvent("PreCompact", None, 10),
    HostEvent("Stop", None, 15),
    HostEvent("SubagentStop", None, 15),
    HostEvent("SessionEnd", None, 10),
)


@dataclass
class InstallReport:
    """What an install or uninstall did: entry labels, the files it wrote or removed, and
    notes on settings it left as the user had them."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return asdict(self)


def hook_command(event: str) -> str:
    """The shell command Claude Code runs for ``event``.

    It starts this interpreter with ``-S`` and puts only Ithaca's own folder on the path:
    a hook needs nothing else from site-packages, and skipping ``site`` (with the ``.pth``
    files a virtual environment accumulates) saves a noticeable share of every tool call.
    ``-P`` keeps the project folder the hook runs in off the path, so a file there cannot
    stand in for a standard module. The same entry point is available as the
    ``ithaca-hook`` console script.
    """
    import ithaca

    package_root = os.path.dirname(os.path.dirname(os.path.abspath(ithaca.__file__)))
    bootstrap = (
        f"import sys; sys.path.insert(0, {json.dumps(package_root)}); "
        "from ithaca.hosts.main import run; run()"
    )
    python = os.path.abspath(sys.executable)
    return shlex.join([python, "-S", "-P", "-c", bootstrap, HOST, event])


def install(
    project_root: Path,
    *,
    server_name: str = "ithaca",
    max_iterations_default: int = 10,
    stop_hook_block_cap: int | None = None,
) -> InstallReport:
    """Merge Ithaca's hooks, MCP server, skills, reviewer agent and Stop-block cap into the
    project and record them. The cap is ``max_iterations_default + 2`` unless
    ``stop_hook_block_cap`` (0: no cap) overrides it, which also replaces a value the
    project already had."""
    if not SERVER_NAME_PATTERN.fullmatch(server_name):
        raise invalid_field(
            "/serverName",
            "INVALID_SERVER_NAME",
            f"server name {server_name!r} must be 1-64 letters, digits, '_' or '-'",
        )
    if stop_hook_block_cap is not None and stop_hook_block_cap < 0:
        raise invalid_field(
            "/stopHookBlockCap",
            "INVALID_STOP_HOOK_BLOCK_CAP",
            f"stop hook block cap {stop_hook_block_cap} must be a whole number (0: no cap)",
        )
    root = Path(os.path.abspath(project_root))
    state_root = _state_root(root)
    previous = _read_manifest(state_root)
    settings = _read_json_object(root, SETTINGS_RELPATH) or {}
    mcp = _read_json_object(root, MCP_RELPATH) or {}
    settings_before = copy.deepcopy(settings)
    mcp_before = copy.deepcopy(mcp)
    report = InstallReport()

    entry = _mcp_entry()
    _register_server(mcp, server_name, entry, previous, root / MCP_RELPATH, report)
    settings_path = root / SETTINGS_RELPATH
    hooks = _object_at(settings, "hooks", settings_path, create=True)
    installed: list[dict[str, Any]] = []
    for spec in CLAUDE_EVENTS:
        command = hook_command(spec.event)
        groups = _event_groups(hooks, spec.event, settings_path, create=True)
        assert groups is not None  # created when missing
        _place_hook(groups, spec, command, _listed_commands(previous, spec.event), report)
        installed.append(
            {
                "event": spec.event,
                "matcher": spec.matcher,
                "command": command,
                "timeout": spec.timeout,
            }
        )

    if stop_hook_block_cap is None:
        wanted, override = str(max_iterations_default + STOP_CAP_HEADROOM), False
    else:
        wanted, override = str(stop_hook_block_cap), True
    previous_cap = previous.get("stopHookBlockCap") if previous else None
    stop_cap = _place_stop_cap(settings, wanted, override, previous_cap, settings_path, report)
    bundled = _plan_bundled(root, previous, report)
    manifest = {
        "host": HOST,
        "serverName": server_name,
        "settingsPath": SETTINGS_RELPATH,
        "mcpPath": MCP_RELPATH,
        "hooks": installed,
        "mcpEntry": entry,
        **{
            kind: [
                {"path": item.relpath, "sha256": digest_bytes(data)}
                for item, data in bundled
                if item.kind == kind
            ]
            for kind in KIND_LABELS
        },
        "stopHookBlockCap": stop_cap,
        "installedAt": clock.now(),
    }
    if settings != settings_before:
        _write(root, SETTINGS_RELPATH, _pretty(settings), report)
    if mcp != mcp_before:
        _write(root, MCP_RELPATH, _pretty(mcp), report)
    for item, data in bundled:
        if _file_bytes(root / item.relpath) != data:
            _write(root, item.relpath, data, report)
    if previous is None or digest_excluding(previous, "installedAt") != digest_excluding(
        manifest, "installedAt"
    ):
        _write(state_root, MANIFEST_RELPATH, canonical(manifest) + b"\n", report)
    _note_local_cap(root, stop_cap["value"], report)
    return report


def uninstall(project_root: Path) -> InstallReport:
    """Remove exactly the entries the manifest lists, then the manifest itself."""
    root = Path(os.path.abspath(project_root))
    state_root = _state_root(root)
    manifest = _read_manifest(state_root)
    report = InstallReport()
    if manifest is None:
        return report
    settings_relpath, mcp_relpath = manifest["settingsPath"], manifest["mcpPath"]
    settings = _read_json_object(root, settings_relpath)
    mcp = _read_json_object(root, mcp_relpath)

    settings_changed = settings is not None and _remove_listed_hooks(
        settings, manifest["hooks"], root / settings_relpath, report
    )
    stop_cap = manifest.get("stopHookBlockCap")
    if settings is not None and stop_cap is not None and stop_cap["set"]:
        restored = _restore_stop_cap(settings, stop_cap, root / settings_relpath, report)
        settings_changed = restored or settings_changed
    mcp_changed = mcp is not None and _remove_listed_server(
        mcp, manifest["serverName"], manifest["mcpEntry"], root / mcp_relpath, report
    )
    if settings is not None and settings_changed:
        _write(root, settings_relpath, _pretty(settings), report)
    if mcp is not None and mcp_changed:
        _write(root, mcp_relpath, _pretty(mcp), report)
    for kind in KIND_LABELS:
        _remove_listed_files(root, kind, manifest.get(kind, []), report)
    remove_confined(state_root, MANIFEST_RELPATH)
    report.files.append(str(state_root / MANIFEST_RELPATH))
    return report


def _state_root(project_root: Path) -> Path:
    override = os.environ.get("ITHACA_DIR")
    return Path(os.path.abspath(override)) if override else project_root / STATE_DIR_NAME


def _console_script(name: str) -> str | None:
    """The absolute path of an installed console script, preferring this interpreter's."""
    beside = Path(os.path.abspath(sys.executable)).with_name(name)
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    import shutil  # imported here: shutil pulls in compression modules at import time

    found = shutil.which(name)
    return os.path.abspath(found) if found else None


def _mcp_entry() -> dict[str, Any]:
    script = _console_script("ithaca")
    if script is None:
        return {"command": os.path.abspath(sys.executable), "args": ["-m", "ithaca", "mcp"]}
    return {"command": script, "args": ["mcp"]}


def _listed_commands(manifest: dict[str, Any] | None, event: str) -> set[str]:
    """The commands a manifest lists for ``event``: Ithaca's own, whatever their path."""
    if manifest is None:
        return set()
    return {item["command"] for item in manifest["hooks"] if item["event"] == event}


def _register_server(
    mcp: dict[str, Any],
    server_name: str,
    entry: dict[str, Any],
    previous: dict[str, Any] | None,
    mcp_path: Path,
    report: InstallReport,
) -> None:
    """Add Ithaca's server under ``server_name``, replacing only a previous install's entry."""
    servers = _object_at(mcp, "mcpServers", mcp_path, create=True)
    label = f"mcp server {server_name}"
    current = servers.get(server_name)
    ours_before = previous["mcpEntry"] if previous else None
    if current is None:
        servers[server_name] = entry
        report.added.append(label)
    elif _same_server(current, entry):
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


def _same_server(current: Any, entry: dict[str, Any]) -> bool:
    return (
        isinstance(current, dict)
        and current.get("command") == entry["command"]
        and current.get("args", []) == entry["args"]
    )


def _place_hook(
    groups: list[Any],
    spec: HostEvent,
    command: str,
    previous_commands: set[str],
    report: InstallReport,
) -> None:
    """Put Ithaca's hook for one event in place, keeping the position an earlier one held.

    A hook already running ``command`` is kept; otherwise the first hook a previous
    install listed is rewritten in place; otherwise a new matcher group is appended.
    Every other copy of Ithaca's hook for this event is removed.
    """
    desired = {"type": "command", "command": command, "timeout": spec.timeout}
    label = f"hook {spec.event}"
    ithaca_commands = {command, *previous_commands}
    ours = [hook for hook in _command_hooks(groups) if hook["command"] in ithaca_commands]
    exact = [hook for hook in ours if hook["command"] == command]
    kept = exact[0] if exact else (ours[0] if ours else None)
    replaced = kept is not None and kept["command"] != command
    if kept is None:
        group: dict[str, Any] = {"hooks": [desired]}
        if spec.matcher is not None:
            group = {"matcher": spec.matcher, **group}
        groups.append(group)
        report.added.append(label)
    elif kept == desired:
        report.unchanged.append(label)
    else:
        kept.clear()
        kept.update(desired)
        report.added.append(label)
    ours_ids = {id(hook) for hook in ours if hook is not kept}
    if _remove_hooks(groups, lambda hook: id(hook) in ours_ids) or replaced:
        report.removed.append(label)


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
    env = _object_at(settings, "env", settings_path, create=True)
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
    env = _object_at(settings, "env", settings_path, create=False)
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


def _plan_bundled(
    root: Path, previous: dict[str, Any] | None, report: InstallReport
) -> list[tuple[Bundled, bytes]]:
    """Each shipped file to install, checked before anything is written: a file at that
    path that an earlier install did not write is the user's, and is never overwritten."""
    from importlib.resources import files

    ours_before = {
        item["path"]: item["sha256"]
        for kind in KIND_LABELS
        for item in (previous or {}).get(kind, [])
    }
    planned = []
    for item in BUNDLED:
        data = files("ithaca.skills").joinpath(*item.resource).read_bytes()
        resolve_confined(root, item.relpath)
        current = _file_bytes(root / item.relpath)
        if current == data:
            report.unchanged.append(item.label)
        elif current is None or digest_bytes(current) == ours_before.get(item.relpath):
            report.added.append(item.label)
        else:
            raise Conflict(
                item.taken_code,
                f"{root / item.relpath} exists and was not written by Ithaca; move it away first",
                {"path": str(root / item.relpath)},
            )
        planned.append((item, data))
    return planned


def _remove_listed_files(
    root: Path, kind: str, listed: list[dict[str, Any]], report: InstallReport
) -> None:
    """Remove each listed file that is still as installed, and folders left empty."""
    for item in listed:
        relpath = Path(item["path"])
        name = relpath.parent.name if kind == "skills" else relpath.stem
        label = f"{KIND_LABELS[kind]} {name}"
        current = _file_bytes(root / relpath)
        if current is None or digest_bytes(current) != item["sha256"]:
            report.unchanged.append(label)
            continue
        remove_confined(root, item["path"])
        report.removed.append(label)
        report.files.append(str(root / relpath))
        folder = (root / relpath).parent
        while folder != root and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
            folder = folder.parent


def _file_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def _remove_listed_hooks(
    settings: dict[str, Any],
    listed: list[dict[str, Any]],
    settings_path: Path,
    report: InstallReport,
) -> bool:
    """Remove each listed hook (by event and command); True if anything was removed."""
    hooks = _object_at(settings, "hooks", settings_path, create=False)
    if hooks is None:
        return False
    changed = False
    for item in listed:
        event, command = item["event"], item["command"]
        groups = _event_groups(hooks, event, settings_path, create=False)
        if groups is None or not _remove_hooks(groups, _runs(command)):
            continue
        changed = True
        report.removed.append(f"hook {event}")
        if not groups:
            del hooks[event]
    if changed and not hooks:
        del settings["hooks"]
    return changed


def _remove_listed_server(
    mcp: dict[str, Any],
    server_name: str,
    entry: dict[str, Any],
    mcp_path: Path,
    report: InstallReport,
) -> bool:
    """Remove Ithaca's server only if it still equals what was installed."""
    servers = _object_at(mcp, "mcpServers", mcp_path, create=False)
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


def _command_hooks(groups: list[Any]) -> list[dict[str, Any]]:
    """Every well-formed command hook of an event, in file order; others are not ours."""
    return [
        hook
        for group in groups
        if _is_group(group)
        for hook in group["hooks"]
        if _is_command_hook(hook)
    ]


def _remove_hooks(groups: list[Any], doomed: Callable[[dict[str, Any]], bool]) -> bool:
    """Remove the command hooks ``doomed`` selects and the groups that leaves empty."""
    emptied: set[int] = set()
    removed = False
    for group in filter(_is_group, groups):
        kept = [hook for hook in group["hooks"] if not (_is_command_hook(hook) and doomed(hook))]
        if len(kept) != len(group["hooks"]):
            removed = True
            group["hooks"][:] = kept
            if not kept:
                emptied.add(id(group))
    groups[:] = [group for group in groups if id(group) not in emptied]
    return removed


def _runs(command: str) -> Callable[[dict[str, Any]], bool]:
    return lambda hook: hook["command"] == command


def _is_group(group: Any) -> bool:
    return isinstance(group, dict) and isinstance(group.get("hooks"), list)


def _is_command_hook(hook: Any) -> bool:
    return isinstance(hook, dict) and isinstance(hook.get("command"), str)


def _event_groups(
    hooks: dict[str, Any], event: str, path: Path, *, create: bool
) -> list[Any] | None:
    if event not in hooks:
        if not create:
            return None
        hooks[event] = []
    groups = hooks[event]
    if not isinstance(groups, list):
        raise _invalid_settings(path, f"hooks.{event} is not a list of matcher groups")
    return groups


def _object_at(document: dict[str, Any], key: str, path: Path, *, create: bool) -> Any:
    if key not in document:
        if not create:
            return None
        document[key] = {}
    value = document[key]
    if not isinstance(value, dict):
        raise _invalid_settings(path, f"{key!r} is not a JSON object")
    return value


def _read_manifest(state_root: Path) -> dict[str, Any] | None:
    manifest = _read_json_object(state_root, MANIFEST_RELPATH)
    if manifest is None:
        return None
    path = state_root / MANIFEST_RELPATH
    hooks = manifest.get("hooks")
    stop_cap = manifest.get("stopHookBlockCap")
    well_formed = (
        isinstance(manifest.get("serverName"), str)
        and isinstance(manifest.get("settingsPath"), str)
        and isinstance(manifest.get("mcpPath"), str)
        and isinstance(manifest.get("mcpEntry"), dict)
        and isinstance(hooks, list)
        and all(
            isinstance(item, dict)
            and isinstance(item.get("event"), str)
            and isinstance(item.get("command"), str)
            for item in hooks
        )
        and (stop_cap is None or _is_cap_record(stop_cap))
    )
    if not well_formed:
        raise _invalid_settings(path, "the install manifest lacks a field or has the wrong shape")
    return manifest


def _is_cap_record(record: Any) -> bool:
    return isinstance(record, dict) and isinstance(record.get("set"), bool) and "value" in record


def _read_json_object(root: Path, relpath: str) -> dict[str, Any] | None:
    """The JSON object stored at ``relpath`` under ``root``; None if the file is absent.

    The path is checked for symlinks here, before anything is written, so a refused
    target can never leave an install half done. An empty file reads as ``{}``.
    """
    resolve_confined(root, relpath)
    path = root / relpath
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise _invalid_settings(path, "the file is not UTF-8 text") from exc
    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise _invalid_settings(path, f"the file is not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise _invalid_settings(path, "the file does not hold a JSON object")
    return value


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _write(root: Path, relpath: str, data: str | bytes, report: InstallReport) -> None:
    write_atomic(root, relpath, data)
    report.files.append(str(root / relpath))


def _pretty(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _invalid_settings(path: Path, problem: str) -> InvalidInput:
    return InvalidInput(
        "INVALID_SETTINGS",
        f"{path}: {problem}; nothing was written",
        {"path": str(path), "problem": problem},
    )
