"""Claude Code's OS sandbox as Ithaca's install profile.

A guard that reads command text can always be spelled around. Claude Code can run every
Bash command under bubblewrap (Linux) or Seatbelt (macOS), with the filesystem read-only
outside the project and the paths of ``sandbox.filesystem.denyWrite`` read-only inside it.
The *sandboxed* profile, the default, switches that sandbox on, makes it fail closed
(``failIfUnavailable``; no ``allowUnsandboxedCommands`` escape), and lists what the
agent's commands must not write: Ithaca's state, the user's Ithaca settings, and every
file that wires Ithaca into a host. File tools do not run in that sandbox, so the same
paths get permission deny rules for ``Edit`` and ``Write`` (the hook's path checks stay
too). One file the agent's commands may not even read: the user's seal key
(``~/.ithaca/journal.key``, ``kernel.anchor``), in ``sandbox.filesystem.denyRead`` and as
a ``Read`` deny rule for the file tool. The *unsandboxed* profile leaves the sandbox
settings alone; status and the doctor say that the shell guard is then a best-effort
text check, and that the seal key is then within the agent's reach.

Inside the sandbox, bubblewrap leaves empty stand-ins for files it guards that do not
exist (``.bashrc``, ``.gitconfig``, ``.vscode``, …) in the working tree, where ``git add
-A`` would commit them. The install lists them in the repository's ``.git/info/exclude``
(local, never committed) between two marker lines; a stand-in for a folder is excluded
only as a file, so a real ``.vscode/`` folder is still seen.

The paths are written relative (``./`` is the session's working directory for the
sandbox, ``/`` the project for permission rules, as Claude Code 2.1.332 reads them), so
the committed settings name no path of this machine. The install records what it set:
the three switches with the values they replaced, and the entries it added to the two
lists; uninstall takes back exactly that, while it is still as set.
"""

from __future__ import annotations

import copy
import os
import platform
import shutil
from pathlib import Path
from typing import Any

from ithaca.hosts.install.files import file_bytes, object_at, read_json_object, state_root
from ithaca.hosts.install.manifest import manifest_relpath
from ithaca.hosts.install.report import InstallReport
from ithaca.hosts.install.staged import Staged
from ithaca.hosts.profile_gate import profile_in
from ithaca.kernel import Refused, invalid_field

PROFILES = ("sandboxed", "unsandboxed")
DEFAULT_PROFILE = "sandboxed"
LABEL = "sandbox profile"
SWITCHES: dict[str, bool] = {
    "enabled": True,
    "failIfUnavailable": True,
    "allowUnsandboxedCommands": False,
}
# What the agent's shell may not write, in the project and in the user's home.
PROTECTED = (".ithaca", ".claude", ".mcp.json", ".codex")
HOME_PROTECTED = ("~/.ithaca", "~/.claude", "~/.codex")
# What git runs or obeys outside the sandbox, on the user's next commit: a way out.
GIT_PROTECTED = (".git/hooks", ".git/config")
DENY_WRITE = (*(f"./{name}" for name in (*PROTECTED, *GIT_PROTECTED)), *HOME_PROTECTED)
FILE_TOOLS = ("Edit", "Write")
FOLDERS = (".ithaca", ".claude", ".codex", ".git/hooks")
DENY_RULES = tuple(
    f"{tool}(/{name}/**)" if name in FOLDERS else f"{tool}(/{name})"
    for name in (*PROTECTED, *GIT_PROTECTED)
    for tool in FILE_TOOLS
)
# What the Linux sandbox needs besides Claude Code (bubblewrap, and socat for its proxy),
# looked up on PATH and in the system folders a login shell has.
LINUX_TOOLS = ("bwrap", "socat")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
UNSANDBOXED_NOTE = (
    "unsandboxed profile: the agent's shell commands are checked by reading their text, a"
    " best-effort guard that a determined agent can spell around (docs/hooks.md, Limits);"
    " they can also read the key that seals the journal (~/.ithaca/journal.key), so a"
    " journal cut or rolled back together with its anchor and head record, all sealed"
    " again, cannot be detected"
)
_ABSENT: Any = object()


