"""The fingerprint of what Ithaca protects, and what changed in it.

A guard that reads commands can be spelled around; a check of effects cannot. After every
tool call and before every mutating one, the hook compares the protected files with the
fingerprint recorded when Ithaca (or the user, lifting a lockdown) last accepted them.

Two levels keep that cheap. The *signature* is the stat of every protected path (inode,
size, modification time) folded into one digest: when it equals the recorded one nothing
else is read. When it differs, the *contents* say whether the change matters:

- configuration layers, team rule files (``.ithaca/protocols/*.json``) and install
  manifests are compared by SHA-256 with what was recorded;
- the host wiring is compared by meaning, by ``ithaca.hosts.install.wiring``: the user's
  own edits elsewhere in the hosts' settings files are not changes.

A signature that moved with nothing that matters changed is recorded anew: it is only a
cache of the contents. The database's identity is its journal, which the effect check
holds to the anchor beside it (``kernel.anchor``): another database, or an older copy of
this one, lacks the event Ithaca last committed. A copy of the whole project keeps both,
and is the same project. Standard library and light modules only (hook path).
"""

from __future__ import annotations

import os

from ithaca.kernel import config
from ithaca.kernel.canon import sha256  # not hashlib: OpenSSL costs every hook milliseconds
from ithaca.kernel.project import RUNTIME_DIR_NAME, Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The host wiring in the project (the guard keeps the agent's file tools out of it too).
PROJECT_WIRING = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
    ".codex/config.toml",
    ".codex/hooks.json",
)


def user_wiring() -> dict[str, str]:
    """The hosts' user-level settings files, by display name."""
    claude = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")
    codex = os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")
    return {
        "~/.claude/settings.json": os.path.join(claude, "settings.json"),
        "~/.codex/config.toml": os.path.join(codex, "config.toml"),
    }


def tracked(project: Project) -> dict[str, str]:
    """The files compared by content, by display name: configuration layers, team rule
    files and install manifests."""
    user = os.path.join(config.home(), "config.toml")
    files = {
        user: user,  # by its own path: another ITHACA_HOME is another user's, not a change
        ".ithaca/config.toml": os.path.join(project.state_root, "config.toml"),
        ".ithaca/.runtime/config.toml": os.path.join(project.runtime, "config.toml"),
    }
    for folder, shown in (
        (project.protocols_dir, ".ithaca/protocols"),
        (os.path.join(project.runtime, "installs"), f".ithaca/{RUNTIME_DIR_NAME}/installs"),
    ):
        for name in _json_files(folder):
            files[f"{shown}/{name}"] = os.path.join(folder, name)
    return files


def signature(project: Project) -> str:
    """One digest of the stat of every protected path (cheap: no file is read)."""
    lines = []
    paths = {
        **tracked(project),
        **{name: os.path.join(project.root, name) for name in PROJECT_WIRING},
        **user_wiring(),
    }
    for name in sorted(paths):
        lines.append(f"{name} {_stat(paths[name])}")
    lines += [f"git {path} {_stat(path)}" for path in head_files(project)]
    return sha256("\n".join(lines).encode()).hexdigest()


def contents(project: Project) -> dict[str, str | None]:
    """The SHA-256 of each tracked file (absent: None)."""
    return {name: _sha256(path) for name, path in tracked(project).items()}


def changes(project: Project, recorded: dict[str, Any]) -> list[dict[str, str]]:
    """What changed in the tracked files since ``recorded`` (a ``contents`` result), each
    as ``{"path", "change", "restore"}``; empty when nothing did."""
    now = contents(project)
    found = []
    for name in sorted(set(recorded) | set(now)):
        before, after = recorded.get(name), now.get(name)
        if before == after or (os.path.isabs(name) and not (name in recorded and name in now)):
            continue
        if before is None:
            found.append(change(name, "added", "remove it, or accept it"))
        elif after is None:
            found.append(change(name, "removed", "restore it from Git or a backup"))
        else:
            found.append(change(name, "edited", "restore it from Git, or accept the edit"))
    return found


def change(path: str, change: str, restore: str) -> dict[str, str]:
    """One change as the lockdown records it."""
    return {"path": path, "change": change, "restore": restore}


def head_files(project: Project) -> list[str]:
    """The files a switch, a reset or a commit rewrites: ``HEAD``, its ref, packed refs."""
    git_dir = os.path.join(project.work_root, ".git")
    if os.path.isfile(git_dir):  # a linked worktree: ``gitdir: <path>``
        try:
            with open(git_dir, encoding="utf-8") as handle:
                git_dir = os.path.join(project.work_root, handle.read().split(":", 1)[1].strip())
        except (OSError, IndexError):
            return []
    head = os.path.join(git_dir, "HEAD")
    found = [head, os.path.join(git_dir, "packed-refs")]
    try:
        with open(head, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError:
        return found
    if text.startswith("ref: "):
        found.append(os.path.join(git_dir, text[5:]))
    return found


def _json_files(folder: str) -> list[str]:
    try:
        return sorted(entry.name for entry in os.scandir(folder) if entry.name.endswith(".json"))
    except OSError:
        return []


def _stat(path: str) -> str:
    try:
        found = os.stat(path)
    except OSError:
        return "-"
    return f"{found.st_ino} {found.st_size} {found.st_mtime_ns}"


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return sha256(handle.read()).hexdigest()
    except OSError:
        return None
