"""``archive``: close a change into ``changes/archive/<UTC yyyy-mm-dd>-<id>/``
(docs/delivery.md, "archive").

The original refused to archive a change that had decisions, and insisted on a ready
baseline; here neither matters. Only what must not happen is an error: an unknown
change, work still running on it, one of its registered files edited behind Ithaca's
back, a taken archive folder, an unsafe path. Everything else is a diagnostic and the
change is archived: open tasks, no accepted ``deliver`` checkpoint, no accepted
baseline, gaps in an incident's diagnosis, and a change that says nothing about the
baseline (``BASELINE_RECONCILIATION_MISSING``, stored ``unreconciled`` so it stays in
``needs_attention`` until a ``baseline revise`` lists the change in ``reconciles``).

It is one recoverable unit (``ithaca.delivery.units.recoverable``): the change folder is moved,
``delivery/archive.json`` (summary, reconciliation, task outcomes, checkpoint and
decision digests; no wall-clock time) and the baseline updates are written (copies of
replaced files kept until the unit is done), then T2 rebinds every registered path
under the folder — files, decisions, copied artifacts — to the archived folder, bytes
and digests unchanged (decisions move, they are never judged again), marks the change
``archived``, stores the reconciliation, raises the baseline revision when files were
updated (a baseline ``observe`` of the new specs and research) and journals
``delivery.change_archived``. A crash before T2 moves the folder back and restores the
baseline files on the next open.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from ithaca.delivery import documents, layout
from ithaca.delivery.checkpoints import diagnosis
from ithaca.delivery.contract import Diagnostic, check_request_size, diagnostic, validation_error
from ithaca.delivery.idempotency import Guard, request_digest
from ithaca.delivery.records import baseline, changes, decisions
from ithaca.delivery.schemas import ids
from ithaca.delivery.schemas.dialect import array, check, obj, text
from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Outcome, Plan, Rename, Stale, TrackedWrite, flat
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon, clock, journal
from ithaca.kernel.errors import Conflict, NotFound
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

TOOL = "archive"
SCHEMA = "ithaca.archive/1"
CHANGES_ARCHIVE = "changes/archive"
ARCHIVE_FILE = "delivery/archive.json"
OPEN_TASK_STATUSES = ("pending", "blocked", "expanded")

_PATH = text(1024)
ARCHIVE_DESCRIPTION = (
    "Archive a change: payload {summary, baseline_updates [{target, source}] or "
    "no_baseline_change_reason}."
)
ARCHIVE_SCHEMA: dict[str, Any] = obj(
    {
        "change_id": ids.CHANGE_ID,
        "payload": obj(
            {"summary": text(4000)},
            {
                "baseline_updates": array(obj({"target": _PATH, "source": _PATH}), 100, minItems=1),
                "no_baseline_change_reason": text(2000),
            },
            **{"x-exclusive": [["baseline_updates", "no_baseline_change_reason"]]},
        ),
        "idempotency_key": ids.IDEMPOTENCY_KEY,
    }
)


def archive_change(
    project: Project, store: Store, config: dict[str, Any], arguments: Any
) -> dict[str, Any]:
    """``archive {change_id, payload, idempotency_key}`` → ``{change, archive,
    reconciliation, journal_seq, diagnostics}`` (``replayed`` on a repeated key)."""
    if not isinstance(arguments, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object with change_id and payload")
    check_request_size(arguments)
    request = check(ARCHIVE_SCHEMA, arguments)
    change_id, payload = request["change_id"], request["payload"]
    data = {"change_id": change_id, "payload": payload}
    guard = Guard(request["idempotency_key"], TOOL, request_digest(TOOL, TOOL, data))
    answer, replayed = Units(project, store).run_keyed(
        guard,
        lambda conn: prepare(conn, project, change_id, payload),
        f"archiving {change_id}",
        {"change_id": change_id},
    )
    return {**flat(answer), "replayed": True} if replayed else flat(answer)


def prepare(
    conn: sqlite3.Connection, project: Project, change_id: str, payload: dict[str, Any]
) -> Plan:
    """The archive's unit, checked against the state and files as they are now."""
    before = changes.writable(conn, change_id)
    changes.require_nothing_running(conn, change_id, "ARCHIVE_SESSIONS_RUNNING")
    source = before["path"]
    target = f"{CHANGES_ARCHIVE}/{clock.now()[:10]}-{change_id}"
    if os.path.lexists(os.path.join(project.state_root, target)):
        raise Conflict(
            "ARCHIVE_TARGET_EXISTS",
            f"{target} already exists; move it aside, or archive on another day",
            {"change_id": change_id, "path": target},
        )
    decided = _verified_decisions(conn, project, change_id)
    _verify_files(conn, project, source)
    updates, writes = _baseline_updates(project, source, payload.get("baseline_updates", []))
    tasks = _task_outcomes(conn, change_id)
    checkpoints = _accepted_checkpoints(conn, change_id)
    reconciliation, diagnostics = _reconciliation(conn, change_id, payload, updates)
    diagnostics = _gaps(conn, before, tasks, checkpoints) + diagnostics
    observe = None
    if updates:
        observe = baseline.observe(conn, project, _baseline_refs(updates))
        diagnostics += observe.diagnostics
    body = documents.pretty_json(
        {
            "schema": SCHEMA,
            "change": {"id": change_id, "kind": before["kind"], "title": before["title"]},
            "summary": payload["summary"],
            "reconciliation": reconciliation,
            "tasks": tasks,
            "checkpoints": checkpoints,
            "decisions": decided,
        }
    )
    note = TrackedWrite(f"{target}/{ARCHIVE_FILE}", body, "archive", "change", change_id)
    after = {**before, "status": "archived", "path": target, "revision": before["revision"] + 1}

    def commit(tx: sqlite3.Connection) -> Outcome:
        current = changes.find(tx, change_id)
        if current is None or (current["revision"], current["status"]) != (
            before["revision"],
            before["status"],
        ):
            raise Stale(change_id)
        changes.require_nothing_running(tx, change_id, "ARCHIVE_SESSIONS_RUNNING")
        revision = None
        if observe is not None:
            revision = observe.commit(tx).result["baseline"]["revision"]
        _rebind(tx, change_id, source, target)
        tx.execute(
            "UPDATE delivery_changes SET status = 'archived', path = ?, revision = ?,"
            " updated_at = ? WHERE id = ?",
            (target, after["revision"], clock.now(), change_id),
        )
        stored = {**reconciliation, "baseline_revision": revision}
        _store_reconciliation(tx, change_id, stored)
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.change_archived",
            subject=change_id,
            payload={
                "id": change_id,
                "from": source,
                "to": target,
                "archive": {"path": note.path, "digest": note.digest},
                "reconciliation": stored["status"],
                "baseline_revision": revision,
            },
        )
        result = {
            "change": changes.view(after),
            "archive": {"path": note.path, "digest": note.digest},
            "reconciliation": stored,
        }
        return Outcome(result, seq)

    return Plan("archive", commit, (note, *writes), diagnostics, (Rename(source, target),))