def seal_key() -> str:
    """What the agent's shell may not even read: the key that seals the journal's anchor
    and head (``kernel.anchor``), so that it cannot re-make a seal over a journal it cut.
    Named under ``~`` where the user's Ithaca home is in theirs (the default,
    ``~/.ithaca/journal.key``), so the committed settings name no path of this machine;
    absolute otherwise."""
    from ithaca.kernel import anchor

    path = anchor.key_path()
    inside = os.path.relpath(path, os.path.expanduser("~"))
    return path if inside.startswith("..") else f"~/{inside}"


# What Claude Code 2.1.332's sandbox leaves in the working tree when it is missing there.
STUB_FILES = (".bash_profile", ".bashrc", ".gitconfig", ".gitmodules", ".profile",
              ".ripgreprc", ".zprofile", ".zshrc")  # fmt: skip
STUB_FOLDERS = (".claude", ".codex", ".idea", ".vscode")  # Codex 0.169.0 stubs .claude
EXCLUDE_RELPATH = ".git/info/exclude"
EXCLUDE_BLOCK = "\n".join(
    [
        "# ithaca: stand-ins the hosts' sandboxes leave in the working tree",
        *(f"/{name}" for name in STUB_FILES),
        *(line for name in STUB_FOLDERS for line in (f"/{name}", f"!/{name}/")),
        "# ithaca: end",
    ]
)


def check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise invalid_field(
            "/profile",
            "INVALID_PROFILE",
            f"unknown install profile {profile!r}; choose one of {', '.join(PROFILES)}",
        )


def require_sandbox() -> None:
    """Refuse the sandboxed profile where Claude Code's sandbox cannot run."""
    system = platform.system()
    if system == "Darwin":
        return
    if system != "Linux":
        raise Refused(
            "SANDBOX_UNAVAILABLE",
            f"Claude Code's sandbox does not run on {system}; choose --profile unsandboxed",
        )
    missing = [
        tool
        for tool in LINUX_TOOLS
        if shutil.which(tool) is None and shutil.which(tool, path=SYSTEM_PATH) is None
    ]
    if missing:
        raise Refused(
            "SANDBOX_UNAVAILABLE",
            f"Claude Code's sandbox needs {' and '.join(missing)} on PATH: install them"
            " (Debian/Ubuntu: sudo apt-get install bubblewrap socat), or choose"
            " --profile unsandboxed to keep only the text guard",
            {"missing": missing},
        )


def place(
    settings: dict[str, Any],
    profile: str,
    previous: dict[str, Any] | None,
    path: Path,
    report: InstallReport,
) -> dict[str, Any]:
    """Apply ``profile`` to ``settings`` (in memory), first taking back what an earlier
    install set; returns the manifest record."""
    before = {key: copy.deepcopy(settings.get(key, _ABSENT)) for key in ("sandbox", "permissions")}
    if previous:
        take_back(settings, previous, path)
    record: dict[str, Any] = {"profile": profile}
    if profile == "sandboxed":
        record.update(_apply(settings, path))
    after = {key: settings.get(key, _ABSENT) for key in ("sandbox", "permissions")}
    if after == before:
        report.unchanged.append(f"{LABEL} {profile}")
    else:
        report.added.append(f"{LABEL} {profile}")
    if profile == "unsandboxed":
        report.notes.append(UNSANDBOXED_NOTE)
    return record


def take_back(settings: dict[str, Any], record: dict[str, Any], path: Path) -> bool:
    """Undo what ``record`` says an install set, where it is still as set; True if any."""
    changed = False
    sandbox = settings.get("sandbox")
    if isinstance(sandbox, dict):
        for key, previous in record.get("switches", {}).items():
            if sandbox.get(key, _ABSENT) == SWITCHES[key]:
                if previous.get("absent"):
                    del sandbox[key]
                else:
                    sandbox[key] = previous["value"]
                changed = True
        changed = _remove(sandbox, "filesystem", "denyWrite", record) or changed
        changed = _remove(sandbox, "filesystem", "denyRead", record) or changed
        if not sandbox and record.get("createdSandbox"):
            del settings["sandbox"]
    permissions = settings.get("permissions")
    if isinstance(permissions, dict):
        changed = _remove(permissions, None, "deny", record) or changed
        if not permissions and record.get("createdPermissions"):
            del settings["permissions"]
    return changed


