"""The plans that move a checkpoint: a draft saved, abandoned, kept or accepted.

Each plan's commit runs in a unit's T2 and first checks that the rows it replaces are
still the ones it was prepared on (``Stale`` otherwise, so the request is prepared
again). Acceptance supersedes the previous accepted revision and accepts the new one in
the same transaction; a plan's files (``plan.json``, ``plan.md``) ride in its writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.checkpoints import rows
from ithaca.delivery.checkpoints.rows import Row
from ithaca.delivery.checkpoints.scope import Scope
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.run_plan import waves
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite
from ithaca.kernel import clock, journal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


@dataclass
class Draft:
    """A checkpoint as this request would leave it, before acceptance."""

    stage: str
    scope: Scope
    payload: dict[str, Any]
    evidence: list[dict[str, Any]]
    diagnostics: list[Diagnostic]

    def row(self, **accepted: Any) -> Row:
        """The row this draft makes, its digest and id filled in (``accepted`` overrides)."""
        row: Row = {
            "stage": self.stage,
            "scope_type": self.scope.type,
            "scope_id": self.scope.id,
            "revision": None,
            "status": "draft",
            "payload": self.payload,
            "evidence": self.evidence,
            "diagnostics": self.diagnostics,
            "envelope_digest": None,
            "supersedes_id": None,
            **accepted,
        }
        row["digest"] = rows.row_digest(row)
        row["id"] = f"cp-{row['digest'][:16]}"
        return row


def save_draft(draft: Draft, current: Row | None, writes: list[TrackedWrite], op: str) -> Plan:
    """Create or replace the draft; ``accepted: false`` tells an accept that it was kept."""
    row = draft.row()
    if current is not None and current["digest"] == row["digest"]:
        result = {"accepted": False, "checkpoint": rows.view(current), "unchanged": True}
        return Plan(op, lambda tx: Outcome(result, None), tuple(writes), draft.diagnostics)

    def commit(tx: sqlite3.Connection) -> Outcome:
        rows.require_current(tx, row, "draft", current)
        rows.write(tx, row, None if current is None else current["id"])
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.checkpoint_drafted",
            subject=row["id"],
            payload={**_event_payload(row), "replaces": None if current is None else current["id"]},
        )
        return Outcome({"accepted": False, "checkpoint": rows.view(row)}, seq)

    return Plan(op, commit, tuple(writes), draft.diagnostics)


def abandon(current: Row) -> Plan:
    """Drop the draft ``current``."""

    def commit(tx: sqlite3.Connection) -> Outcome:
        rows.drop_draft(tx, current, "abandoned by request")
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.checkpoint_abandoned",
            subject=current["id"],
            payload={**_event_payload(current), "reason": "abandoned by request"},
        )
        return Outcome({"checkpoint": rows.view({**current, "status": "abandoned"})}, seq)

    return Plan("checkpoint.abandon", commit, (), [])


def keep(draft: Draft, accepted: Row, current: Row | None, writes: list[TrackedWrite]) -> Plan:
    """The accepted revision already says this: nothing changes but a draft saying the
    same, which is dropped."""
    note = diagnostic(
        "CHECKPOINT_UNCHANGED",
        "info",
        f"revision {accepted['revision']} already holds this payload and evidence",
        accepted["id"],
    )

    def commit(tx: sqlite3.Connection) -> Outcome:
        rows.require_current(tx, accepted, "accepted", accepted)
        seq = None
        if current is not None:
            rows.drop_draft(tx, current, "equal to the accepted revision")
            seq = journal.append(
                tx,
                actor="agent",
                kind="delivery.checkpoint_abandoned",
                subject=current["id"],
                payload={**_event_payload(current), "reason": "equal to the accepted revision"},
            )
        result = {"accepted": True, "unchanged": True, "checkpoint": rows.view(accepted)}
        return Outcome(result, seq)

    return Plan("checkpoint.accept", commit, tuple(writes), [*draft.diagnostics, note])


@dataclass(frozen=True)
class Accepting:
    """What acceptance commits: the draft, the rows it replaces, and what it pins."""

    draft: Draft
    accepted: Row | None
    current: Row | None
    envelope_digest: str
    fingerprint: str | None
    document: dict[str, Any] | None


def accept(accepting: Accepting, writes: list[TrackedWrite]) -> Plan:
    """Step 7 (and 8 through ``writes``): supersede and accept in one transaction."""
    previous = accepting.accepted
    row = accepting.draft.row(
        status="accepted",
        revision=1 if previous is None else previous["revision"] + 1,
        envelope_digest=accepting.envelope_digest,
        supersedes_id=None if previous is None else previous["id"],
    )
    scope = accepting.draft.scope

    def commit(tx: sqlite3.Connection) -> Outcome:
        rows.require_current(tx, row, "accepted", previous)
        rows.require_current(tx, row, "draft", accepting.current)
        if accepting.fingerprint is not None and accepting.fingerprint != (
            waves.tasks_fingerprint(tx, scope.id or "")
        ):
            raise Stale(scope.id)
        if previous is not None:
            tx.execute(
                "UPDATE delivery_checkpoints SET status = 'superseded', updated_at = ?"
                " WHERE id = ?",
                (clock.now(), previous["id"]),
            )
        rows.write(tx, row, None if accepting.current is None else accepting.current["id"])
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.checkpoint_accepted",
            subject=row["id"],
            payload={
                **_event_payload(row),
                "revision": row["revision"],
                "supersedes_id": row["supersedes_id"],
                "envelope_digest": row["envelope_digest"],
            },
        )
        result: dict[str, Any] = {"accepted": True, "checkpoint": rows.view(row)}
        if accepting.document is not None:
            result["plan"] = {
                "path": f"{layout.change_folder(scope.id or '')}/plan.json",
                "digest": accepting.document["digest"],
                "waves": accepting.document["waves"],
            }
        return Outcome(result, seq)

    return Plan("checkpoint.accept", commit, tuple(writes), accepting.draft.diagnostics)


def _event_payload(row: Row) -> dict[str, Any]:
    """What every checkpoint event names of its row."""
    return {
        "id": row["id"],
        "stage": row["stage"],
        "scope": {"type": row["scope_type"], "id": row["scope_id"]},
        "digest": row["digest"],
    }
