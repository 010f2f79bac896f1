"""What every ultragoal operation shares: who calls, about which session, and how it writes.

An operation runs with a ``Context``: the project, the caller's authority (``agent``,
``user``, ``hook`` or ``system``), the folder relative evidence paths start from, and the
resolved session. ``Context.write`` is the one write path: one ``BEGIN IMMEDIATE``
transaction that loads the session's row — seeding a pristine one when there is none,
unless the session was adopted away — applies the operation, which ends with exactly one
``Context.commit`` per transition, and syncs the pursuing marker after the commit. A
refusal raised anywhere inside rolls everything back, the seed included.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from ithaca.kernel import clock
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.ultragoal import evidence, marker, records, sessions

Row = dict[str, Any]
T = TypeVar("T")
CONTROL_CHARACTERS = {code: " " for code in (*range(0, 32), 127)}

PHASE_WORDS = {
    "PHASE_NOT_PLANNING": "runs only while planning",
    "PHASE_NOT_PURSUING": "runs only while pursuing",
    "PHASE_PLANNING": "does not run while planning",
}


class Context:
    """One call: the project, the caller, the session and the clock reading."""

    def __init__(
        self,
        *,
        project: Project,
        store: Store,
        config: dict[str, Any],
        actor: str,
        base_dir: str,
        env: Mapping[str, str],
        operation: str,
        inputs: dict[str, Any],
    ):
        self.project = project
        self.store = store
        self.config = config
        self.settings: dict[str, Any] = config["ultragoal"]
        self.actor = actor
        self.env = env
        self.operation = operation
        self.inputs = inputs
        self.now = clock.now()
        self.roots = evidence.Roots(project.root, project.runtime, base_dir)
        self.blobs = BlobStore(project.blobs_dir)
        self.session_id = ""
        self.seeded = False
        self.commits = 0

    def resolve_session(self, explicit: str | None) -> str:
        self.session_id = sessions.resolve(self.store.connection(), explicit, self.env, self.now)
        return self.session_id

    def write(self, apply: Callable[[sqlite3.Connection, Row], T]) -> T:
        """Run ``apply(tx, row)`` in one transaction on the session's (seeded) row."""
        self.seeded = False
        self.commits = 0
        with self.store.write() as tx:
            row = self.row_for_write(tx)
            phase_before = row["phase"]
            result = apply(tx, row)
            if self.seeded and not self.commits:
                records.delete(tx, self.session_id)  # nothing happened: no seed either
        self.sync_marker(phase_before, row["phase"])
        return result

    def row_for_write(self, tx: sqlite3.Connection) -> Row:
        row = records.load(tx, self.session_id)
        if row is not None:
            return row
        check_not_adopted(tx, self.session_id)
        row = records.pristine(self.session_id, self.now, self.settings["max_iterations_default"])
        records.save(tx, row)
        self.seeded = True
        return row

    def commit(
        self, tx: sqlite3.Connection, row: Row, kind: str, payload: dict[str, Any] | None = None
    ) -> int:
        """Append one transition's event (with the caller's inputs) and save the row."""
        body = {"inputs": self.inputs, **(payload or {})}
        if self.seeded and not self.commits:
            body["seeded"] = True
        if self.actor != "user" and self.operation in RELAYED_OPERATIONS:
            body["relayed"] = True
        self.commits += 1
        return records.commit(tx, row, actor=self.actor, kind=kind, payload=body, now=self.now)

    def sync_marker(self, before: str, after: str) -> None:
        if (before == "pursuing") != (after == "pursuing"):
            marker.sync(self.project.runtime, self.session_id, after == "pursuing")

    def read(self) -> sqlite3.Connection:
        return self.store.connection()


# Operations an agent performs on the user's behalf: journaled ``relayed`` unless the user
# ran them at a terminal.
RELAYED_OPERATIONS = frozenset({"confirm_story", "confirm_all_stories", "adopt"})


def check_not_adopted(conn: sqlite3.Connection, session_id: str) -> None:
    """Refuse to seed a session whose pursuit another session adopted."""
    adopted_by = records.adopted_into(conn, session_id)
    if adopted_by is not None:
        raise Refused(
            "SESSION_ADOPTED_AWAY",
            f"session {session_id}'s pursuit was adopted by session {adopted_by}",
            {"session_id": session_id, "adopted_by": adopted_by},
        )


def require_phase(row: Row, allowed: frozenset[str] | set[str], code: str) -> None:
    """Refuse outside ``allowed``: complete and paused pursuits have their own codes."""
    phase = row["phase"]
    if phase in allowed:
        return
    if phase == "complete":
        raise Refused(
            "PURSUIT_COMPLETE",
            "the pursuit is complete; start a new one with set --phase planning",
            {"phase": phase},
        )
    if phase in records.PAUSED_PHASES:
        raise Refused(
            "PURSUIT_PAUSED",
            f"the pursuit is {phase}; only the user can resume it",
            {"phase": phase},
        )
    raise Refused(
        code,
        f"this operation {PHASE_WORDS.get(code, 'runs in another phase')}, and the pursuit is"
        f" {phase}",
        {"phase": phase},
    )


def require_user(ctx: Context, action: str) -> None:
    """Refuse an operation that is the user's unless the user runs it at a terminal."""
    if ctx.actor != "user":
        raise Refused(
            "AUTHORITY_USER_ONLY",
            f"only the user may {action}: present `ithaca ultragoal "
            f"{ctx.operation.replace('_', '-')}` for them to run in their own terminal",
            {"operation": ctx.operation},
        )


def clean_text(text: str) -> str:
    """Control characters (newlines included) become spaces."""
    return text.translate(CONTROL_CHARACTERS)


def story_by_id(stories: list[Row], story_id: str) -> Row:
    for story in stories:
        if story["id"] == story_id:
            return story
    raise Refused("STORY_UNKNOWN", f"no story {story_id!r}", {"id": story_id})


def not_retired(story: Row) -> None:
    if story["status"] == "retired":
        raise Refused("STORY_RETIRED", f"story {story['id']} is retired", {"id": story["id"]})
