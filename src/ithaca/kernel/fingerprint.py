"""The fingerprint of what Ithaca protects, and what changed in it.

A guard that reads commands can be spelled around; a check of effects cannot. After every
tool call and before every mutating one, the hook compares the protected files with the
fingerprint recorded when Ithaca (or the user, lifting a lockdown) last accepted them.

Files are judged by their bytes, never by their size, inode or times, which a process can
put back after an edit (``kernel.regular`` reads them). Two levels keep that cheap. The
*signature* holds the protected files themselves: the few small files in the project are
read in one pass and their bytes set side by side, which costs less to compare with the
recorded signature than hashing them would (the user's own files outside the project
stand in it by their SHA-256: the signature is kept in the project's database, and their
contents are not the project's). When it equals the recorded one nothing else is done.
When it differs, the slower comparison says whether the change matters:

- configuration layers, team rule files (``kernel.regular.rule_files``, the definition the
  protocol loader uses too) and install manifests are compared by SHA-256 with what was
  recorded;
- inside the project, a file Ithaca protects must be a singly linked regular file: a
  symbolic link, a hard link, a FIFO, a socket, a device or a folder where one belongs is
  a change whatever was recorded, and while one stands there the signature never settles;
- the derived configuration cache (``.ithaca/.runtime/config.json``) is never taken as it
  stands: it is rebuilt from the configuration files and compared (``config.audit``);
- the host wiring, and the skills and agent definitions an install wrote whole, are
  compared by meaning and against the install's provenance, by
  ``ithaca.hosts.install.wiring``: the user's own edits elsewhere in the hosts' settings
  files are not changes.

A signature that moved with nothing that matters changed is recorded anew: it is only a
cache of the contents. The database's identity is its journal, which the effect check
holds to the anchor beside it (``kernel.anchor``): another database, or an older copy of
this one, lacks the event Ithaca last committed. A copy of the whole project keeps both,
and is the same project. Standard library and light modules only (hook path).
"""

from __future__ import annotations

import os

from ithaca.kernel import config, regular
from ithaca.kernel.canon import sha256  # not hashlib: OpenSSL costs every hook milliseconds
from ithaca.kernel.project import RUNTIME_DIR_NAME, Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    Surveyed = list[tuple[str, str, str | None, bytes | None]]

# The host wiring in the project (the guard keeps the agent's file tools out of it too).
PROJECT_WIRING = (
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".mcp.json",
    ".codex/config.toml",
    ".codex/hooks.json",
)
# The files an install writes whole: Claude Code's skills and reviewer agent, Codex's
# reviewer role (each host installer's ``BUNDLED``; a test holds the two equal).
SHIPPED = (
    ".claude/skills/ulysses/SKILL.md",
    ".claude/skills/ultragoal/SKILL.md",
    ".claude/agents/code-reviewer.md",
    ".codex/agents/code-reviewer.toml",
)
CONFIG_CACHE = f".ithaca/{RUNTIME_DIR_NAME}/{config.CACHE_NAME}"
PROTOCOLS = ".ithaca/protocols"
INSTALLS = f".ithaca/{RUNTIME_DIR_NAME}/installs"
# What each group of protected files is, for ``survey``:
USER = "user"  # a tracked file of the user's own, outside the project: read through a link
TRACKED = "tracked"  # a tracked file in the project, compared by content
DERIVED = "derived"  # rebuilt from what it is derived from, never taken as it stands
WIRING = "wiring"  # the hosts' settings in the project: compared by meaning
BUNDLED = "shipped"  # written whole by an install: compared with its provenance
FOLDER = "folder"  # a folder of tracked files that is no real folder
GIT = "git"  # what the checked-out commit is
# Groups where nothing but a regular file may stand: in the project one with a single name
# (``regular.read``); the user's own settings may be a link to one (``read_through``).
_REGULAR = (TRACKED, DERIVED, WIRING, FOLDER)


def user_wiring() -> dict[str, str]:
    """The hosts' user-level settings files, by display name."""
    claude = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")
    codex = os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")
    return {
        "~/.claude/settings.json": os.path.join(claude, "settings.json"),
        "~/.codex/config.toml": os.path.join(codex, "config.toml"),
    }


def survey(project: Project) -> Surveyed:
    """``(group, name, token, data)`` of everything the fingerprint covers, in a fixed
    order. A regular file in the project comes as ``(regular.REGULAR, its bytes)``; every
    other token is what ``kernel.regular`` made of the file: None (nothing there), the
    SHA-256 of the user's own file, or the kind of thing that stands where a file belongs.
    """
    user = os.path.join(config.home(), "config.toml")
    # by its own path: another ITHACA_HOME is another user's, not a change
    found: Surveyed = [(USER, user, regular.read_through(user)[0], None)]
    found.append((TRACKED, ".ithaca/config.toml", *_load(project.state_root, "config.toml")))
    found.append((TRACKED, f".ithaca/{RUNTIME_DIR_NAME}/config.toml",
                  *_load(project.runtime, "config.toml")))  # fmt: skip
    for folder, shown in ((project.protocols_dir, PROTOCOLS),
                          (os.path.join(project.runtime, "installs"), INSTALLS)):  # fmt: skip
        kind, names = regular.rule_files(folder)
        if kind is not None:
            found.append((FOLDER, shown, kind, None))
        found += [(TRACKED, f"{shown}/{name}", *_load(folder, name)) for name in names]
    found.append((DERIVED, CONFIG_CACHE, *_load(project.runtime, config.CACHE_NAME)))
    found += [(BUNDLED, name, *_load(project.root, name)) for name in SHIPPED]
    found += [(WIRING, name, *_load(project.root, name)) for name in PROJECT_WIRING]
    found += [(WIRING, name, regular.read_through(path)[0], None)
              for name, path in user_wiring().items()]  # fmt: skip
    found += [(GIT, name, token, None) for name, token in _git(project)]
    return found


