"""Ithaca as a Claude Code plugin, and this repository as the marketplace that holds it.

A plugin is the way Claude Code users add a tool like Ithaca (``/plugin marketplace add``,
``/plugin install ithaca@ithaca``). It carries what ``ithaca install claude`` writes into a
project, for every project at once: the hooks of the same events with the same timeouts,
the MCP server, the skills and the reviewer agent. Every file of it is made here from the
installer's own records, and committed under ``plugins/ithaca/`` with the marketplace file
``.claude-plugin/marketplace.json``; ``tests/hosts/claude/test_plugin.py`` fails when the
committed files differ from these (``python -m ithaca.hosts.claude.plugin`` rewrites them).

The plugin calls the ``ithaca`` on ``PATH``, as committed wiring does: each hook runs one
script by the plugin-root variable, which blocks with the fix (exit 2) on a machine
without Ithaca. Where a project has ``.ithaca/`` the hooks govern it; elsewhere they
abstain. In a project that also has ``ithaca install claude``, the plugin's hooks and MCP
server step aside (``--plugin``), so one hook decides each event and the agent sees each
tool once; the install, which adds the sandbox profile and the deny rules a plugin cannot
set, is the stronger of the two.
"""

from __future__ import annotations

import json
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

from ithaca import __version__
from ithaca.hosts.claude import PLUGIN_TOOL_PREFIX
from ithaca.hosts.claude.installer import AGENTS, CLAUDE_EVENTS, HOST, SKILLS
from ithaca.hosts.install.hooks import (
    HOOK_PROGRAM,
    TIMEOUT_FLAG,
    not_installed,
    unless_installed,
)

NAME = "ithaca"  # the plugin's and the marketplace's: ``ithaca@ithaca``
PLUGIN_ID = f"{NAME}@{NAME}"
PLUGIN_RELPATH = f"plugins/{NAME}"
MARKETPLACE_RELPATH = ".claude-plugin/marketplace.json"
HOOK_SCRIPT = "hooks/ithaca-hook.sh"
DESCRIPTION = (
    "Ithaca holds an agent's commitments outside its context: the protocols that bind each "
    "turn, the validators that judge its steps, the stories of its objective and the "
    "checkpoints of a delivery, enforced by hooks when the agent acts."
)
AUTHOR = {"name": "Ithaca developers"}
REVIEWER_IN_PLUGIN = f"{NAME}:code-reviewer"  # Claude Code names a plugin's agents so
# Where the marketplace is published (pyproject's Homepage too).
REPOSITORY = "ithaca-agents/ithaca"
HOMEPAGE = f"https://github.com/{REPOSITORY}"


def plugin_files() -> dict[str, bytes]:
    """Every file of the marketplace and its plugin, by path from the repository root."""
    plugin = {
        ".claude-plugin/plugin.json": _json(_manifest()),
        "hooks/hooks.json": _json(_hooks()),
        HOOK_SCRIPT: _hook_script().encode("utf-8"),
        ".mcp.json": _json(
            {"mcpServers": {NAME: {"command": "ithaca", "args": ["mcp", "--plugin"]}}}
        ),
        "README.md": README.encode("utf-8"),
        **{f"skills/{name}/SKILL.md": _skill(name) for name in SKILLS},
        **{f"agents/{name}.md": agent_bytes(name) for name in AGENTS},
    }
    return {
        MARKETPLACE_RELPATH: _json(_marketplace()),
        **{f"{PLUGIN_RELPATH}/{relpath}": data for relpath, data in plugin.items()},
    }


def stale(root: Path) -> list[str]:
    """The plugin files under ``root`` that differ from what this module makes."""
    return list(_differing(root, plugin_files()))


def write(root: Path) -> list[str]:
    """Write the marketplace and the plugin under ``root``; the paths that changed."""
    changed = _differing(root, plugin_files())
    for relpath, data in changed.items():
        target = root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return list(changed)


def _differing(root: Path, made: dict[str, bytes]) -> dict[str, bytes]:
    return {
        relpath: data
        for relpath, data in made.items()
        if not (root / relpath).is_file() or (root / relpath).read_bytes() != data
    }