# --- checks ---------------------------------------------------------------------------------


def _verified_decisions(
    conn: sqlite3.Connection, project: Project, change_id: str
) -> list[dict[str, Any]]:
    """The change's decisions, each file re-verified (``DECISION_FILE_DRIFT``)."""
    found = []
    rows = conn.execute(
        "SELECT id FROM delivery_decisions WHERE scope_type = 'change' AND scope_id = ?"
        " ORDER BY id",
        (change_id,),
    ).fetchall()
    for (decision_id,) in rows:
        row = decisions.find(conn, decision_id)
        assert row is not None
        decisions.read_verified(project.state_root, conn, row)
        found.append(
            {
                "id": decision_id,
                "status": row["status"],
                "digest": row["digest"],
                "supersedes": row["supersedes_id"],
            }
        )
    return found


def _verify_files(conn: sqlite3.Connection, project: Project, folder: str) -> None:
    """Every registered file under the change folder still has its registered bytes."""
    rows = conn.execute(
        "SELECT path, digest, kind FROM delivery_files WHERE substr(path, 1, ?) = ? ORDER BY path",
        (len(folder) + 1, folder + "/"),
    ).fetchall()
    for path, digest, kind in rows:
        code = "DECISION_FILE_DRIFT" if kind == "decision" else "ARTIFACT_DIGEST_MISMATCH"
        registry.read_verified(project.state_root, path, digest, code)


