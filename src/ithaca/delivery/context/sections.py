"""The sections of a Context Envelope, read from the store and the tracked files
(docs/delivery.md, "context").

Reading happens in two steps so that the database transaction stays short: ``gather``
takes every row the envelope needs inside the caller's read snapshot, and ``build`` then
turns them into sections, looking at files only through ``context_refs`` (digests from
an in-process stat cache, bodies never inlined). Every gap found on the way becomes a
diagnostic, grouped by severity at the end; lists are ordered by stored values only, so
the same authority gives the same sections in any process.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ithaca.delivery.context import refs as context_refs
from ithaca.delivery.context.scope import Scope
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.records import baseline, changes
from ithaca.kernel.authority import AGENT_ENVIRONMENT
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

Row = dict[str, Any]

LEDGER_PATH = "tasks/tasks.json"
STAGES = ("research", "plan", "dev", "test", "review", "deliver")
_HOSTS = {"CLAUDECODE": "claude", "CLAUDE_CODE_ENTRYPOINT": "claude", "CODEX_THREAD_ID": "codex"}
_DECISIONS = (
    "SELECT d.id, d.scope_type, d.scope_id, d.path, d.status, d.question, f.digest"
    " FROM delivery_decisions d LEFT JOIN delivery_files f ON f.path = d.path"
    " WHERE (d.scope_type = 'baseline' OR d.scope_id = ?)"
    " AND d.status IN ('accepted', 'deferred')"
    " AND NOT EXISTS (SELECT 1 FROM delivery_decisions s WHERE s.supersedes_id = d.id)"
    " ORDER BY d.scope_type, d.created_at, d.id"
)
_ARTIFACTS = (
    "SELECT id, kind, role, scope_type, scope_id, path, digest, bytes, mode"
    " FROM delivery_artifacts WHERE status = 'current' AND scope_type = ?"
    " AND ifnull(scope_id, '') = ? ORDER BY created_at, id"
)
_CHECKPOINTS = (
    "SELECT stage, scope_type, scope_id, status, revision, digest FROM delivery_checkpoints"
    " WHERE status IN ('draft', 'accepted') AND scope_type = ? AND ifnull(scope_id, '') = ?"
)


@dataclass(frozen=True)
class Authority:
    """Every row an envelope needs, taken in one read snapshot."""

    scope: Scope
    accepted_baseline: Row | None
    open_baseline: Row | None
    deps: dict[str, str]
    circuit: Row | None
    registered: dict[str, str]
    decisions: list[Row]
    artifacts: list[Row]
    checkpoints: list[Row]
    # This checkout's last sync of the team ledger: (state digest, ancestors), if any.
    ledger_base: tuple[str, list[str]] | None = None


def gather(conn: sqlite3.Connection, scope: Scope) -> Authority:
    """The rows for ``scope``; the caller holds the read transaction."""
    change_id = None if scope.change is None else scope.change["id"]
    task = scope.task
    deps: dict[str, str] = {}
    circuit = None
    if task is not None:
        wanted = task["contract"].get("deps", [])
        if wanted:
            marks = ", ".join("?" * len(wanted))
            deps = dict(
                conn.execute(
                    f"SELECT id, status FROM delivery_tasks WHERE id IN ({marks})", wanted
                ).fetchall()
            )
        found = conn.execute(
            "SELECT consecutive_failures, open FROM delivery_circuits WHERE task_id = ?",
            (task["id"],),
        ).fetchone()
        if found is not None:
            circuit = {"consecutive_failures": found[0], "open": bool(found[1])}
    registered: dict[str, str] = {}
    if change_id is not None:
        registered = dict(
            conn.execute(
                "SELECT path, digest FROM delivery_files WHERE scope_type = 'change'"
                " AND scope_id = ? AND kind IN ('intent', 'diagnosis')",
                (change_id,),
            ).fetchall()
        )
    return Authority(
        scope=scope,
        accepted_baseline=baseline.accepted_baseline(conn),
        open_baseline=baseline.open_baseline(conn),
        deps=deps,
        circuit=circuit,
        registered=registered,
        decisions=_row(conn, _DECISIONS, (change_id or "",), _DECISION_COLUMNS),
        artifacts=[
            row
            for level in _levels(scope)
            for row in _row(conn, _ARTIFACTS, level, _ARTIFACT_COLUMNS)
        ],
        checkpoints=sorted(
            (
                row
                for level in _checkpoint_levels(scope)
                for row in _row(conn, _CHECKPOINTS, level, _CHECKPOINT_COLUMNS)
            ),
            key=_checkpoint_order,
        ),
        ledger_base=_ledger_base(conn),
    )


def _ledger_base(conn: sqlite3.Connection) -> tuple[str, list[str]] | None:
    found = conn.execute(
        "SELECT state_digest, ancestors FROM delivery_ledger_base WHERE id = 1"
    ).fetchone()
    return None if found is None else (found[0], json.loads(found[1]))


_DECISION_COLUMNS = ("id", "scope_type", "scope_id", "path", "status", "question", "file_digest")
_ARTIFACT_COLUMNS = (
    "id",
    "kind",
    "role",
    "scope_type",
    "scope_id",
    "path",
    "digest",
    "bytes",
    "mode",
)
_CHECKPOINT_COLUMNS = ("stage", "scope_type", "scope_id", "status", "revision", "digest")


def _row(
    conn: sqlite3.Connection, query: str, args: tuple[Any, ...], columns: tuple[str, ...]
) -> list[Row]:
    return [dict(zip(columns, found, strict=True)) for found in conn.execute(query, args)]


def _levels(scope: Scope) -> list[tuple[str, str]]:
    """The (scope_type, scope_id) levels whose evidence the scope sees, narrowest first."""
    if scope.task is not None:
        levels = [("task", scope.task["id"])]
        if scope.change is not None:
            levels.append(("change", scope.change["id"]))
        return levels
    if scope.change is not None:
        return [("change", scope.change["id"])]
    return [("baseline", "")]


def _checkpoint_levels(scope: Scope) -> list[tuple[str, str]]:
    if scope.type == "project":
        return [("project", "")]
    return _levels(scope)


def _checkpoint_order(row: Row) -> tuple[int, str, str, str]:
    return (STAGES.index(row["stage"]), row["scope_type"], row["scope_id"] or "", row["status"])


# --- building ---------------------------------------------------------------------------


def build(project: Project, found: Authority) -> tuple[dict[str, Any], list[Diagnostic]]:
    """The content sections (all but ``git``) and the diagnostics met on the way."""
    notes: list[Diagnostic] = []
    sections = {
        "project": _project(project, found),
        "baseline": _baseline(project, found, notes),
        "change": _change(project, found, notes),
        "task": _task(found, notes),
        "decisions": _decisions(project, found, notes),
        "checkpoints": [
            {key: row[key] for key in _CHECKPOINT_COLUMNS} for row in found.checkpoints
        ],
        "evidence": _evidence(project, found, notes),
        "team_checkpoint": _team_checkpoint(project, found, notes),
    }
    return sections, notes


def grouped(notes: list[Diagnostic]) -> dict[str, list[Diagnostic]]:
    """Diagnostics by severity, as the envelope carries them (``info`` is left out)."""
    groups: dict[str, list[Diagnostic]] = {
        "warnings": [],
        "needs_attention": [],
        "hard_conflicts": [],
    }
    names = {"warning": "warnings", "needs_attention": "needs_attention"}
    for note in notes:
        name = names.get(
            note["severity"], "hard_conflicts" if note["severity"] == "hard_conflict" else None
        )
        if name is not None:
            groups[name].append(note)
    return groups


def _project(project: Project, found: Authority) -> dict[str, Any]:
    named = found.accepted_baseline or found.open_baseline
    ledger = _ledger(project)
    host = next((name for variable, name in _HOSTS.items() if os.environ.get(variable)), None)
    if host is None and any(os.environ.get(variable) for variable in AGENT_ENVIRONMENT):
        host = "agent"
    return {
        "id": None if ledger is None else ledger.get("project_id"),
        "name": named["project_name"] if named else os.path.basename(project.root),
        "root": project.root,
        "host": host,
    }


def _baseline(project: Project, found: Authority, notes: list[Diagnostic]) -> dict[str, Any] | None:
    row = found.accepted_baseline or found.open_baseline
    if row is None:
        return None
    pending = found.open_baseline if found.accepted_baseline is not None else None
    return {
        "id": row["id"],
        "mode": row["mode"],
        "status": row["status"],
        "revision": row["revision"],
        "pending_revision": None if pending is None else pending["revision"],
        "specs": [_checkout_ref(project, ref, "BASELINE_SPEC", notes) for ref in row["specs"]],
        "evidence": [
            _checkout_ref(project, ref, "BASELINE_EVIDENCE", notes) for ref in row["evidence"]
        ],
        "open_gaps": [
            {"id": gap["id"], "category": gap["category"], "blocking": gap["blocking"]}
            for gap in row["gaps"]
        ],
    }


def _checkout_ref(
    project: Project, stated: dict[str, Any], code: str, notes: list[Diagnostic]
) -> dict[str, Any]:
    found = context_refs.ref(project.root, stated["path"])
    if found is None:
        notes.append(
            diagnostic(f"{code}_MISSING", "warning", f"{stated['path']} is missing", stated["path"])
        )
        return {"path": stated["path"], "digest": stated.get("digest"), "bytes": None}
    if stated.get("digest") not in (None, found["digest"]):
        notes.append(
            diagnostic(
                f"{code}_CHANGED",
                "warning",
                f"{stated['path']} no longer has the digest the baseline states",
                stated["path"],
            )
        )
    return found


def _change(project: Project, found: Authority, notes: list[Diagnostic]) -> dict[str, Any] | None:
    row = found.scope.change
    if row is None:
        return None
    gaps = changes.profile_gaps(
        {
            name: row[name]
            for name in ("kind", "contract", "classification", "research_disposition")
        },
        row["id"],
    )
    notes.extend(gaps)
    return {
        "id": row["id"],
        "kind": row["kind"],
        "status": row["status"],
        "title": row["title"],
        "revision": row["revision"],
        "contract": row["contract"],
        "classification": row["classification"],
        "research_disposition": row["research_disposition"],
        "debug_session_id": row["debug_session_id"],
        "intent": _tracked_ref(project, found, f"{row['path']}/intent.md", notes),
        "diagnosis": _tracked_ref(project, found, f"{row['path']}/diagnosis.md", notes),
        "profile_gaps": [gap["code"].partition(":")[2] or gap["code"] for gap in gaps],
    }


def _tracked_ref(
    project: Project, found: Authority, path: str, notes: list[Diagnostic]
) -> dict[str, Any] | None:
    """A tracked file's ref; a file that differs from its registered digest is flagged."""
    registered = found.registered.get(path)
    if registered is None:
        return None
    current = context_refs.ref(project.state_root, path)
    if current is None or current["digest"] != registered:
        state = "is missing" if current is None else "was changed outside Ithaca"
        notes.append(
            diagnostic(
                "TRACKED_FILE_DRIFT",
                "needs_attention",
                f"{path} {state}; run `ithaca doctor`",
                path,
            )
        )
    return current or {"path": path, "digest": registered, "bytes": None}