def signature(project: Project, surveyed: Surveyed | None = None) -> bytes | None:
    """The protected files as the fast check compares them (of ``surveyed``, a ``survey``
    result, when given): each one's group, name and token, and the bytes of those read
    whole, each preceded by its length so that no file's bytes can pass for another's.
    None while something other than a regular file stands where one belongs, so that the
    slower comparison runs on every call until it is gone."""
    parts = []
    for group, name, token, data in survey(project) if surveyed is None else surveyed:
        if regular.odd(token) and group in (*_REGULAR, BUNDLED):
            return None
        size = "-" if data is None else len(data)
        parts.append(f"\n{group} {name} {token or '-'} {size}\n".encode())
        if data is not None:
            parts.append(data)
    return b"".join(parts)


def contents(project: Project, surveyed: Surveyed | None = None) -> dict[str, str | None]:
    """The SHA-256 of each file compared by content (absent: None; for something other
    than a regular file, its kind), and of the derived configuration cache."""
    found = survey(project) if surveyed is None else surveyed
    return {
        name: token if data is None else sha256(data).hexdigest()
        for group, name, token, data in found
        if group in (USER, TRACKED, DERIVED)
    }


def changes(project: Project, recorded: dict[str, Any]) -> list[dict[str, str]]:
    """What changed in the files compared by content since ``recorded`` (a ``contents``
    result), and what stands where a regular file belongs, each as ``{"path", "change",
    "restore"}``; empty when nothing did. The host wiring and the installed skills and
    agents are ``ithaca.hosts.install.wiring``'s to compare."""
    surveyed = survey(project)
    found = [
        change(
            name,
            f"is {regular.KINDS[str(token)]} where a"
            f" {'folder' if group == FOLDER else 'regular file'} belongs",
            "put a regular one of its own there (or remove it), then lift the lockdown",
        )
        for group, name, token, _ in surveyed
        if group in _REGULAR and regular.odd(token)
    ]
    odd = {item["path"] for item in found}
    now = contents(project, surveyed)
    cache = now.pop(CONFIG_CACHE)
    before = {name: token for name, token in recorded.items() if name != CONFIG_CACHE}
    for name in sorted(set(before) | set(now)):
        was, is_now = before.get(name), now.get(name)
        if was == is_now or name in odd:
            continue
        if os.path.isabs(name) and not (name in before and name in now):
            continue
        if was is None:
            found.append(change(name, "added", "remove it, or accept it"))
        elif is_now is None:
            found.append(change(name, "removed", "restore it from Git or a backup"))
        else:
            found.append(change(name, "edited", "restore it from Git, or accept the edit"))
    if cache != recorded.get(CONFIG_CACHE) or regular.odd(cache):
        problem = config.audit(project.state_root)  # rebuilt from the files, whatever held
        if problem is not None:
            restore = "nothing to restore: Ithaca made it again from the configuration files"
            found.append(change(CONFIG_CACHE, problem, f"{restore}; review them, then lift"))
    return found


def change(path: str, change: str, restore: str) -> dict[str, str]:
    """One change as the lockdown records it."""
    return {"path": path, "change": change, "restore": restore}


def _git(project: Project) -> list[tuple[str, str | None]]:
    """What says which commit is checked out, by content: ``HEAD``, the loose ref it
    names, and when there is none the line of ``packed-refs`` that names it (the rest of
    that file, which can be large, says nothing about the checked-out commit)."""
    git_dir = common = os.path.join(project.work_root, ".git")
    _, pointer = regular.load(git_dir)
    if pointer is not None:  # a linked worktree: ``gitdir: <path>``; refs are shared
        where = pointer.decode("utf-8", "replace").split(":", 1)
        if len(where) != 2:
            return []
        git_dir = common = os.path.join(project.work_root, where[1].strip())
        _, shared = regular.load(os.path.join(git_dir, "commondir"))
        if shared is not None:
            common = os.path.join(git_dir, shared.decode("utf-8", "replace").strip())
    head = os.path.join(git_dir, "HEAD")
    found = [(head, _text(*regular.load(head)))]
    text = found[0][1] or ""
    name = text[5:]
    if not text.startswith("ref: ") or not _ref_name(name):
        return found  # a detached HEAD names its commit itself (or HEAD is no ref Git takes)
    ref = os.path.join(common, name)
    kind, data = regular.load(ref)
    found.append((ref, _text(kind, data)))
    if kind is not None:
        return found
    packed = os.path.join(common, "packed-refs")
    kind, data = regular.load(packed)
    if data is not None:
        at = data.find(f" {name}\n".encode())
        line = data[data.rfind(b"\n", 0, at) + 1 : at] if at >= 0 else b""
        kind = line.decode("ascii", "replace")
    found.append((f"{packed} {name}", kind))
    return found


def _ref_name(name: str) -> bool:
    """Whether ``name`` is a branch's ref inside the Git folder (``HEAD`` can be written
    by the agent: a path out of ``refs/`` would make every hook read a file it chose)."""
    return name.startswith("refs/") and ".." not in name.split("/") and "\0" not in name


def _text(kind: str | None, data: bytes | None) -> str | None:
    """A small Git file as its own token: its text (no digest needed), else its kind."""
    return kind if data is None else data.decode("utf-8", "replace").strip()


def _load(folder: str, name: str) -> tuple[str | None, bytes | None]:
    return regular.load(os.path.join(folder, name))
