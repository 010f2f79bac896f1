"""Write allowances belong to someone: which of them count for one hook call.

A part may let an agent write a path the kernel guard would deny (under ``.ithaca/``)
for a while, by a row of ``write_allowances`` owned by ``<part>:<holder>`` (delivery's
are ``delivery:<execution session id>``: its worktree and its output). An allowance is
its holder's, not every host session's: it counts only for a hook call that its holder
acts for, so one host session cannot write into another one's places.

Only the owning part knows what a holder is and when it acts, and the kernel imports no
part. So a part that grants allowances registers, from its gate module, a function that
names the holders acting for a call (``register``); the guard asks through ``counted``.
The dispatcher imports every gate of an event before it asks any of them for an
opinion, so the registration is in place whenever the guard reads the table. A row whose
part registered nothing, or whose owner is not ``<part>:<holder>``, counts for no call:
without the owner's word, the guard denies as if there were no allowance.

Hook path: standard library and light kernel modules only.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable

    from ithaca.kernel.gates import GateContext

    Acting = Callable[[GateContext], list[str]]

_ACTING: dict[str, Acting] = {}
# ``GateContext.scratch`` key: the holders each part named for this call.
_SCRATCH = "allowances.acting"


def register(part: str, acting: Acting) -> None:
    """Let ``acting(ctx)`` name the holders of ``part`` that act for a hook call."""
    _ACTING[part] = acting


def owner(part: str, holder: str) -> str:
    return f"{part}:{holder}"


def grant(conn: sqlite3.Connection, held_by: str, paths: list[str], at: str) -> None:
    """Allow ``held_by`` (``<part>:<holder>``) to write ``paths``, in the caller's
    transaction."""
    for path in paths:
        conn.execute(
            "INSERT OR IGNORE INTO write_allowances (path, owner, created_at) VALUES (?, ?, ?)",
            (path, held_by, at),
        )


def revoke(conn: sqlite3.Connection, held_by: str) -> None:
    """Take back every allowance ``held_by`` holds."""
    conn.execute("DELETE FROM write_allowances WHERE owner = ?", (held_by,))


def acting_owners(ctx: GateContext, part: str) -> list[str]:
    """The owners of ``part``'s allowances that act for this call (asked once a call)."""
    asked: dict[str, list[str]] = ctx.scratch.setdefault(_SCRATCH, {})
    if part not in asked:
        acting = _ACTING.get(part)
        asked[part] = [] if acting is None else [owner(part, h) for h in acting(ctx)]
    return asked[part]


def counted(ctx: GateContext) -> list[str]:
    """The allowed paths, absolute, that count for this call: those whose owner's part
    names the owner among the holders acting for it."""
    if ctx.conn is None or ctx.project is None:
        return []
    rows = ctx.conn.execute("SELECT path, owner FROM write_allowances ORDER BY path").fetchall()
    paths = []
    for path, held_by in rows:
        part, colon, _ = held_by.partition(":")
        if colon and held_by in acting_owners(ctx, part):
            paths.append(os.path.normpath(os.path.join(ctx.project.root, path)))
    return paths