def _task(found: Authority, notes: list[Diagnostic]) -> dict[str, Any] | None:
    row = found.scope.task
    if row is None:
        return None
    deps = []
    for dep in row["contract"].get("deps", []):
        status = found.deps.get(dep)
        if status is None or status == "removed":
            notes.append(
                diagnostic(
                    "TASK_DEP_UNKNOWN", "warning", f"{row['id']} depends on unknown {dep}", dep
                )
            )
        deps.append({"id": dep, "status": status})
    if found.circuit is not None and found.circuit["open"]:
        notes.append(
            diagnostic(
                "CIRCUIT_OPEN",
                "needs_attention",
                f"task {row['id']} failed {found.circuit['consecutive_failures']} times in a row",
                row["id"],
            )
        )
    return {
        "id": row["id"],
        "status": row["status"],
        "revision": row["revision"],
        "change_id": row["change_id"],
        "parent_id": row["parent_id"],
        "contract": row["contract"],
        "contract_digest": row["contract_digest"],
        "deps": deps,
        "circuit": found.circuit,
    }


def _decisions(project: Project, found: Authority, notes: list[Diagnostic]) -> list[dict[str, Any]]:
    listed = []
    for row in found.decisions:
        read = context_refs.read(project.state_root, row["path"])
        value: dict[str, Any] = {}
        if read is None or read[0]["digest"] != row["file_digest"]:
            state = "is missing" if read is None else "was changed outside Ithaca"
            notes.append(
                diagnostic(
                    "DECISION_FILE_DRIFT",
                    "hard_conflict",
                    f"decision {row['id']}: {row['path']} {state}",
                    row["id"],
                )
            )
        else:
            value = json.loads(read[1])
        if row["status"] == "deferred":
            notes.append(
                diagnostic(
                    "DECISION_DEFERRED",
                    "needs_attention",
                    f"decision {row['id']} is deferred",
                    row["id"],
                )
            )
        listed.append(
            {
                "id": row["id"],
                "status": row["status"],
                "scope": row["scope_id"] or "baseline",
                "question": row["question"],
                "selection": value.get("selection"),
                "ref": read[0]
                if read is not None
                else {"path": row["path"], "digest": row["file_digest"], "bytes": None},
            }
        )
    return listed