def _apply(settings: dict[str, Any], path: Path) -> dict[str, Any]:
    created_sandbox = "sandbox" not in settings
    sandbox = object_at(settings, "sandbox", path, create=True)
    switches = {}
    for key, value in SWITCHES.items():
        current = sandbox.get(key, _ABSENT)
        if current != value:
            switches[key] = {"absent": True} if current is _ABSENT else {"value": current}
            sandbox[key] = value
    record: dict[str, Any] = {"switches": switches, "createdSandbox": created_sandbox}
    record["createdFilesystem"] = "filesystem" not in sandbox
    filesystem = object_at(sandbox, "filesystem", path, create=True)
    _add(filesystem, "denyWrite", DENY_WRITE, path, record)
    key = seal_key()
    _add(filesystem, "denyRead", (key,), path, record)
    record["createdPermissions"] = "permissions" not in settings
    permissions = object_at(settings, "permissions", path, create=True)
    # The Read tool runs outside the sandbox: a permission rule keeps it from the key too
    # (Claude Code writes an absolute path as ``//path``).
    read_rule = f"Read({key})" if key.startswith("~") else f"Read(/{key})"
    _add(permissions, "deny", (*DENY_RULES, read_rule), path, record)
    return record


def _add(
    table: dict[str, Any], key: str, wanted: tuple[str, ...], path: Path, record: dict[str, Any]
) -> None:
    """Append the ``wanted`` entries ``table[key]`` lacks, recording them in ``record``."""
    record[f"created:{key}"] = key not in table
    entries = table.setdefault(key, [])
    if not isinstance(entries, list):
        raise invalid_field(f"/{key}", "INVALID_SETTINGS", f"{path}: {key!r} is not a list")
    record[key] = [entry for entry in wanted if entry not in entries]
    entries.extend(record[key])


def _remove(table: dict[str, Any], nested: str | None, key: str, record: dict[str, Any]) -> bool:
    """Take ``record[key]``'s entries back out of ``table[nested][key]`` (or ``table[key]``),
    and the list or table itself when the install created it and it is empty now."""
    holder = table.get(nested) if nested else table
    if not isinstance(holder, dict) or not isinstance(holder.get(key), list):
        return False
    added = record.get(key, [])
    kept = [entry for entry in holder[key] if entry not in added]
    changed = len(kept) != len(holder[key])
    holder[key] = kept
    if not kept and record.get(f"created:{key}"):
        del holder[key]
    if nested and not holder and record.get("createdFilesystem"):
        del table[nested]
    return changed


def stage_exclusions(staged: Staged, root: Path, host: str, wanted: bool) -> None:
    """Add (or take out) the sandbox stand-ins in ``.git/info/exclude``, where the project
    is the top of a Git repository with a ``.git`` folder. One block serves both hosts: it
    stays while either host's install is sandboxed."""
    if not (root / ".git").is_dir():
        return
    wanted = wanted or any(
        profile_in(read_json_object(state_root(root), manifest_relpath(other))) == "sandboxed"
        for other in ("claude", "codex")
        if other != host
    )
    data = file_bytes(root / EXCLUDE_RELPATH)
    text = data.decode("utf-8", "replace") if data is not None else None
    changed = excluded(text) if wanted else without_exclusions(text or "")
    if changed != (text or ""):
        staged.write(root, EXCLUDE_RELPATH, changed)


def excluded(text: str | None) -> str:
    """``.git/info/exclude`` with Ithaca's block of sandbox stand-ins (once)."""
    current = without_exclusions(text or "")
    separator = "" if not current or current.endswith("\n") else "\n"
    return f"{current}{separator}{EXCLUDE_BLOCK}\n"


def without_exclusions(text: str) -> str:
    """``text`` without Ithaca's block."""
    start = text.find(EXCLUDE_BLOCK)
    if start < 0:
        return text
    return text[:start] + text[start + len(EXCLUDE_BLOCK) + 1 :]
