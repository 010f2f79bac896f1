"""Codex's trust in a project's hooks: which entries of the user's Codex config make
Ithaca's hooks run, and whether they are there.

Codex (0.169, checked with the binary) runs a hook from a project's ``.codex/hooks.json``
only when the user's own config (``$CODEX_HOME/config.toml``, never the project's) trusts
the project (``[projects."<root>"] trust_level = "trusted"``) and holds the hook's current
hash (``[hooks.state."<key>"] trusted_hash``). A project cannot grant that itself; the
user running ``ithaca install codex`` in their terminal is the consent, so the install
records both and shows what it wrote, and ``ithaca install --doctor codex`` checks them.

The key is ``<hooks.json path>:<event>:<group index>:<handler index>``; the hash is
SHA-256 over the compact, key-sorted JSON of the hook's identity: the snake_case event, the
group's matcher (not for UserPromptSubmit and Stop) and the one normalised handler.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

EVENT_LABELS = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
_NO_MATCHER = frozenset({"UserPromptSubmit", "Stop"})
DEFAULT_TIMEOUT_S = 600


def codex_home() -> Path:
    """The user's Codex folder: ``$CODEX_HOME``, else ``~/.codex``."""
    chosen = os.environ.get("CODEX_HOME")
    return Path(chosen) if chosen else Path.home() / ".codex"


def hook_hash(event: str, group: dict[str, Any], handler: dict[str, Any]) -> str:
    """The ``trusted_hash`` Codex expects for one command hook."""
    timeout = handler.get("timeout")
    normalised: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(int(timeout if timeout is not None else DEFAULT_TIMEOUT_S), 1),
        "async": bool(handler.get("async", False)),
    }
    if handler.get("statusMessage") is not None:
        normalised["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": EVENT_LABELS[event], "hooks": [normalised]}
    if event not in _NO_MATCHER and group.get("matcher") is not None:
        identity["matcher"] = group["matcher"]
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def trust_entries(hooks_path: Path, settings: dict[str, Any], commands: set[str]) -> dict[str, str]:
    """``{key: trusted_hash}`` for each hook in ``settings`` that runs one of ``commands``."""
    found: dict[str, str] = {}
    hooks = settings.get("hooks") if isinstance(settings, dict) else None
    for event, groups in (hooks or {}).items():
        if event not in EVENT_LABELS or not isinstance(groups, list):
            continue
        for group_index, group in enumerate(groups):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler_index, handler in enumerate(handlers or []):
                if isinstance(handler, dict) and handler.get("command") in commands:
                    key = f"{hooks_path}:{EVENT_LABELS[event]}:{group_index}:{handler_index}"
                    found[key] = hook_hash(event, group, handler)
    return found


def missing_trust(
    user_config: dict[str, Any], project_root: Path, expected: dict[str, str]
) -> list[str]:
    """What the user's Codex config lacks for Ithaca's hooks to run, in words."""
    problems = []
    projects = user_config.get("projects")
    project = projects.get(str(project_root)) if isinstance(projects, dict) else None
    if not (isinstance(project, dict) and project.get("trust_level") == "trusted"):
        problems.append(f"Codex does not trust the project {project_root}")
    hooks = user_config.get("hooks")
    states = hooks.get("state") if isinstance(hooks, dict) else None
    for key, digest in expected.items():
        state = states.get(key) if isinstance(states, dict) else None
        if not isinstance(state, dict) or state.get("trusted_hash") != digest:
            problems.append(f"Codex does not trust the hook {key.rsplit(':', 3)[1]}")
        elif state.get("enabled") is False:
            problems.append(f"the hook {key.rsplit(':', 3)[1]} is disabled in Codex")
    return problems