def _evidence(project: Project, found: Authority, notes: list[Diagnostic]) -> list[dict[str, Any]]:
    listed = []
    for row in found.artifacts:
        base = project.state_root if row["mode"] == "copy" else project.root
        current = context_refs.ref(base, row["path"])
        fresh = current is not None and current["digest"] == row["digest"]
        if not fresh:
            state = "is missing" if current is None else "changed since it was bound"
            notes.append(
                diagnostic("EVIDENCE_STALE", "warning", f"{row['path']} {state}", row["id"])
            )
        listed.append(
            {
                "id": row["id"],
                "kind": row["kind"],
                "role": row["role"],
                "scope": row["scope_id"] or row["scope_type"],
                "mode": row["mode"],
                "path": row["path"],
                "digest": row["digest"],
                "bytes": row["bytes"],
                "fresh": fresh,
            }
        )
    return listed


def _ledger(project: Project) -> dict[str, Any] | None:
    read = context_refs.read(project.state_root, LEDGER_PATH)
    if read is None:
        return None
    try:
        value = json.loads(read[1])
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _team_checkpoint(project: Project, found: Authority, notes: list[Diagnostic]) -> dict[str, Any]:
    """Where the ledger file stands against this checkout's last sync, read from the file's
    header (its statuses: docs/delivery.md, "context"); ``context`` never imports it, it
    reports ``LEDGER_IMPORT_PENDING`` when the file moved. Digests are verified by the
    import, not here, and unpublished edits are not looked for: ``sync inspect`` tells all."""
    ledger = _ledger(project)
    if ledger is None:
        return {"status": "missing", "state_digest": None, "generation": None}
    if ledger.get("kind") != "ithaca-team-ledger":
        notes.append(
            diagnostic(
                "LEDGER_UNPARSEABLE", "needs_attention", f"{LEDGER_PATH} is not a team ledger"
            )
        )
        return {"status": "corrupt", "state_digest": None, "generation": None}
    state = ledger.get("state_digest")
    status = _ledger_status(ledger, found.ledger_base)
    if status == "conflicted":
        notes.append(
            diagnostic(
                "LEDGER_UNRESOLVED_CONFLICTS",
                "needs_attention",
                f"{LEDGER_PATH} holds merge conflicts; `ithaca sync import --resolve"
                " TYPE:ID=ours|theirs` settles them",
            )
        )
    elif status != "current":
        notes.append(
            diagnostic(
                "LEDGER_IMPORT_PENDING",
                "needs_attention",
                f"{LEDGER_PATH} changed since this checkout's last sync ({status}); the next"
                " change imports it, or `ithaca sync import`",
            )
        )
    return {"status": status, "state_digest": state, "generation": ledger.get("generation")}


def _ledger_status(ledger: dict[str, Any], base: tuple[str, list[str]] | None) -> str:
    if ledger.get("conflicts"):
        return "conflicted"
    state = ledger.get("state_digest")
    if base is not None and state == base[0]:
        return "current"
    ancestors = ledger.get("ancestors")
    if base is None or (isinstance(ancestors, list) and base[0] in ancestors):
        return "behind"
    if state in base[1]:
        return "rewound"
    return "diverged"
