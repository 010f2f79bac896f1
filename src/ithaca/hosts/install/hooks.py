"""Ithaca's hooks in a host's hooks document, placed and taken back without disturbing
the user's own.

Claude Code (``.claude/settings.json``) and Codex (``.codex/hooks.json``) share one layout:
``hooks.<Event>`` is a list of matcher groups, each holding command hooks. Which hooks are
Ithaca's is decided by the commands an install manifest lists, never by guessing from a
command's text, so a later install rewrites its own hook where it stood (moving the Ithaca
executable leaves no stale or duplicate hook behind) and an uninstall removes only those.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from ithaca.hosts.install.files import invalid_settings, object_at
from ithaca.hosts.install.report import InstallReport


class HostEvent(NamedTuple):
    """One hook event Ithaca registers: its name, tool matcher (None: none) and timeout."""

    event: str
    matcher: str | None
    timeout: int


HOOK_PROGRAM = "ithaca-hook"
# How the hook command tells ``ithaca-hook`` the host's timeout (``hosts.dispatch``).
TIMEOUT_FLAG = "--timeout"


def hook_command(event: str, host: str, timeout: int) -> str:
    """The shell command ``host`` runs for ``event``: the same text on every machine.

    The wiring is committed with the project, so it names no path of this machine: it
    runs the ``ithaca-hook`` on ``PATH``. Where there is none (a teammate's clone, an
    uninstalled Ithaca), it fails closed: exit code 2, which both hosts treat as a block
    of the prompt or tool call, with the reason and the fix on stderr. Any other failure
    of a hook would let the call through. The hook is told the ``timeout`` the host gives
    it, so that it answers before the host stops waiting (docs/hooks.md "Host timeouts").
    """
    missing = not_installed(f"then run: ithaca install {host}")
    return (
        f"{unless_installed(missing)}; exec {HOOK_PROGRAM} {host} {event} {TIMEOUT_FLAG} {timeout}"
    )


def not_installed(then: str) -> str:
    """What a hook says on a machine without ``ithaca-hook``, ending with ``then``."""
    # Claude Code quotes the whole command beside every Stop block, so the fallback text
    # must read as what it is, a branch for a machine without Ithaca, not as a refusal.
    return (
        f"ITHACA_NOT_INSTALLED: {HOOK_PROGRAM} is not on PATH on this machine, so Ithaca"
        f" cannot check this call. Install Ithaca (uv tool install ithaca, or pipx install"
        f" ithaca), {then}"
    )


def unless_installed(missing: str) -> str:
    """The shell test that blocks (exit 2) with ``missing`` when there is no hook program."""
    return (
        f"command -v {HOOK_PROGRAM} >/dev/null 2>&1 || {{ echo {shlex.quote(missing)} >&2;"
        f" exit 2; }}"
    )


def place_hooks(
    settings: dict[str, Any],
    path: Path,
    events: tuple[HostEvent, ...],
    host: str,
    previous: dict[str, Any] | None,
    report: InstallReport,
) -> list[dict[str, Any]]:
    """Put Ithaca's hook for each event in ``settings`` (in memory); returns the list the
    manifest keeps: each hook's event, matcher, command and timeout."""
    hooks = object_at(settings, "hooks", path, create=True)
    installed = []
    for spec in events:
        command = hook_command(spec.event, host, spec.timeout)
        groups = _event_groups(hooks, spec.event, path, create=True)
        assert groups is not None  # created when missing
        listed = {
            item["command"]
            for item in (previous or {}).get("hooks", [])
            if item["event"] == spec.event
        }
        _place_hook(groups, spec, command, listed, report)
        installed.append(
            {
                "event": spec.event,
                "matcher": spec.matcher,
                "command": command,
                "timeout": spec.timeout,
            }
        )
    return installed


def remove_listed_hooks(
    settings: dict[str, Any],
    listed: list[dict[str, Any]],
    path: Path,
    report: InstallReport,
) -> bool:
    """Remove each listed hook (by event and command); True if anything was removed."""
    hooks = object_at(settings, "hooks", path, create=False)
    if hooks is None:
        return False
    changed = False
    for item in listed:
        event, command = item["event"], item["command"]
        groups = _event_groups(hooks, event, path, create=False)
        if groups is None or not _remove_hooks(groups, _runs(command)):
            continue
        changed = True
        report.removed.append(f"hook {event}")
        if not groups:
            del hooks[event]
    if changed and not hooks:
        del settings["hooks"]
    return changed


def find_hook(settings: Any, event: str, command: str) -> dict[str, Any] | None:
    """The first command hook of ``event`` that runs ``command``; None if there is none
    (or the document is not laid out as hooks documents are)."""
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    groups = hooks.get(event) if isinstance(hooks, dict) else None
    if not isinstance(groups, list):
        return None
    return next((hook for hook in _command_hooks(groups) if hook["command"] == command), None)


def listed_hooks_ok(listed: Any) -> bool:
    """Whether a manifest's hook list names an event and a command for each hook."""
    return isinstance(listed, list) and all(
        isinstance(item, dict)
        and isinstance(item.get("event"), str)
        and isinstance(item.get("command"), str)
        for item in listed
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
        raise invalid_settings(path, f"hooks.{event} is not a list of matcher groups")
    return groups
