"""Which host session an ultragoal call is about (docs/ultragoal.md, the opening paragraphs).

A pursuit belongs to one host session, and an agent rarely knows its own session id, so
the id is resolved in a fixed order: the explicit ``--session``/``session`` value, then
``ITHACA_SESSION_ID`` (which SessionStart writes into the host's environment file), then
the kernel's host-session registry: the single live session, or among several the one
``CODEX_THREAD_ID`` names. Anything else is ``SESSION_AMBIGUOUS`` with the candidates, so
a call never lands on a guessed session.
"""

from __future__ import annotations

from ithaca.kernel import gates, ids
from ithaca.kernel.errors import InvalidInput, Refused
from ithaca.ultragoal.ttl import LIVE_TTL_S, elapsed_s

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping


def check_id(value: object, pointer: str = "/session") -> str:
    """``value`` when it matches ``^[A-Za-z0-9_-]{1,200}$``, else ``SESSION_ID_INVALID``."""
    if not ids.is_session_id(value):
        raise InvalidInput(
            "SESSION_ID_INVALID",
            "a session id is 1 to 200 letters, digits, '_' or '-'",
            {"pointer": pointer, "value": value if isinstance(value, str) else None},
        )
    assert isinstance(value, str)
    return value


def live_sessions(conn: sqlite3.Connection, now: str) -> list[str]:
    """Host sessions seen within 6 h and not ended, most recently seen first."""
    seen: list[str] = []
    for session_id, last_seen in gates.host_sessions_not_ended(conn):
        if elapsed_s(last_seen, now) <= LIVE_TTL_S and session_id not in seen:
            seen.append(str(session_id))
    return seen


def resolve(
    conn: sqlite3.Connection, explicit: str | None, env: Mapping[str, str], now: str
) -> str:
    """The session a call names, in the reference's order of precedence."""
    if explicit is not None:
        return check_id(explicit)
    from_env = env.get("ITHACA_SESSION_ID")
    if from_env:
        return check_id(from_env, "ITHACA_SESSION_ID")
    candidates = live_sessions(conn, now)
    if len(candidates) == 1:
        return candidates[0]
    thread = env.get("CODEX_THREAD_ID")
    if thread and thread in candidates:
        return thread
    raise Refused(
        "SESSION_AMBIGUOUS",
        "cannot tell which session this is: pass --session (or set ITHACA_SESSION_ID)",
        {"candidates": candidates},
    )
