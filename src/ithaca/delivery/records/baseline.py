"""``record baseline initialize|start|observe|revise|accept`` (docs/delivery.md, "The record tool").

The baseline is what the project is before a change: its specs, evidence, open gaps and
unknowns. A row moves ``draft → adopting → accepted → superseded``; at most one row is
accepted and at most one is open (draft or adopting), which the schema's partial unique
indexes guarantee. Content changes (``observe``, ``revise``) bump the revision; from an
accepted baseline they open an ``adopting`` row at the next revision, and ``accept``
supersedes the previous accepted row in the same transaction.

Nothing else waits for a baseline: no record needs an accepted one, and every action
here creates the first draft (classified) when none exists yet, so an agent never
has to know the order. The classification is advisory; it only picks suggested gaps.
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.delivery import layout, rows
from ithaca.delivery.contract import Diagnostic, check_expected_revision, diagnostic
from ithaca.delivery.records import changes, classification, merge_patch
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.record import BASELINE_BODY
from ithaca.delivery.units.plans import Outcome, Plan, Stale, unchanged
from ithaca.kernel import clock, ids, journal
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

BODY_FIELDS = ("project_name", "mode", "scope", "specs", "evidence", "gaps", "unknowns")
_COLUMNS = ("id", "revision", "status", *BODY_FIELDS, "classification", "approval")
_JSON_COLUMNS = frozenset(
    {"scope", "specs", "evidence", "gaps", "unknowns", "classification", "approval"}
)


# --- reading ----------------------------------------------------------------------------


def open_baseline(conn: sqlite3.Connection) -> Row | None:
    """The draft or adopting baseline, if any."""
    return _one(conn, "status IN ('draft', 'adopting')")


def accepted_baseline(conn: sqlite3.Connection) -> Row | None:
    return _one(conn, "status = 'accepted'")


def view(row: Row) -> dict[str, Any]:
    return {name: row[name] for name in _COLUMNS}


def _one(conn: sqlite3.Connection, where: str) -> Row | None:
    found = conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM delivery_baselines WHERE {where}"
        " ORDER BY revision DESC LIMIT 1"
    ).fetchone()
    return rows.loaded(found, _COLUMNS, _JSON_COLUMNS)


def _latest_revision(conn: sqlite3.Connection) -> int:
    return int(
        conn.execute("SELECT ifnull(max(revision), 0) FROM delivery_baselines").fetchone()[0]
    )


# --- actions ----------------------------------------------------------------------------


def initialize(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    current = open_baseline(conn) or accepted_baseline(conn)
    if current is not None:
        note = diagnostic(
            "BASELINE_EXISTS",
            "info",
            f"the baseline exists (r{current['revision']}, {current['status']}); nothing to do",
        )
        return unchanged("baseline.initialize", {"baseline": view(current)}, [note])
    row, diagnostics = _first_draft(project, data)
    return _save("baseline.initialize", None, row, "delivery.baseline_initialized", diagnostics, 0)


def start(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    row, basis, latest, diagnostics = _working(conn, project)
    if row["status"] == "adopting" and basis is not None:
        note = diagnostic("BASELINE_ALREADY_ADOPTING", "info", "the baseline is already adopting")
        return unchanged("baseline.start", {"baseline": view(row)}, [note])
    after = {**row, "status": "adopting"}
    return _save("baseline.start", basis, after, "delivery.baseline_started", diagnostics, latest)


def observe(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    row, basis, latest, diagnostics = _working(conn, project)
    _check_refs(data, "")
    after = {**row, "revision": _content_revision(row, basis)}
    for name in ("specs", "evidence"):
        after[name] = _merged(row[name], data.get(name, []), "path")
    after["gaps"] = _merged(row["gaps"], data.get("gaps", []), "id")
    after["unknowns"] = row["unknowns"] + [
        u for u in data.get("unknowns", []) if u not in row["unknowns"]
    ]
    return _save(
        "baseline.observe", basis, after, "delivery.baseline_observed", diagnostics, latest
    )


def revise(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    row, basis, latest, diagnostics = _working(conn, project)
    check_expected_revision(data.get("expected_revision"), _current_revision(conn), "the baseline")
    for change_id in data.get("reconciles", []):
        changes.load(conn, change_id)
    body = check(BASELINE_BODY, merge_patch.apply(_body(row), data["patch"]), "/patch")
    _check_refs(body, "/patch")
    after = {**row, **body, "revision": _content_revision(row, basis)}
    reconciles = data.get("reconciles", [])

    def reconcile(tx: sqlite3.Connection) -> None:
        now = clock.now()
        for change_id in reconciles:
            tx.execute(
                "INSERT INTO delivery_reconciliations (change_id, updates, reason, status,"
                " baseline_revision, created_at, updated_at)"
                " VALUES (?, '[]', ?, 'reconciled', ?, ?, ?) ON CONFLICT (change_id) DO UPDATE"
                " SET status = 'reconciled', baseline_revision = excluded.baseline_revision,"
                " updated_at = excluded.updated_at",
                (change_id, f"baseline revise r{after['revision']}", after["revision"], now, now),
            )

    return _save(
        "baseline.revise",
        basis,
        after,
        "delivery.baseline_revised",
        diagnostics,
        latest,
        extra={"changed": sorted(data["patch"]), "reconciles": reconciles},
        also=reconcile,
    )


def accept(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    check_expected_revision(data.get("expected_revision"), _current_revision(conn), "the baseline")
    previous = accepted_baseline(conn)
    if open_baseline(conn) is None and previous is not None:
        note = diagnostic(
            "BASELINE_ALREADY_ACCEPTED",
            "info",
            f"baseline r{previous['revision']} is accepted and nothing is open to accept",
        )
        return unchanged("baseline.accept", {"baseline": view(previous)}, [note])
    row, basis, latest, diagnostics = _working(conn, project)
    if row["status"] == "draft":
        diagnostics.append(
            diagnostic("BASELINE_ADOPTION_SKIPPED", "info", "accepted straight from draft")
        )
    diagnostics += [
        diagnostic(
            "BASELINE_BLOCKING_GAP",
            "warning",
            f"accepted with the blocking gap {gap['id']} still open",
            gap["id"],
        )
        for gap in row["gaps"]
        if gap["blocking"]
    ]
    approval: dict[str, Any] = {
        "approved_by": data["approved_by"],
        "approval_note": data["approval_note"],
    }
    if "known_red" in data:
        approval["known_red"] = data["known_red"]
    after = {**row, "status": "accepted", "approval": approval}

    def supersede(tx: sqlite3.Connection) -> None:
        if previous is None:
            return
        moved = tx.execute(
            "UPDATE delivery_baselines SET status = 'superseded', updated_at = ?"
            " WHERE id = ? AND status = 'accepted'",
            (clock.now(), previous["id"]),
        ).rowcount
        if not moved:
            raise Stale("baseline")

    return _save(
        "baseline.accept",
        basis,
        after,
        "delivery.baseline_accepted",
        diagnostics,
        latest,
        extra={"superseded": None if previous is None else previous["id"]},
        first=supersede,
    )


# --- pieces -----------------------------------------------------------------------------


def _working(
    conn: sqlite3.Connection, project: Project
) -> tuple[Row, Row | None, int, list[Diagnostic]]:
    """The open baseline to act on: (row, the stored row it is, latest revision, notes).

    With none open, a new row, not yet stored, at the next revision: adopting from the
    accepted one, or a classified first draft (r1).
    """
    latest = _latest_revision(conn)
    found = open_baseline(conn)
    if found is not None:
        return found, found, latest, []
    accepted = accepted_baseline(conn)
    if accepted is not None:
        reopened = {
            **accepted,
            "id": ids.new("bsl"),
            "status": "adopting",
            "approval": None,
            "revision": accepted["revision"] + 1,
        }
        note = diagnostic(
            "BASELINE_REOPENED",
            "info",
            f"accepted baseline r{accepted['revision']} stays in force while r"
            f"{accepted['revision'] + 1} is adopted",
        )
        return reopened, None, latest, [note]
    row, diagnostics = _first_draft(project, {})
    return row, None, latest, diagnostics


def _first_draft(project: Project, data: dict[str, Any]) -> tuple[Row, list[Diagnostic]]:
    found = classification.classify(project.root, project.state_root, data.get("mode"))
    row: Row = {
        "id": ids.new("bsl"),
        "revision": 1,
        "status": "draft",
        "project_name": data.get("project_name") or os.path.basename(project.root),
        "mode": found["mode"],
        "scope": data.get("scope", {"paths": []}),
        "specs": [],
        "evidence": [],
        "gaps": [],
        "unknowns": [],
        "classification": found,
        "approval": None,
    }
    diagnostics = [
        diagnostic(
            "BASELINE_CLASSIFIED",
            "info",
            f"classified {found['detected']} ({found['file_count']} files,"
            f" {len(found['markers'])} markers); mode {found['mode']}",
        )
    ]
    diagnostics += [
        diagnostic("BASELINE_GAP_SUGGESTED", "info", f"{gap['category']}: {gap['note']}", gap["id"])
        for gap in found["suggested_gaps"]
    ]
    return row, diagnostics


def _save(
    op: str,
    basis: Row | None,
    after: Row,
    kind: str,
    diagnostics: list[Diagnostic],
    latest: int,
    *,
    extra: dict[str, Any] | None = None,
    first: Any = None,
    also: Any = None,
) -> Plan:
    """A plan that stores ``after`` (insert when ``basis`` is None, else update it)."""

    def commit(tx: sqlite3.Connection) -> Outcome:
        if first is not None:
            first(tx)
        if basis is None:
            if open_baseline(tx) is not None or _latest_revision(tx) != latest:
                raise Stale("baseline")
            _insert(tx, after)
        else:
            _update(tx, basis, after)
        if also is not None:
            also(tx)
        seq = journal.append(
            tx,
            actor="agent",
            kind=kind,
            subject=after["id"],
            payload={
                "id": after["id"],
                "revision": after["revision"],
                "status": after["status"],
                "mode": after["mode"],
                **(extra or {}),
            },
        )
        return Outcome({"baseline": view(after)}, seq)

    return Plan(op, commit, (), diagnostics)


def _insert(conn: sqlite3.Connection, row: Row) -> None:
    now = clock.now()
    conn.execute(
        f"INSERT INTO delivery_baselines ({', '.join(_COLUMNS)}, created_at, updated_at)"
        f" VALUES ({', '.join('?' * (len(_COLUMNS) + 2))})",
        (*_stored(row), now, now),
    )


def _update(conn: sqlite3.Connection, before: Row, after: Row) -> None:
    assignments = ", ".join(f"{name} = ?" for name in _COLUMNS[1:])
    moved = conn.execute(
        f"UPDATE delivery_baselines SET {assignments}, updated_at = ?"
        " WHERE id = ? AND revision = ? AND status = ?",
        (*_stored(after)[1:], clock.now(), before["id"], before["revision"], before["status"]),
    ).rowcount
    if not moved:
        raise Stale("baseline")


def _stored(row: Row) -> tuple[Any, ...]:
    return rows.stored(row, _COLUMNS, _JSON_COLUMNS)


def _body(row: Row) -> dict[str, Any]:
    return {name: row[name] for name in BODY_FIELDS}


def _current_revision(conn: sqlite3.Connection) -> int:
    """The revision ``expected_revision`` is compared with: the open one, else accepted."""
    found = open_baseline(conn) or accepted_baseline(conn)
    return 0 if found is None else int(found["revision"])


def _check_refs(body: dict[str, Any], pointer: str) -> None:
    for name in ("specs", "evidence"):
        for index, ref in enumerate(body.get(name, [])):
            layout.relative(ref["path"], f"{pointer}/{name}/{index}/path")


def _merged(old: list[dict[str, Any]], new: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """``old`` with items of ``new`` replacing those with the same ``key``, others appended."""
    replaced = {item[key]: item for item in new}
    kept = [replaced.pop(item[key], item) for item in old]
    return kept + list(replaced.values())


def _content_revision(row: Row, basis: Row | None) -> int:
    """The revision after a content change: a stored row moves on, a new one already has
    its next revision."""
    revision: int = row["revision"]
    return revision + 1 if basis is not None else revision
