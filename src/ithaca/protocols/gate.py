"""The protocols part inside host hooks: admission on UserPromptSubmit, enforcement on
PreToolUse.

UserPromptSubmit is the secure gateway: the user's prompt becomes a trusted event and
the agent is told its id. ``decide`` resolves the event without writing; ``commit``
inserts it in the dispatcher's write transaction unless another gate blocked the prompt.
Enforcement lives in ``enforcement`` and is imported only for tool calls, and admission
(``events``) only for prompts, so neither event pays for the other's code.
"""

from __future__ import annotations

from ithaca.kernel.errors import InvalidInput, IthacaError
from ithaca.kernel.gates import ABSTAIN, FAILED_CLOSED, VIA_PLUGIN, GateContext, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.kernel.call import Call

EVENTS = ("UserPromptSubmit", "PreToolUse")
NAME = "protocols"


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.project is None:
        return ABSTAIN
    if ctx.event == "UserPromptSubmit":
        return _decide_admission(ctx)
    if ctx.event == "PreToolUse" and call is not None:
        from ithaca.protocols import enforcement

        return enforcement.decide(call, ctx)
    return ABSTAIN


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None:
    scratch = ctx.scratch.get(NAME)
    if scratch is None or ctx.conn is None:
        return None
    if ctx.event == "UserPromptSubmit":
        if final.effect not in ("block", "deny"):
            from ithaca.protocols import events

            events.admit(ctx.conn, scratch, actor="hook")
            prompt = ctx.payload.get("prompt")
            if ctx.config["protocols"]["store_prompts"] and isinstance(prompt, str):
                assert ctx.project is not None
                events.store_prompt(ctx.project.blobs_dir, prompt)
        return None
    from ithaca.protocols import enforcement

    return enforcement.commit(ctx.conn, scratch, final, ctx)


# Both hosts defer MCP tools behind a tool search; each names its own way to load one
# (Claude Code names a plugin's tools after the plugin).
TOOL_SEARCH_HINTS = {
    "claude": " If load_protocols is not among your tools yet, load it with ToolSearch"
    ' {"query": "select:mcp__ithaca__load_protocols"}.',
    "claude-plugin": " If load_protocols is not among your tools yet, load it with ToolSearch"
    ' {"query": "select:mcp__plugin_ithaca_ithaca__load_protocols"}.',
    "codex": " If load_protocols is not among your tools yet, call tool_search with"
    ' {"query": "ithaca load_protocols"}: it is in the mcp__ithaca namespace.',
}


def admission_context(event_id: str, workflow: str, strict: bool, host: str = "") -> str:
    """The exact text the agent receives with an admitted prompt (docs/protocols.md, "How a
    turn works"), with how ``host`` reaches a deferred ``load_protocols``."""
    text = (
        f"Ithaca admitted this prompt as event {event_id} (workflow: {workflow}). "
        f'Before any other tool call, call load_protocols with {{"eventId": "{event_id}"}} '
        "and follow every rule in the returned bundle."
    )
    if strict:
        text += " Until then Ithaca blocks mutating tool calls."
    return text + TOOL_SEARCH_HINTS.get(host, "")


# --- admission --------------------------------------------------------------------


def _decide_admission(ctx: GateContext) -> Opinion:
    from ithaca.protocols import events

    try:
        if ctx.conn is None:
            raise IthacaError("STATE_UNREADABLE", "state.db is missing; run `ithaca init`")
        if not ctx.schema_current:
            raise IthacaError(
                "STATE_NEEDS_MIGRATION",
                "the state database is older than this Ithaca; run `ithaca doctor --repair`",
            )
        if ctx.prompt_error is not None:
            raise ctx.prompt_error
        if not ctx.session_id:
            raise IthacaError("INVALID_EVENT", "the host sent no session_id")
        assert ctx.prompt is not None
        prompt_text = ctx.payload.get("prompt")
        admission = events.prepare(
            conn=ctx.conn,
            config=ctx.config,
            connector=events.HOST_CONNECTORS.get(ctx.host, "unknown"),
            session_id=ctx.session_id,
            turn_id=_turn_id(ctx.payload),
            prompt_text=prompt_text if isinstance(prompt_text, str) else "",
            prompt=ctx.prompt,
        )
    except IthacaError as exc:
        return Opinion(
            "block",
            exc.code,
            f"Ithaca could not admit this prompt ({exc.code}): {exc.message}",
            gate="" if isinstance(exc, InvalidInput) else FAILED_CLOSED,  # the prompt's fault
        )
    ctx.scratch[NAME] = admission
    event = admission.event
    return Opinion(
        "allow",
        context=admission_context(
            event["id"],
            event["context"]["workflow"],
            ctx.config["protocols"]["strict"],
            f"{ctx.host}-plugin" if ctx.scratch.get(VIA_PLUGIN) else ctx.host,
        ),
    )


def _turn_id(payload: dict[str, Any]) -> str | None:
    for key in ("turn_id", "prompt_id"):
        value = payload.get(key)
        if isinstance(value, str) and value:
            return value
    return None
