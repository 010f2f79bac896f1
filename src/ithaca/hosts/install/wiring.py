"""Whether the host wiring still holds, by meaning rather than by bytes.

The hosts' settings files are shared with the user, who edits them (a permission rule,
a model, a theme) and whose host writes them too; a byte digest would call every such
edit tampering. What matters is narrower, and this module checks exactly that, for the
effect check (``ithaca.hosts.effects``):

- every entry an install placed is still as its manifest's provenance records (the same
  comparison as ``ithaca install --doctor``), and Codex still trusts the project's hooks;
- no Claude Code settings layer turns every hook off (``disableAllHooks``), and, in the
  sandboxed profile, ``settings.local.json`` (which Claude Code prefers to the project's
  settings) does not switch the sandbox off or open its escape hatch.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ithaca.hosts.install.doctor import codex_trust
from ithaca.hosts.install.files import file_bytes, read_json_object
from ithaca.hosts.install.manifest import drift, manifest_relpath, well_formed
from ithaca.hosts.install.sandbox import SWITCHES
from ithaca.hosts.profile_gate import profile_in
from ithaca.kernel import IthacaError, Project, change, user_wiring

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
            manifest = read_json_object(state, relpath)
        except IthacaError as exc:
            found.append(change(f".ithaca/{relpath}", exc.message, restore))
            continue
        if manifest is None or not well_formed(manifest.get("provenance")):
            continue  # not installed, or installed before provenance existed
        for item in drift(manifest["provenance"], lambda path: file_bytes(root / path)):
            found.append(change(item["path"] or f".ithaca/{relpath}", item["message"], restore))
        if host == "codex":
            for item in codex_trust(root, manifest):
                found.append(change(item["path"], item["message"], restore))
        else:
            found += _claude_switches(root, profile_in(manifest) == "sandboxed")
    return found


def _claude_switches(root: Path, sandboxed: bool) -> list[dict[str, str]]:
    found = []
    paths = {name: root / name for name in CLAUDE_LAYERS[:2]}
    paths[CLAUDE_LAYERS[2]] = Path(user_wiring()[CLAUDE_LAYERS[2]])
    for name, path in paths.items():
        settings = _settings(path)
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


def _settings(path: Path) -> dict[str, Any]:
    try:
        found = read_json_object(path.parent, path.name) if os.path.isfile(path) else None
    except IthacaError:
        return {}
    return found or {}
