"""Claude Code's hook JSON: what arrives on stdin and what each event may answer.

Claude Code sends ``session_id``, ``cwd``, ``hook_event_name`` and per-event fields
(``prompt``; ``command_name`` and ``command_args`` when a slash command expands;
``tool_name`` and ``tool_input``; ``agent_id`` inside subagents). An allow
is answered with silence so that the user's own permission rules still apply; deny and
ask go in ``hookSpecificOutput.permissionDecision``; a blocked prompt or Stop uses
``{"decision": "block", "reason": …}``.

Installed as the Ithaca plugin, Claude Code names Ithaca's MCP tools after the plugin
(``mcp__plugin_ithaca_ithaca__<tool>``); ``normalised`` gives them the name an install
gives them, so every gate knows them either way. The plugin's hooks step aside for an
event the project's own settings already hand to Ithaca (``wired_by_install``): an
``ithaca install claude`` there is the stronger profile, and one hook per event decides.

This package is Claude Code's adapter on the hook path (the dispatcher imports it for every
call, so it holds the adapter itself rather than naming a module of it); the installer is
``installer``.
"""

from __future__ import annotations

import os

from ithaca.hosts import ASK_LEAD, BLOCK_LEAD, LEAD, refusal_text
from ithaca.kernel import Opinion, lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOST = "claude"
EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "PreToolUse",
    "PostToolUse",
    "PreCompact",
    "Stop",
    "SubagentStop",
    "SessionEnd",
)
PROMPT_EVENTS = ("UserPromptSubmit", "UserPromptExpansion")
# The events whose hook can stop what comes next: exit 2 blocks each (docs/hooks.md).
BLOCKING_EVENTS = (*PROMPT_EVENTS, "PreToolUse", "Stop", "SubagentStop")
# How long Claude Code waits for each event's hook, in seconds: the install sets it, and a
# hook run without ``--timeout`` assumes it (docs/hooks.md "Host timeouts"). Stop's is
# long: the end-of-turn critic may run the project's tests itself (``critic_run``).
TIMEOUTS = {
    "SessionStart": 10,
    "UserPromptSubmit": 10,
    "UserPromptExpansion": 10,
    "PreToolUse": 5,
    "PostToolUse": 10,
    "PreCompact": 10,
    "Stop": 90,
    "SubagentStop": 15,
    "SessionEnd": 10,
}
SESSION_ENV_FILE = "CLAUDE_ENV_FILE"
# How Claude Code prefixes the tools of the ``ithaca`` server of the ``ithaca`` plugin.
PLUGIN_TOOL_PREFIX = "mcp__plugin_ithaca_ithaca__"
# The project settings file ``ithaca install claude`` wires its hooks into.
PROJECT_SETTINGS = (".claude", "settings.json")


def normalised(payload: dict[str, Any], server_name: str) -> dict[str, Any]:
    """``payload`` with a plugin-named Ithaca tool under the name an install gives it."""
    name = payload.get("tool_name")
    if isinstance(name, str) and name.startswith(PLUGIN_TOOL_PREFIX):
        return {**payload, "tool_name": f"mcp__{server_name}__{name[len(PLUGIN_TOOL_PREFIX) :]}"}
    return payload


def wired_by_install(project_root: str, event: str) -> bool:
    """Whether the project's own Claude Code settings run Ithaca's hook for ``event``."""
    return f"ithaca-hook {HOST} {event}" in _settings_text(project_root)


def runs_ithaca(project_root: str) -> str | None:
    """The project's settings file when it hands any event to Ithaca's hook (``ithaca
    install claude`` wired it there), else None: a sign that Ithaca was set up in the
    project even once its state folder is gone."""
    if f"ithaca-hook {HOST} " in _settings_text(project_root):
        return "/".join(PROJECT_SETTINGS)
    return None


def _settings_text(project_root: str) -> str:
    try:
        with open(os.path.join(project_root, *PROJECT_SETTINGS), encoding="utf-8") as handle:
            return handle.read()
    except (OSError, ValueError):  # ValueError: not UTF-8
        return ""


def tool_call(payload: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    name = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    return (name if isinstance(name, str) else ""), (
        tool_input if isinstance(tool_input, dict) else {}
    )


def render(event: str, final: Opinion) -> tuple[str, int]:
    """The stdout text and exit code for Claude Code."""
    answer: dict[str, Any] = {}
    blocked = final.effect in ("deny", "block")
    if event == "PreToolUse":
        if blocked or final.effect == "ask":
            answer["hookSpecificOutput"] = {
                "hookEventName": event,
                "permissionDecision": "deny" if blocked else "ask",
                "permissionDecisionReason": refusal_text(final, LEAD if blocked else ASK_LEAD),
            }
        elif final.updated_input is not None:
            answer["hookSpecificOutput"] = {
                "hookEventName": event,
                "permissionDecision": "allow",
                "updatedInput": final.updated_input,
            }
    elif event in PROMPT_EVENTS + ("Stop", "SubagentStop", "PostToolUse") and blocked:
        answer = {"decision": "block", "reason": refusal_text(final, BLOCK_LEAD)}
    if (
        final.context
        and event in PROMPT_EVENTS + ("SessionStart", "PostToolUse")
        and not (blocked and event in PROMPT_EVENTS)
    ):
        answer.setdefault("hookSpecificOutput", {"hookEventName": event})
        answer["hookSpecificOutput"]["additionalContext"] = final.context
    if final.system_message:
        answer["systemMessage"] = final.system_message
    return (lightjson.dumps(answer) if answer else ""), 0
