"""The gate contract: how a part gives its opinion on a hook call.

A gate module (``ithaca/<part>/gate.py``) exposes ``EVENTS`` (the hook events it cares
about), ``decide(call, ctx) -> Opinion`` — read-only, on the dispatcher's connection —
and optionally ``commit(call, final, ctx)``, which the dispatcher runs for every gate in
one write transaction after it has combined all opinions. Two phases keep a part from
consuming or recording anything on its own "allow" when the final answer is "deny". A
commit that finds the world changed since its decide (a race lost) returns a deny, which
overrules the answer.

The same module keeps what gates and the dispatcher record between calls: a gate's own
state (``gate_state``) and the host sessions seen (``host_sessions``). They are here,
not in modules of their own, because every hook call loads this one anyway.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable
    from typing import Any

    from ithaca.kernel.call import Call
    from ithaca.kernel.markers import Prompt
    from ithaca.kernel.project import Project

# Most severe first: the combined effect is the first one any gate gave.
SEVERITY = ("block", "deny", "ask", "allow", "abstain")
# The gate name of an opinion given because Ithaca itself could not decide (fail closed).
FAILED_CLOSED = "failed-closed"
# ``GateContext.scratch`` key: the state root a call's cwd points at instead of the
# pinned project's (``kernel.project.pinned_project``).
DISPLACED = "displaced_state_root"
# Set when the hook came from a host plugin (``ithaca-hook … --plugin``), not an install.
VIA_PLUGIN = "via_plugin"


class Opinion:
    """One gate's answer: ``effect`` is deny, block, ask, allow or abstain."""

    __slots__ = ("effect", "code", "reason", "context", "updated_input", "system_message", "gate")

    def __init__(
        self,
        effect: str = "abstain",
        code: str | None = None,
        reason: str | None = None,
        context: str | None = None,
        updated_input: dict[str, Any] | None = None,
        system_message: str | None = None,
        gate: str = "",
    ):
        self.effect = effect
        self.code = code
        self.reason = reason
        self.context = context  # text added to the agent's context
        self.updated_input = updated_input
        self.system_message = system_message
        self.gate = gate

    def __repr__(self) -> str:
        return f"Opinion({self.effect!r}, {self.code!r}, {self.reason!r}, gate={self.gate!r})"


ABSTAIN = Opinion()


class GateContext:
    """Everything a gate may read about the current hook call.

    ``scratch`` is where a gate keeps, under its own name, what its commit needs.
    ``classify`` gives the hook call's tool call as PreToolUse classifies it (the
    dispatcher sets it, for a gate that reads a PostToolUse call's commands).
    """

    def __init__(
        self,
        *,
        host: str,
        event: str,
        payload: dict[str, Any],
        project: Project | None,
        config: dict[str, Any],
        conn: sqlite3.Connection | None,
        session_id: str | None,
        prompt: Prompt | None = None,
        prompt_error: Exception | None = None,
        schema_current: bool = True,
        now: str = "",
    ):
        self.host = host
        self.event = event
        self.payload = payload
        self.project = project
        self.config = config
        self.conn = conn
        self.session_id = session_id
        self.prompt = prompt
        self.prompt_error = prompt_error
        self.schema_current = schema_current
        self.now = now
        self.scratch: dict[str, Any] = {}
        self.classify: Callable[[], Call] | None = None


def combine(opinions: list[Opinion]) -> Opinion:
    """The most severe opinion wins; reasons of equally severe opinions are joined."""
    effective = [op for op in opinions if op.effect != "abstain"]
    if not effective:
        return Opinion()
    rank = min(SEVERITY.index(op.effect) for op in effective)
    winners = [op for op in effective if SEVERITY.index(op.effect) == rank]
    first = winners[0]
    contexts = [op.context for op in effective if op.context]
    messages = [op.system_message for op in effective if op.system_message]
    updated = next((op.updated_input for op in effective if op.updated_input), None)
    reasons = [op.reason for op in winners if op.reason]
    return Opinion(
        effect=first.effect,
        code=first.code,
        reason="\n".join(reasons) or None,
        context="\n\n".join(contexts) or None,
        updated_input=updated,
        system_message="\n".join(messages) or None,
        gate=first.gate,
    )


# --- a gate's own state -------------------------------------------------------------------
# Each part keeps what its gate reads on the hook path in the kernel's ``gate_state`` table,
# one JSON row per (part, scope), written in the same transaction as the journal event
# that changed it; these are the only statements that touch that table.


def state_fields(
    conn: sqlite3.Connection, part: str, scope: str | None, fields: tuple[str, ...]
) -> tuple[Any, ...] | None:
    """The named top-level fields of ``part``'s state for ``scope`` (read in SQL, so a
    hook parses no JSON), or None when it keeps none."""
    columns = ", ".join(f"json_extract(state_json, '$.{field}')" for field in fields)
    row = conn.execute(
        f"SELECT {columns} FROM gate_state WHERE part = ? AND scope_key = ?", (part, scope)
    ).fetchone()
    return None if row is None else tuple(row)


def state_text(conn: sqlite3.Connection, part: str, scope: str | None) -> str | None:
    """``part``'s state for ``scope`` as its JSON text, or None when it keeps none."""
    row = conn.execute(
        "SELECT state_json FROM gate_state WHERE part = ? AND scope_key = ?", (part, scope)
    ).fetchone()
    return None if row is None else str(row[0])


def save_state(conn: sqlite3.Connection, part: str, scope: str | None, text: str, seq: int) -> None:
    """Keep ``text`` (JSON) as ``part``'s state for ``scope``, changed by journal ``seq``."""
    conn.execute(
        "INSERT INTO gate_state (part, scope_key, state_json, updated_seq) VALUES (?, ?, ?, ?)"
        " ON CONFLICT (part, scope_key) DO UPDATE SET state_json = excluded.state_json,"
        " updated_seq = excluded.updated_seq",
        (part, scope, text, seq),
    )


def clear_state(conn: sqlite3.Connection, part: str, scope: str) -> None:
    """Forget ``part``'s state for ``scope``."""
    conn.execute("DELETE FROM gate_state WHERE part = ? AND scope_key = ?", (part, scope))


# --- the host sessions the dispatcher has seen --------------------------------------------
# Every hook call touches its session's row inside the dispatcher's write transaction, so
# ``ithaca status`` can tell a host whose hooks stopped running from one that is idle.


def host_sessions_not_ended(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """``(host session id, last seen)`` of every session not ended, most recent first."""
    rows = conn.execute(
        "SELECT host_session_id, last_seen_at FROM host_sessions WHERE ended_at IS NULL"
        " ORDER BY last_seen_at DESC, host_session_id"
    ).fetchall()
    return [(str(session_id), str(seen)) for session_id, seen in rows]


def touch_host_session(
    conn: sqlite3.Connection, host: str, session_id: str, now: str, *, ended: bool = False
) -> None:
    """Record that ``session_id`` of ``host`` called a hook at ``now`` (and ended, if so)."""
    conn.execute(
        "INSERT INTO host_sessions (host, host_session_id, first_seen_at, last_seen_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT(host, host_session_id) DO UPDATE SET"
        " last_seen_at = excluded.last_seen_at",
        (host, session_id, now, now),
    )
    if ended:
        conn.execute(
            "UPDATE host_sessions SET ended_at = ? WHERE host = ? AND host_session_id = ?",
            (now, host, session_id),
        )
