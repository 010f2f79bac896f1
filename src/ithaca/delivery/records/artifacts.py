"""``record artifact bind``: evidence bound to a scope by digest
(docs/delivery.md, "The record tool").

Two modes. **copy**: the body (``content``, UTF-8 up to 256 KiB, or a checkout file named
by ``source``, up to 16 MiB) is written into the scope's folder, under one of its allowed
subfolders (a change's ``research/ delta/ contexts/ test/ review/ documentation/
delivery/``; the baseline's ``specs/ docs/research/``), as a tracked file registered with
its digest; the stored path is relative to the state root. **reference**: neither is
given, and ``path`` names a checkout file outside ``.ithaca/`` that is bound where it
lies, by the digest it has now; the stored path is relative to the project root. A
``digest`` the caller states must match the bytes (``EVIDENCE_DIGEST_MISMATCH``).

Binding a path again supersedes its current artifact; binding the same bytes again is a
no-op. A task-scoped copy goes to the task's change folder.
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.contract import diagnostic, validation_error
from ithaca.delivery.records import changes, tasks
from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Outcome, Plan, Stale, TrackedWrite, unchanged
from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

CONTENT_BYTES = 256 * 1024
SOURCE_BYTES = 16 * 1024 * 1024

_COLUMNS = (
    "id",
    "kind",
    "scope_type",
    "scope_id",
    "path",
    "digest",
    "bytes",
    "mode",
    "status",
    "role",
)


def current_at(conn: sqlite3.Connection, mode: str, path: str) -> dict[str, Any] | None:
    """The current artifact bound at ``path`` in ``mode``, if any."""
    row = conn.execute(
        f"SELECT {', '.join(_COLUMNS)} FROM delivery_artifacts"
        " WHERE mode = ? AND path = ? AND status = 'current'",
        (mode, path),
    ).fetchone()
    return None if row is None else dict(zip(_COLUMNS, row, strict=True))


def bind(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    scope_type, scope_id, folder = _scope(conn, data["scope"], copying=_copies(data))
    body = None
    if _copies(data):
        assert folder is not None
        relative = _copy_target(data["path"], scope_type)
        body = _body(project, data)
        path = f"{folder}/{relative}" if folder else relative
        mode, digest, size = "copy", canon.digest_bytes(body), len(body)
    else:
        checkout = layout.checkout_file(project.root, project.state_root, data["path"], "/path")
        path = layout.relative(data["path"], "/path")
        mode = "reference"
        digest, size = _digest_file(checkout, data["path"])
    if data.get("digest") is not None and data["digest"] != digest:
        raise Corrupt(
            "EVIDENCE_DIGEST_MISMATCH",
            f"{data['path']} has digest {digest}, not the stated {data['digest']}",
            {"path": data["path"], "expected": data["digest"], "actual": digest},
        )
    artifact: dict[str, Any] = {
        "id": ids.new("art"),
        "kind": data["kind"],
        "scope_type": scope_type,
        "scope_id": scope_id,
        "path": path,
        "digest": digest,
        "bytes": size,
        "mode": mode,
        "status": "current",
        "role": data.get("role"),
    }
    previous = current_at(conn, mode, path)
    if previous is not None and all(
        previous[name] == artifact[name]
        for name in ("kind", "scope_type", "scope_id", "digest", "role")
    ):
        note = diagnostic("ARTIFACT_UNCHANGED", "info", f"{path} is already bound with these bytes")
        return unchanged("artifact.bind", {"artifact": previous}, [note])
    writes: tuple[TrackedWrite, ...] = ()
    if body is not None:
        writes = (TrackedWrite(path, body, "artifact", scope_type, scope_id),)
    superseded = None if previous is None else previous["id"]

    def commit(tx: sqlite3.Connection) -> Outcome:
        now_current = current_at(tx, mode, path)
        if (None if now_current is None else now_current["id"]) != superseded:
            raise Stale(path)
        if superseded is not None:
            tx.execute(
                "UPDATE delivery_artifacts SET status = 'superseded', superseded_by = ?"
                " WHERE id = ?",
                (artifact["id"], superseded),
            )
        tx.execute(
            f"INSERT INTO delivery_artifacts ({', '.join(_COLUMNS)}, created_at)"
            f" VALUES ({', '.join('?' * (len(_COLUMNS) + 1))})",
            (*(artifact[name] for name in _COLUMNS), clock.now()),
        )
        seq = journal.append(
            tx,
            actor="agent",
            kind="delivery.artifact_bound",
            subject=artifact["id"],
            payload={
                "id": artifact["id"],
                "kind": artifact["kind"],
                "scope": {"type": scope_type, "id": scope_id},
                "path": path,
                "mode": mode,
                "digest": digest,
                "supersedes": superseded,
            },
        )
        return Outcome({"artifact": {**artifact, "supersedes": superseded}}, seq)

    return Plan("artifact.bind", commit, writes, [])


def _copies(data: dict[str, Any]) -> bool:
    return "content" in data or "source" in data


def _scope(
    conn: sqlite3.Connection, scope: dict[str, Any], *, copying: bool
) -> tuple[str, str | None, str | None]:
    """(scope type, scope id, the state-root folder copies go to; '' for the baseline)."""
    if scope.get("baseline"):
        return "baseline", None, ""
    if "change_id" in scope:
        changes.writable(conn, scope["change_id"])
        return "change", scope["change_id"], layout.change_folder(scope["change_id"])
    task = tasks.load(conn, scope["task_id"])
    if task["change_id"] is None:
        if copying:
            raise InvalidInput(
                "SCOPE_MISMATCH",
                f"task {task['id']} belongs to no change, so there is no folder to copy into;"
                " bind the file by reference (no content or source)",
                {"task_id": task["id"]},
            )
        return "task", task["id"], None
    changes.writable(conn, task["change_id"])
    return "task", task["id"], layout.change_folder(task["change_id"])


def _copy_target(path: str, scope_type: str) -> str:
    relative = layout.relative(path, "/path")
    allowed = layout.BASELINE_SUBFOLDERS if scope_type == "baseline" else layout.CHANGE_SUBFOLDERS
    if relative.endswith("/") or not any(
        relative.startswith(folder) and len(relative) > len(folder) for folder in allowed
    ):
        raise layout.unsafe(
            "/path",
            path,
            "OUTSIDE_ALLOWED_FOLDERS",
            f"must name a file under one of {', '.join(allowed)}",
        )
    return relative


def _body(project: Project, data: dict[str, Any]) -> bytes:
    if "content" in data:
        body: bytes = data["content"].encode("utf-8")
        if len(body) > CONTENT_BYTES:
            raise validation_error(
                "/content", "TOO_LARGE", f"{len(body)} bytes; at most {CONTENT_BYTES} inline"
            )
        return body
    source = layout.checkout_file(project.root, project.state_root, data["source"], "/source")
    try:
        size = os.path.getsize(source)
        if size > SOURCE_BYTES:
            raise validation_error("/source", "TOO_LARGE", f"{size} bytes; at most {SOURCE_BYTES}")
        with open(source, "rb") as stream:
            return stream.read()
    except FileNotFoundError as exc:
        raise _missing(data["source"]) from exc


def _digest_file(absolute: str, named: str) -> tuple[str, int]:
    """SHA-256 and size of a referenced checkout file."""
    found = registry.hash_file(absolute)
    if found is None:
        raise _missing(named)
    return found


def _missing(named: str) -> NotFound:
    return NotFound("EVIDENCE_FILE_MISSING", f"{named} does not exist", {"path": named})
