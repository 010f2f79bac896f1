"""Checkpoint evidence, pinned to the bytes on disk now (docs/delivery.md, "checkpoint").

A checkpoint claims a stage is done *because of* some files; the claim is only worth
something if those are the files it names. So every entry is re-read at acceptance:
an artifact's registered digest and any digest the caller states must match the bytes
(``EVIDENCE_DIGEST_MISMATCH``, ``EVIDENCE_FILE_MISSING`` otherwise), and a bare path is
pinned at its current digest with the warning ``EVIDENCE_UNBOUND``: nobody vouched for
those bytes, but later readers can still tell whether they moved.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.units import registry
from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt, NotFound
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

ROLES = ("test_report", "review_verdict", "research", "worker_outcome", "other")
# The role an artifact plays when the evidence entry names none.
_ARTIFACT_ROLES = {
    "test_report": "test_report",
    "review_report": "review_verdict",
    "research": "research",
    "task_outcome": "worker_outcome",
}


def pinned(
    conn: sqlite3.Connection, project: Project, items: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[Diagnostic]]:
    """Every evidence entry pinned to the digest its bytes have now."""
    resolved = []
    found: list[Diagnostic] = []
    for index, item in enumerate(items):
        pointer = f"/payload/evidence/{index}"
        if "artifact_id" in item:
            entry = _artifact_evidence(conn, project, item, pointer)
        else:
            entry = _path_evidence(project, item, pointer)
            if "digest" not in item:
                found.append(
                    diagnostic(
                        "EVIDENCE_UNBOUND",
                        "warning",
                        f"{entry['path']} was pinned at its current digest; bind it with"
                        " `record artifact bind`, or state the digest you checked",
                        entry["path"],
                    )
                )
        if "note" in item:
            entry["note"] = item["note"]
        resolved.append(entry)
    return resolved, found


def _artifact_evidence(
    conn: sqlite3.Connection, project: Project, item: dict[str, Any], pointer: str
) -> dict[str, Any]:
    row = conn.execute(
        "SELECT kind, path, digest, mode FROM delivery_artifacts WHERE id = ?",
        (item["artifact_id"],),
    ).fetchone()
    if row is None:
        raise NotFound(
            "EVIDENCE_NOT_FOUND",
            f"{pointer}: no artifact {item['artifact_id']}",
            {"pointer": pointer, "artifact_id": item["artifact_id"]},
        )
    kind, path, digest, mode = row
    if "digest" in item and item["digest"] != digest:
        raise _mismatch(pointer, path, item["digest"], digest)
    if mode == "copy":
        data = registry.read_bytes(project.state_root, path)
        measured = None if data is None else (canon.digest_bytes(data), len(data))
    else:
        absolute = layout.checkout_file(project.root, project.state_root, path, pointer)
        measured = registry.hash_file(absolute)
    if measured is None:
        raise _file_missing(pointer, path)
    if measured[0] != digest:
        raise _mismatch(pointer, path, digest, measured[0])
    return {
        "artifact_id": item["artifact_id"],
        "path": path,
        "mode": mode,
        "digest": digest,
        "bytes": measured[1],
        "role": item.get("role") or _ARTIFACT_ROLES.get(kind, "other"),
    }


def _path_evidence(project: Project, item: dict[str, Any], pointer: str) -> dict[str, Any]:
    path = layout.relative(item["path"], f"{pointer}/path")
    absolute = layout.checkout_file(project.root, project.state_root, path, f"{pointer}/path")
    measured = registry.hash_file(absolute)
    if measured is None:
        raise _file_missing(pointer, path)
    if "digest" in item and item["digest"] != measured[0]:
        raise _mismatch(pointer, path, item["digest"], measured[0])
    return {
        "path": path,
        "digest": measured[0],
        "bytes": measured[1],
        "role": item.get("role", "other"),
    }


def _mismatch(pointer: str, path: str, expected: str, actual: str) -> Corrupt:
    return Corrupt(
        "EVIDENCE_DIGEST_MISMATCH",
        f"{pointer}: {path} has digest {actual}, not {expected}; its bytes changed",
        {"pointer": pointer, "path": path, "expected": expected, "actual": actual},
    )


def _file_missing(pointer: str, path: str) -> NotFound:
    return NotFound(
        "EVIDENCE_FILE_MISSING",
        f"{pointer}: {path} does not exist",
        {"pointer": pointer, "path": path},
    )