def _baseline_updates(
    project: Project, folder: str, requested: list[dict[str, str]]
) -> tuple[list[dict[str, str]], list[TrackedWrite]]:
    """Each update checked and read: ``[{target, source, digest}]`` and its writes."""
    updates: list[dict[str, str]] = []
    writes: list[TrackedWrite] = []
    for index, update in enumerate(requested):
        pointer = f"/payload/baseline_updates/{index}"
        target = layout.relative(update["target"], f"{pointer}/target")
        if target.endswith("/") or not any(
            target.startswith(prefix) and len(target) > len(prefix)
            for prefix in layout.BASELINE_SUBFOLDERS
        ):
            raise layout.unsafe(
                f"{pointer}/target",
                update["target"],
                "OUTSIDE_ALLOWED_FOLDERS",
                f"must name a file under {' or '.join(layout.BASELINE_SUBFOLDERS)}",
            )
        if any(done["target"] == target for done in updates):
            raise validation_error(f"{pointer}/target", "DUPLICATE", "is updated twice")
        source = layout.relative(update["source"], f"{pointer}/source")
        data = _read_source(project.state_root, folder, source, f"{pointer}/source")
        kind = "spec" if target.startswith("specs/") else "research"
        writes.append(TrackedWrite(target, data, kind, "baseline", None))
        updates.append({"target": target, "source": source, "digest": canon.digest_bytes(data)})
    return updates, writes


def _read_source(state_root: str, folder: str, source: str, pointer: str) -> bytes:
    """The bytes of a file in the change folder, refusing symlinks and folders."""
    here = os.path.join(state_root, *folder.split("/"))
    for part in source.rstrip("/").split("/"):
        here = os.path.join(here, part)
        try:
            info = os.lstat(here)
        except FileNotFoundError as exc:
            raise NotFound(
                "EVIDENCE_FILE_MISSING",
                f"{source} is not in the change folder {folder}",
                {"path": source, "pointer": pointer},
            ) from exc
        if stat.S_ISLNK(info.st_mode):
            raise layout.unsafe(pointer, source, "SYMLINK", "passes through a symlink")
    if not stat.S_ISREG(info.st_mode):
        raise layout.unsafe(pointer, source, "NOT_A_FILE", "is not a regular file")
    data = registry.read_bytes(state_root, f"{folder}/{source}")
    assert data is not None
    return data


# --- what the archive records ------------------------------------------------------------------


def _task_outcomes(conn: sqlite3.Connection, change_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, status, contract_digest, outcome, completion_commit FROM delivery_tasks"
        " WHERE change_id = ? ORDER BY id",
        (change_id,),
    ).fetchall()
    return [
        {
            "id": task_id,
            "status": status,
            "contract_digest": contract_digest,
            "outcome": None if outcome is None else json.loads(outcome),
            "completion_commit": commit,
        }
        for task_id, status, contract_digest, outcome, commit in rows
    ]


def _accepted_checkpoints(conn: sqlite3.Connection, change_id: str) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT id, stage, revision, digest FROM delivery_checkpoints"
        " WHERE scope_type = 'change' AND scope_id = ? AND status = 'accepted' ORDER BY stage",
        (change_id,),
    ).fetchall()
    return [
        {"id": checkpoint_id, "stage": stage, "revision": revision, "digest": digest}
        for checkpoint_id, stage, revision, digest in rows
    ]


