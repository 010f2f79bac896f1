"""``record decision accept|defer``: immutable Decision Records
(docs/delivery.md, "The record tool").

A Decision Record is a small JSON file (``schema: "ithaca.decision/1"``) carrying its own
digest, written once to ``decisions/baseline/<id>.json`` or
``changes/active/<change>/decisions/<id>.json`` in the same recoverable unit as its row,
so no decision file is ever orphaned. It holds the normalised question, recommendation,
selection, effects and provenance, never transcripts or reasoning; caps keep it small.

Files never change. Recording the same id with the same content is a no-op; other
content under a taken id is ``DECISION_ID_CONFLICT``. A later decision supersedes an
earlier one by naming it: same scope only, and at most once (the unique index decides a
race). ``superseded`` is derived from that link, never written into the old file. A file
edited behind Ithaca's back fails its digest when a mutation depends on it
(``DECISION_FILE_DRIFT``).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ithaca.delivery import documents, layout
from ithaca.delivery.contract import diagnostic, validation_error
from ithaca.delivery.records import changes
from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite, unchanged
from ithaca.kernel import canon, clock, journal
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, NotFound
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

SCHEMA = "ithaca.decision/1"
QUESTION_BYTES = 1024
RECOMMENDATION_BYTES = 4096
ITEM_BYTES = 1024
FILE_BYTES = 16384

Row = dict[str, Any]
_COLUMNS = ("id", "scope_type", "scope_id", "path", "digest", "status", "supersedes_id", "question")


def find(conn: sqlite3.Connection, decision_id: str) -> Row | None:
    row = conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM delivery_decisions WHERE id = ?", (decision_id,)
    ).fetchone()
    return None if row is None else dict(zip(_COLUMNS, row, strict=True))


def superseded_by(conn: sqlite3.Connection, decision_id: str) -> str | None:
    row = conn.execute(
        "SELECT id FROM delivery_decisions WHERE supersedes_id = ?", (decision_id,)
    ).fetchone()
    return None if row is None else str(row[0])


def read_verified(state_root: str, conn: sqlite3.Connection, row: Row) -> dict[str, Any]:
    """The decision's file value, re-verified: registered bytes and its own digest."""
    entry = registry.lookup(conn, row["path"])
    if entry is None:
        raise Corrupt(
            "DECISION_FILE_DRIFT",
            f"decision {row['id']} has no registered file",
            {"id": row["id"], "path": row["path"]},
        )
    data = registry.read_verified(state_root, row["path"], entry["digest"], "DECISION_FILE_DRIFT")
    value = json.loads(data)
    if (
        value.get("digest") != row["digest"]
        or canon.digest_excluding(value, "digest") != row["digest"]
    ):
        raise Corrupt(
            "DECISION_FILE_DRIFT",
            f"decision {row['id']} no longer matches its digest",
            {"id": row["id"], "path": row["path"]},
        )
    return dict(value)


