"""Codex's hook JSON: what arrives on stdin and what each event may answer.

Codex sends ``session_id`` (its thread id, the same value it puts in ``CODEX_THREAD_ID``
for the agent's shell), ``turn_id``, ``cwd``, ``hook_event_name`` and per-event fields
(``prompt``; ``tool_name`` and ``tool_input``; ``stop_hook_active`` and
``last_assistant_message``). Its shell tools arrive as ``Bash`` with a ``command`` string,
``apply_patch`` with the patch text in ``command``, and MCP tools as
``mcp__<server>__<tool>``; the older shapes (``exec_command`` with ``cmd``, ``shell`` with
an argv list) classify the same way (``kernel.classify``).

Codex reads fewer answers than Claude Code, and treats an answer it does not accept as a
failed hook, which lets the call run. So this adapter only ever sends what Codex accepts:

- PreToolUse: a deny is ``permissionDecision: "deny"`` with its reason. Codex has no
  confirmation prompt (it rejects ``ask``), so an ask is sent as a deny that says so (the
  protocols gate already turns its asks into approval requests on hosts that cannot ask).
  An allow is silence, except when a gate rewrote the input (the session filled into
  Ithaca's own MCP calls): then ``allow`` with ``updatedInput``, which Codex applies since
  it accepts PreToolUse rewrites. Sending it is never worse than holding it back: an older
  Codex reports the hook failed and runs the call unchanged, as a plain allow would, and a
  call naming another session is denied by the guard either way (``SESSION_MISMATCH``), so
  what degrades is only that a call leaving ``session`` out is resolved by the MCP server
  (``ITHACA_SESSION_ID``, else the single live session) instead of bound to its caller.
- UserPromptSubmit, PostToolUse and Stop block with ``{"decision": "block", "reason": …}``;
  an allowed Stop prints ``{}``.
- SessionStart, UserPromptSubmit and PostToolUse carry ``additionalContext``; every event
  may carry ``systemMessage``.

SessionStart exports ``ITHACA_SESSION_ID`` through ``CODEX_ENV_FILE``, which Codex sources
before the agent's later shell commands; a Codex without it sets no such variable, and the
export is skipped.

This package is Codex's adapter on the hook path (the dispatcher imports it for every call,
so it holds the adapter itself rather than naming a module of it); its hook trust is
``trust`` and the installer ``installer``.
"""

from __future__ import annotations

import os

from ithaca.hosts import BLOCK_LEAD, refusal_text
from ithaca.hosts.claude import tool_call as tool_call  # Codex names them alike
from ithaca.kernel import Opinion, lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

HOST = "codex"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PreCompact", "Stop")
SESSION_ENV_FILE = "CODEX_ENV_FILE"
# The events whose hook can stop what comes next: exit 2 blocks each (docs/hooks.md).
BLOCKING_EVENTS = ("UserPromptSubmit", "PreToolUse", "Stop")
# How long Codex waits for each event's hook, in seconds: the install sets it, and a hook
# run without ``--timeout`` assumes it (docs/hooks.md "Host timeouts"). Stop's is long: the
# end-of-turn critic may run the project's tests itself (``critic_run``).
TIMEOUTS = {
    "SessionStart": 10,
    "UserPromptSubmit": 10,
    "PreToolUse": 5,
    "PostToolUse": 10,
    "PreCompact": 10,
    "Stop": 90,
}
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit", "PostToolUse")
ASK_NOTE = "(Codex cannot ask the user to confirm a call, so Ithaca denies it.)"
# The project file ``ithaca install codex`` wires its hooks into.
PROJECT_HOOKS = (".codex", "hooks.json")


def normalised(payload: dict[str, Any], server_name: str) -> dict[str, Any]:
    """Codex names Ithaca's tools one way only."""
    return payload


def wired_by_install(project_root: str, event: str) -> bool:
    """Ithaca ships no Codex plugin, so no hook of one has to step aside."""
    return False


def runs_ithaca(project_root: str) -> str | None:
    """The project's hooks file when it runs Ithaca's hook (``ithaca install codex`` wired
    it there), else None: a sign that Ithaca was set up in the project even once its state
    folder is gone."""
    try:
        with open(os.path.join(project_root, *PROJECT_HOOKS), encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, ValueError):  # ValueError: not UTF-8
        return None
    return "/".join(PROJECT_HOOKS) if f"ithaca-hook {HOST} " in text else None


def render(event: str, final: Opinion) -> tuple[str, int]:
    """The stdout text and exit code for Codex."""
    answer: dict[str, Any] = {}
    blocked = final.effect in ("deny", "block")
    if event == "PreToolUse":
        if blocked or final.effect == "ask":
            reason = refusal_text(final)
            answer["hookSpecificOutput"] = {
                "hookEventName": event,
                "permissionDecision": "deny",
                "permissionDecisionReason": reason if blocked else f"{reason}\n{ASK_NOTE}",
            }
        elif final.updated_input is not None:
            answer["hookSpecificOutput"] = {
                "hookEventName": event,
                "permissionDecision": "allow",
                "updatedInput": final.updated_input,
            }
    elif event in ("UserPromptSubmit", "Stop", "PostToolUse") and blocked:
        answer = {"decision": "block", "reason": refusal_text(final, BLOCK_LEAD)}
    if final.context and event in CONTEXT_EVENTS and not (blocked and event == "UserPromptSubmit"):
        answer.setdefault("hookSpecificOutput", {"hookEventName": event})
        answer["hookSpecificOutput"]["additionalContext"] = final.context
    if final.system_message:
        answer["systemMessage"] = final.system_message
    if answer or event == "Stop":
        return lightjson.dumps(answer), 0
    return "", 0