def _gaps(
    conn: sqlite3.Connection,
    change: dict[str, Any],
    tasks: list[dict[str, Any]],
    checkpoints: list[dict[str, Any]],
) -> list[Diagnostic]:
    change_id = change["id"]
    found = []
    still_open = [task["id"] for task in tasks if task["status"] in OPEN_TASK_STATUSES]
    if still_open:
        found.append(
            diagnostic(
                "ARCHIVE_TASKS_OPEN",
                "warning",
                f"archived with open tasks: {', '.join(still_open)}",
                change_id,
            )
        )
    if not any(checkpoint["stage"] == "deliver" for checkpoint in checkpoints):
        found.append(
            diagnostic(
                "DELIVER_CHECKPOINT_MISSING",
                "warning",
                "archived without an accepted deliver checkpoint",
                change_id,
            )
        )
    if baseline.accepted_baseline(conn) is None:
        found.append(
            diagnostic(
                "BASELINE_NOT_ACCEPTED",
                "info",
                "no baseline is accepted yet; the change is archived all the same",
            )
        )
    if change["kind"] == "incident":
        found += diagnosis.missing_sections(change["diagnosis"] or {}, change_id)
    return found


def _reconciliation(
    conn: sqlite3.Connection,
    change_id: str,
    payload: dict[str, Any],
    updates: list[dict[str, str]],
) -> tuple[dict[str, Any], list[Diagnostic]]:
    """How the change left the baseline: updated, unchanged for a reason, or unsaid."""
    if updates:
        return {"status": "reconciled", "updates": updates, "reason": None}, []
    reason = payload.get("no_baseline_change_reason")
    if reason is not None:
        return {"status": "reconciled", "updates": [], "reason": reason}, []
    earlier = conn.execute(
        "SELECT reason FROM delivery_reconciliations WHERE change_id = ? AND status = 'reconciled'",
        (change_id,),
    ).fetchone()
    if earlier is not None:
        return {"status": "reconciled", "updates": [], "reason": earlier[0]}, []
    missing = diagnostic(
        "BASELINE_RECONCILIATION_MISSING",
        "needs_attention",
        "the archive says neither how the baseline changed nor why it did not; a baseline"
        " revise that lists this change in reconciles settles it",
        change_id,
    )
    return {"status": "unreconciled", "updates": [], "reason": None}, [missing]


def _baseline_refs(updates: list[dict[str, str]]) -> dict[str, Any]:
    """The ``baseline observe`` data that records the updated files."""
    refs: dict[str, list[dict[str, str]]] = {}
    for update in updates:
        name = "specs" if update["target"].startswith("specs/") else "evidence"
        refs.setdefault(name, []).append({"path": update["target"], "digest": update["digest"]})
    return refs


# --- the commit's pieces ------------------------------------------------------------------------


def _rebind(conn: sqlite3.Connection, change_id: str, source: str, target: str) -> None:
    """Point every registered path under ``source`` at ``target``; bytes do not change."""
    prefix = (len(source) + 1, source + "/")
    moved = (target, len(source) + 1)
    conn.execute(
        "UPDATE delivery_files SET path = ? || substr(path, ?) WHERE substr(path, 1, ?) = ?",
        (*moved, *prefix),
    )
    conn.execute(
        "UPDATE delivery_decisions SET path = ? || substr(path, ?)"
        " WHERE scope_type = 'change' AND scope_id = ? AND substr(path, 1, ?) = ?",
        (*moved, change_id, *prefix),
    )
    conn.execute(
        "UPDATE delivery_artifacts SET path = ? || substr(path, ?)"
        " WHERE mode = 'copy' AND substr(path, 1, ?) = ?",
        (*moved, *prefix),
    )


def _store_reconciliation(conn: sqlite3.Connection, change_id: str, stored: dict[str, Any]) -> None:
    now = clock.now()
    conn.execute(
        "INSERT INTO delivery_reconciliations (change_id, updates, reason, status,"
        " baseline_revision, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (change_id) DO UPDATE SET updates = excluded.updates,"
        " reason = excluded.reason, status = excluded.status,"
        " baseline_revision = coalesce(excluded.baseline_revision, baseline_revision),"
        " updated_at = excluded.updated_at",
        (
            change_id,
            canon.canonical_text(stored["updates"]),
            stored["reason"],
            stored["status"],
            stored["baseline_revision"],
            now,
            now,
        ),
    )