def accept(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    return _record(conn, project, data, "accepted")


def defer(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    return _record(conn, project, data, "deferred")


def _record(conn: sqlite3.Connection, project: Project, data: dict[str, Any], status: str) -> Plan:
    change_id = data["scope"].get("change_id")
    if change_id is not None:
        changes.writable(conn, change_id)
    _check_caps(data)
    value: dict[str, Any] = {
        "schema": SCHEMA,
        "scope": {"type": "baseline" if change_id is None else "change", "id": change_id},
        "question": data["question"],
        "recommendation": data["recommendation"],
        "selection": data.get("selection"),
        "effects": data.get("effects", []),
        "non_goals": data.get("non_goals", []),
        "owner": data["owner"],
        "provenance": data["provenance"],
        "applied_refs": data.get("applied_refs", []),
        "status": status,
        "supersedes": data.get("supersedes"),
        "consequence": data.get("consequence"),
    }
    decision_id = data.get("id") or _new_id(value)
    value = {"id": decision_id, **value}
    value["digest"] = canon.digest_excluding(value, "digest")
    body = documents.pretty_json(value)
    if len(body) > FILE_BYTES:
        raise _too_large("", f"the record is {len(body)} bytes; at most {FILE_BYTES}")
    op = f"decision.{'accept' if status == 'accepted' else 'defer'}"
    result = {"decision": _view(value, layout.decision_path(change_id, decision_id))}
    existing = find(conn, decision_id)
    if existing is not None:
        if existing["digest"] != value["digest"]:
            raise Conflict(
                "DECISION_ID_CONFLICT",
                f"decision {decision_id} already exists with other content; decisions never"
                " change: record a new one that supersedes it",
                {"id": decision_id, "digest": existing["digest"]},
            )
        note = diagnostic(
            "DECISION_UNCHANGED", "info", f"decision {decision_id} is already recorded"
        )
        return unchanged(op, result, [note])
    target = data.get("supersedes")
    if target is not None:
        _check_supersedable(conn, project, decision_id, target, value["scope"])
    diagnostics = []
    if status == "deferred":
        diagnostics.append(
            diagnostic(
                "DECISION_DEFERRED",
                "needs_attention",
                f"decision {decision_id} is deferred: {data['consequence']}",
                decision_id,
            )
        )
    path = layout.decision_path(change_id, decision_id)
    write = TrackedWrite(path, body, "decision", value["scope"]["type"], change_id)
    now = clock.now()

    def commit(tx: sqlite3.Connection) -> Outcome:
        if find(tx, decision_id) is not None:
            raise Stale(decision_id)
        if target is not None and superseded_by(tx, target) is not None:
            raise _already_superseded(target, superseded_by(tx, target))
        tx.execute(
            f"INSERT INTO delivery_decisions ({', '.join(_COLUMNS)}, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                decision_id,
                value["scope"]["type"],
                change_id,
                path,
                value["digest"],
                status,
                target,
                data["question"],
                now,
            ),
        )
        seq = journal.append(
            tx,
            actor="agent",
            kind=f"delivery.decision_{status}",
            subject=decision_id,
            payload={
                "id": decision_id,
                "scope": value["scope"],
                "digest": value["digest"],
                "path": path,
                "supersedes": target,
            },
        )
        return Outcome(result, seq)

    return Plan(op, commit, (write,), diagnostics)


def _check_supersedable(
    conn: sqlite3.Connection,
    project: Project,
    decision_id: str,
    target_id: str,
    scope: dict[str, Any],
) -> None:
    if target_id == decision_id:
        raise validation_error(
            "/supersedes", "SELF_REFERENCE", "a decision cannot supersede itself"
        )
    target = find(conn, target_id)
    if target is None:
        raise NotFound("DECISION_NOT_FOUND", f"no decision {target_id}", {"id": target_id})
    if (target["scope_type"], target["scope_id"]) != (scope["type"], scope["id"]):
        raise InvalidInput(
            "DECISION_SCOPE_CONFLICT",
            f"decision {target_id} belongs to another scope; a decision supersedes only one"
            " of its own scope",
            {"id": target_id, "scope": {"type": target["scope_type"], "id": target["scope_id"]}},
        )
    holder = superseded_by(conn, target_id)
    if holder is not None:
        raise _already_superseded(target_id, holder)
    read_verified(project.state_root, conn, target)


def _already_superseded(target_id: str, holder: str | None) -> Conflict:
    return Conflict(
        "DECISION_ALREADY_SUPERSEDED",
        f"decision {target_id} is already superseded by {holder}; supersede that one instead",
        {"id": target_id, "superseded_by": holder},
    )


def _check_caps(data: dict[str, Any]) -> None:
    for name, limit in (("question", QUESTION_BYTES), ("recommendation", RECOMMENDATION_BYTES)):
        size = len(data[name].encode("utf-8"))
        if size > limit:
            raise _too_large(f"/{name}", f"{size} bytes; at most {limit}")
    for name in ("effects", "non_goals"):
        for index, item in enumerate(data.get(name, [])):
            size = len(item.encode("utf-8"))
            if size > ITEM_BYTES:
                raise _too_large(f"/{name}/{index}", f"{size} bytes; at most {ITEM_BYTES}")


def _too_large(pointer: str, message: str) -> InvalidInput:
    return InvalidInput(
        "DECISION_TOO_LARGE",
        f"{pointer or '/'}: {message} (a decision record holds the decision, not the discussion)",
        {"pointer": pointer},
    )


def _new_id(value: dict[str, Any]) -> str:
    """``dec-<question slug>-<digest prefix>``: readable, and equal for equal records."""
    slug = re.sub(r"[^a-z0-9]+", "-", value["question"].lower()).strip("-")[:40].strip("-")
    suffix = canon.digest(value)[:8]
    return f"dec-{slug}-{suffix}" if slug else f"dec-{suffix}"


def _view(value: dict[str, Any], path: str) -> dict[str, Any]:
    return {
        "id": value["id"],
        "status": value["status"],
        "scope": value["scope"],
        "path": path,
        "digest": value["digest"],
        "supersedes": value["supersedes"],
    }
