"""Named state predicates that protocol constraints can require.

Each name maps to a hook-side function ``(conn, scope) -> bool`` defined by the part
that owns the state, imported only when a constraint asks for it. A predicate that
cannot be imported or raises counts as unmet: a rule that depends on state nobody can
confirm must not pass.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

STATES: dict[str, str] = {
    "ulysses.active": "ithaca.ulysses.gate:is_active",
    "ulysses.step_active": "ithaca.ulysses.gate:is_step_active",
    "ultragoal.active": "ithaca.ultragoal.gate:is_active",
    "ultragoal.pursuing": "ithaca.ultragoal.gate:is_pursuing",
}

KNOWN_STATES = frozenset(STATES)


def evaluate(name: str, conn: sqlite3.Connection | None, scope: str | None) -> bool:
    """The predicate's value; raises when it is unknown, unavailable or fails."""
    module, _, attribute = STATES[name].partition(":")
    __import__(module)  # importlib.import_module, without importing importlib
    predicate = getattr(sys.modules[module], attribute)
    return bool(predicate(conn, scope))
