"""Delivery's doctor rebuild: a fresh database loaded from the tracked files
(docs/delivery.md, "doctor").

Tracked files are the team's authority and the database is rebuildable from them. The
rebuild loads a fresh database from the files: decisions (self-digest verified), changes
from their folders (status from the location), every tracked file and the team ledger
registered at their current digests. Tasks, baselines, checkpoints and change contracts
are not loaded from the ledger by the rebuild; they are reported as not recovered.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.doctor.checks import tracked_files
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.units import registry
from ithaca.kernel import canon, clock, journal
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

CHANGES_ARCHIVE = "changes/archive"
# An archived change's folder is ``<yyyy-mm-dd>-<id>``.
ARCHIVE_DATE_LENGTH = len("2026-01-01-")


def rebuild(project: Project, store: Store, quarantined_db_sha256: str | None) -> dict[str, Any]:
    """Load delivery's rows from the tracked files into a fresh database."""
    state_root = project.state_root
    warnings: list[str] = []
    changes = _changes_on_disk(state_root)
    decisions = []
    for path in tracked_files(state_root):
        if _is_decision(path):
            value, problem = _decision(state_root, path, changes)
            if problem is None:
                decisions.append((path, value))
            else:
                warnings.append(f"{path} not loaded: {problem}")
    loaded_ids = {value["id"] for _, value in decisions}
    # Every file is read before the transaction opens: no file I/O inside a write.
    change_rows = [
        (
            change_id,
            "incident" if _exists(state_root, f"{folder}/diagnosis.md") else "standard",
            status,
            _title(state_root, folder) or change_id,
            folder,
        )
        for change_id, (folder, status) in sorted(changes.items())
    ]
    skipped = {path for path in tracked_files(state_root) if _is_decision(path)} - {
        path for path, _ in decisions
    }
    files = []
    for path in tracked_files(state_root):
        if path in skipped:
            continue
        digest = registry.file_digest(state_root, path)
        assert digest is not None
        files.append((path, digest, _kind(path), *_scope(path, changes)))
    ledger = registry.file_digest(state_root, LEDGER_PATH)
    if ledger is not None:
        files.append((LEDGER_PATH, ledger, "ledger", "project", None))
    now = clock.now()
    with store.write() as conn:
        conn.executemany(
            "INSERT INTO delivery_changes (id, kind, status, title, contract,"
            " classification, path, revision, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, '{}', '{}', ?, 1, ?, ?)",
            [(*row, now, now) for row in change_rows],
        )
        for path, value in decisions:
            supersedes = value.get("supersedes")
            if supersedes is not None and supersedes not in loaded_ids:
                warnings.append(f"{path}: superseded decision {supersedes} was not loaded")
                supersedes = None
            conn.execute(
                "INSERT INTO delivery_decisions (id, scope_type, scope_id, path, digest, status,"
                " supersedes_id, question, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    value["id"],
                    value["scope"]["type"],
                    value["scope"]["id"],
                    path,
                    value["digest"],
                    value["status"],
                    supersedes,
                    value["question"],
                    now,
                ),
            )
        for path, digest, kind, scope_type, scope_id in files:
            registry.register(conn, path, digest, kind, scope_type, scope_id)
        registered = len(files)
        loaded = {"changes": len(changes), "decisions": len(decisions), "files": registered}
        journal.append(
            conn,
            actor="user",
            kind="delivery.doctor_rebuilt",
            subject=None,
            payload={"quarantined_db_sha256": quarantined_db_sha256, "loaded": loaded},
        )
    return {
        "part": "delivery",
        "loaded": loaded,
        "warnings": warnings,
        "notes": [
            f"tasks, baselines, checkpoints and change contracts are in {LEDGER_PATH}, which"
            " the rebuild registers but does not load: they are not recovered (changes get"
            " an empty contract)",
            *_plan_notes(state_root, changes),
        ],
    }


def _changes_on_disk(state_root: str) -> dict[str, tuple[str, str]]:
    """Change id → (folder, status): ``active`` under active/, ``archived`` under archive/."""
    found: dict[str, tuple[str, str]] = {}
    for plane, status in ((layout.CHANGES_ACTIVE, "active"), (CHANGES_ARCHIVE, "archived")):
        top = os.path.join(state_root, *plane.split("/"))
        names = sorted(os.listdir(top)) if os.path.isdir(top) else []
        for name in names:
            if not stat.S_ISDIR(os.lstat(os.path.join(top, name)).st_mode):
                continue
            change_id = name if status == "active" else name[ARCHIVE_DATE_LENGTH:]
            found[change_id] = (f"{plane}/{name}", status)
    return found


def _is_decision(path: str) -> bool:
    parts = path.split("/")
    return path.endswith(".json") and (
        path.startswith(layout.BASELINE_DECISIONS + "/")
        or (parts[0] == "changes" and len(parts) == 5 and parts[3] == "decisions")
    )


def _decision(
    state_root: str, path: str, changes: dict[str, tuple[str, str]]
) -> tuple[dict[str, Any], str | None]:
    """A decision file's value and why it cannot be loaded (None when it can)."""
    try:
        value = json.loads(registry.read_bytes(state_root, path) or b"")
        fits = canon.digest_excluding(value, "digest") == value.get("digest")
    except (ValueError, TypeError, AttributeError):
        return {}, "not a readable Decision Record"
    if not fits:
        return value, "fails its own digest"
    if f"{value.get('id')}.json" != path.rsplit("/", 1)[1]:
        return value, "its id differs from its file name"
    scope_type, scope_id = _scope(path, changes)
    if value.get("scope") != {"type": scope_type, "id": scope_id}:
        return value, "its scope differs from its folder"
    return value, None


def _scope(path: str, changes: dict[str, tuple[str, str]]) -> tuple[str, str | None]:
    for change_id, (folder, _) in changes.items():
        if path.startswith(folder + "/"):
            return "change", change_id
    return "baseline", None


def _kind(path: str) -> str:
    name = path.rsplit("/", 1)[1]
    if _is_decision(path):
        return "decision"
    return {
        "intent.md": "intent",
        "diagnosis.md": "diagnosis",
        "plan.json": "plan",
        "plan.md": "plan",
    }.get(name, "artifact")


def _title(state_root: str, folder: str) -> str | None:
    """The first Markdown heading of a change's intent.md."""
    data = registry.read_bytes(state_root, f"{folder}/intent.md") or b""
    for line in data.decode("utf-8", "replace").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip() or None
    return None


def _plan_notes(state_root: str, changes: dict[str, tuple[str, str]]) -> list[str]:
    notes = []
    for change_id, (folder, _) in sorted(changes.items()):
        try:
            plan = json.loads(registry.read_bytes(state_root, f"{folder}/plan.json") or b"")
            named = [task["id"] for task in plan["tasks"]]
        except (ValueError, KeyError, TypeError):
            continue
        notes.append(
            f"{change_id}: plan.json names tasks {', '.join(named)}; kept as a registered file,"
            " the tasks are in the ledger, not loaded"
        )
    return notes


def _exists(state_root: str, path: str) -> bool:
    return registry.read_bytes(state_root, path) is not None
