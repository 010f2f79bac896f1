"""Whether the host wiring still holds, by meaning rather than by bytes.

The hosts' settings files are shared with the user, who edits them (a permission rule,
a model, a theme) and whose host writes them too; a byte digest would call every such
edit tampering. What matters is narrower, and this module checks exactly that, for the
effect check (``ithaca.hosts.effects``):

- every entry an install placed is still as its manifest's provenance records (the same
  comparison as ``ithaca install --doctor``), and Codex still trusts the project's hooks;
  a file an install wrote whole (a skill, the reviewer agent) is compared by its bytes,
  and must still be a singly linked regular file: a link to an identical copy is a change;
- no Claude Code settings layer turns every hook off (``disableAllHooks``), and, in the
  sandboxed profile, ``settings.local.json`` (which Claude Code prefers to the project's
  settings) does not switch the sandbox off or open its escape hatch.

Every file is read through ``kernel.regular``: never through a link in the project (the
user's own settings may be a link, as dotfile managers make them), and never waiting on a
FIFO. A project settings file that is no regular file is the fingerprint's to report
(``kernel.fingerprint``); it is not read here.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from ithaca.hosts.install.doctor import codex_trust
from ithaca.hosts.install.files import invalid_settings, parse_json_object
from ithaca.hosts.install.manifest import drift, manifest_relpath, well_formed
from ithaca.hosts.install.sandbox import SWITCHES
from ithaca.hosts.profile_gate import profile_in
from ithaca.kernel import IthacaError, Project, change, regular, user_wiring

HOSTS = ("claude", "codex")
LOCAL_SETTINGS = ".claude/settings.local.json"
CLAUDE_LAYERS = (".claude/settings.json", LOCAL_SETTINGS, "~/.claude/settings.json")


def changes(project: Project) -> list[dict[str, str]]:
    """What no longer wires Ithaca in as installed, as ``{"path", "change", "restore"}``."""
    root = Path(project.root)
    state = Path(project.state_root)
    found = []
    for host in HOSTS:
        relpath = manifest_relpath(host)
        restore = f"run `ithaca install {host}` in your terminal"
        try:
            manifest = _json_object(state / relpath)
        except IthacaError as exc:
            found.append(change(f".ithaca/{relpath}", exc.message, restore))
            continue
        if manifest is None or not well_formed(manifest.get("provenance")):
            continue  # not installed, or installed before provenance existed
        entries = manifest["provenance"]["entries"]
        kinds = {path: regular.load(str(root / path))[0] for path in {e["path"] for e in entries}}
        found += [
            change(
                entry["path"],
                f"{entry['label']}: is {regular.KINDS[str(kinds[entry['path']])]} where the"
                " install wrote a regular file",
                restore,
            )
            for entry in entries
            if entry["kind"] == "file" and regular.odd(kinds[entry["path"]])
        ]
        found += [
            change(item["path"] or f".ithaca/{relpath}", item["message"], restore)
            for item in drift(manifest["provenance"], partial(_bytes, root))
            if not regular.odd(kinds.get(item["path"]))  # said above, or the fingerprint's
        ]
        if host == "codex":
            hooks = manifest.get("hooksPath")
            if not isinstance(hooks, str) or not regular.odd(regular.load(str(root / hooks))[0]):
                for item in codex_trust(root, manifest):
                    found.append(change(item["path"], item["message"], restore))
        else:
            found += _claude_switches(root, profile_in(manifest) == "sandboxed")
    return found


def _claude_switches(root: Path, sandboxed: bool) -> list[dict[str, str]]:
    found = []
    paths = {name: (str(root / name), False) for name in CLAUDE_LAYERS[:2]}
    paths[CLAUDE_LAYERS[2]] = (user_wiring()[CLAUDE_LAYERS[2]], True)
    for name, (path, users_own) in paths.items():
        settings = _settings(path, users_own)
        if settings.get("disableAllHooks") is True:
            found.append(
                change(name, "sets disableAllHooks: every hook is off", f"remove it from {name}")
            )
        sandbox = settings.get("sandbox")
        if sandboxed and name == LOCAL_SETTINGS and isinstance(sandbox, dict):
            for key, wanted in SWITCHES.items():
                if key in sandbox and sandbox[key] is not wanted:
                    found.append(
                        change(
                            name,
                            f"sets sandbox.{key} to {sandbox[key]!r}, overriding the profile",
                            f"remove sandbox.{key} from {name}",
                        )
                    )
    return found


def _bytes(root: Path, relpath: str) -> bytes | None:
    """What a file in the project holds; None when no regular file with one name is there."""
    return regular.load(str(root / relpath))[1]


def _json_object(path: Path, *, users_own: bool = False) -> dict[str, Any] | None:
    """The JSON object a settings file or manifest holds; None when nothing readable is
    there (a link or a FIFO in the project is reported as what it is, not read)."""
    _, data = (regular.read_through if users_own else regular.read)(str(path))
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid_settings(path, "the file is not UTF-8 text") from exc
    return parse_json_object(text, path)


def _settings(path: str, users_own: bool) -> dict[str, Any]:
    try:
        return _json_object(Path(path), users_own=users_own) or {}
    except IthacaError:
        return {}
