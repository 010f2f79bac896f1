"""Whether the Ithaca plugin is enabled for Claude Code in a project, and where.

Claude Code reads ``enabledPlugins`` from the user's settings, then the project's shared
and local ones, a later file overriding an earlier one. ``ithaca install claude`` asks
this before wiring the same hooks into the project, and status and doctor name the
plugin as the project's Claude Code wiring.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

PLUGIN_NAME = "ithaca"


def settings_files(project_root: Path) -> list[Path]:
    """Claude Code's settings files that can enable a plugin here, lowest first."""
    user = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
    return [
        user / "settings.json",
        project_root / ".claude" / "settings.json",
        project_root / ".claude" / "settings.local.json",
    ]


def enabling(project_root: Path) -> tuple[str, Path] | None:
    """The enabled Ithaca plugin's id and the settings file that enables it, or None."""
    found: tuple[str, Path] | None = None
    for path in settings_files(project_root):
        try:
            plugins = json.loads(path.read_text(encoding="utf-8")).get("enabledPlugins")
        except (OSError, ValueError, AttributeError):
            continue
        if not isinstance(plugins, dict):
            continue
        for plugin_id, enabled in plugins.items():
            if isinstance(plugin_id, str) and plugin_id.split("@")[0] == PLUGIN_NAME:
                found = (plugin_id, path) if enabled is True else None
    return found
