"""Named state predicates that protocol constraints can require.

Each name maps to a hook-side function ``(conn, scope) -> bool`` defined by the part that
owns the state and declared in its manifest, imported only when a constraint asks for it.
A predicate that cannot be imported or raises counts as unmet: a rule that depends on
state nobody can confirm must not pass.
"""

from __future__ import annotations

from ithaca import mapping, resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

STATES: dict[str, str] = mapping("STATES")

KNOWN_STATES = frozenset(STATES)


def evaluate(name: str, conn: sqlite3.Connection | None, scope: str | None) -> bool:
    """The predicate's value; raises when it is unknown, unavailable or fails."""
    return bool(resolve(STATES[name])(conn, scope))