def _marketplace() -> dict[str, Any]:
    return {
        "name": NAME,
        "description": "The Ithaca governance kernel for Claude Code.",
        "owner": AUTHOR,
        "plugins": [
            {
                "name": NAME,
                "source": f"./{PLUGIN_RELPATH}",
                "description": DESCRIPTION,
                "version": __version__,
            }
        ],
    }


def _manifest() -> dict[str, Any]:
    return {
        "name": NAME,
        "version": __version__,
        "description": DESCRIPTION,
        "author": AUTHOR,
        "license": "MIT",
        "keywords": ["governance", "hooks", "protocols", "validators", "delivery"],
        "homepage": HOMEPAGE,
        "repository": HOMEPAGE,
        "network": {"hosts": []},  # every part works on the machine alone
    }


def _hooks() -> dict[str, Any]:
    """hooks.json: each of the install's events, by the plugin-root variable, with the
    timeout Claude Code gives the hook."""
    events: dict[str, Any] = {}
    for spec in CLAUDE_EVENTS:
        hook = {
            "type": "command",
            "command": (
                f'sh "${{CLAUDE_PLUGIN_ROOT}}/{HOOK_SCRIPT}" {spec.event}'
                f" {TIMEOUT_FLAG} {spec.timeout}"
            ),
            "timeout": spec.timeout,
        }
        group: dict[str, Any] = {"hooks": [hook]}
        if spec.matcher is not None:
            group = {"matcher": spec.matcher, **group}
        events[spec.event] = [group]
    return {"description": "Ithaca's hooks: each event goes to ithaca-hook.", "hooks": events}


def _hook_script() -> str:
    missing = not_installed("and start Claude Code again: the Ithaca plugin runs it from PATH")
    return (
        "#!/bin/sh\n"
        "# Every hook event of the Ithaca plugin runs this (hooks.json): Ithaca's hook from\n"
        "# PATH, or, on a machine without Ithaca, a block (exit 2) that names the fix.\n"
        "# Its arguments: the event, and --timeout with the seconds Claude Code waits for it.\n"
        f"{unless_installed(missing)}\n"
        f'exec {HOOK_PROGRAM} {HOST} "$@" --plugin\n'
    )


def _skill(name: str) -> bytes:
    """A shipped skill, naming the reviewer agent as the plugin makes it known."""
    text = _shipped(name, "SKILL.md").decode("utf-8")
    claude = 'subagent_type: "code-reviewer"'
    return text.replace(claude, f'subagent_type: "{REVIEWER_IN_PLUGIN}"').encode("utf-8")


def agent_bytes(name: str) -> bytes:
    """A shipped agent as the plugin carries it, its tools named as Claude Code names the
    plugin's (the Ultragoal hook checks the plugin's reviewer against it)."""
    text = _shipped("agents", f"{name}.md").decode("utf-8")
    return text.replace("mcp__ithaca__", PLUGIN_TOOL_PREFIX).encode("utf-8")


def _shipped(*resource: str) -> bytes:
    return files("ithaca.skills").joinpath(*resource).read_bytes()


def _json(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


README = f"""\
# Ithaca for Claude Code

{DESCRIPTION}

This plugin wires Ithaca into every project you open in Claude Code: the hooks of
`ithaca install claude` (they govern a project once `ithaca init` has run in it, and
abstain elsewhere), the `ithaca mcp` server, the Ulysses and Ultragoal skills and the
reviewer agent. It runs the `ithaca` on your PATH, so install Ithaca first:

    uv tool install ithaca        # or: pipx install ithaca

then, in Claude Code:

    /plugin install {NAME} --marketplace {REPOSITORY}

(or `/plugin marketplace add {REPOSITORY}` and `/plugin install {PLUGIN_ID}`). On a
machine without Ithaca every hook blocks with the fix.

The plugin cannot set Claude Code's sandbox or deny rules for a project. For the
sandboxed profile, run `ithaca install claude` in the project instead; where both are
present, the plugin's hooks and server step aside for the install's.
"""


def main() -> int:
    """``python -m ithaca.hosts.claude.plugin [ROOT]``: rewrite the plugin files."""
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    for relpath in write(root):
        print(f"wrote {relpath}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
