"""Bindings: a validator snapshot pinned to an owner, vouched for by the journal.

``bind`` stores the snapshot blob and a binding row inside the owner's transaction; the
owner appends its event, whose payload names the binding as ``{binding_id, snapshotHash}``,
and ``attach_event`` records that event's ``seq`` in the row. The trusted digest is the one
in the hash-chained event, not the row: before a bound validator runs, ``check`` recomputes
the event's hash, confirms the next event still chains to it and that its payload names
this binding, owner, role and digest, then re-hashes and decodes the blob. Any failure is a
*cause* (``binding_mismatch``, ``blob_missing``, ``blob_mismatch``) and nothing runs.

How an event names the owner and role, so that owners may keep their own payload shapes:
the owner id is the event's subject or any string in its payload; the role is a word of the
event kind (``ulysses.final_validator_bound``), the ``role`` of the binding's object or of
the payload, or the start of a key leading to the binding's object (``primaryValidator``).
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound, invalid_field
from ithaca.validators import runtimes, snapshot

_ORIGIN_KEYS = {"notebookId": "notebook_id", "cellId": "cell_id", "cellVersion": "cell_version"}
_COLUMNS = (
    "binding_id, owner_kind, owner_id, role, notebook_id, cell_id, cell_version, language,"
    " mode, snapshot_digest, journal_seq, bound_at"
)
_NAMES = tuple(name.strip() for name in _COLUMNS.split(","))


def bind(
    conn: sqlite3.Connection,
    blobs: BlobStore,
    snapshot_value: dict[str, Any],
    *,
    owner_kind: str,
    owner_id: str,
    role: str,
    cell: dict[str, Any],
) -> dict[str, Any]:
    """Store the snapshot blob and a binding row, in the caller's write transaction.

    ``cell`` is the origin ``snapshot.build`` returned. The caller then appends its event
    and calls ``attach_event``. Returns the binding view."""
    for name, value in (("owner_kind", owner_kind), ("owner_id", owner_id), ("role", role)):
        if not isinstance(value, str) or not value:
            raise invalid_field(f"/{name}", "REQUIRED", f"{name} must be a non-empty string")
    row = {
        "binding_id": ids.new("bind"),
        "owner_kind": owner_kind,
        "owner_id": owner_id,
        "role": role,
        "notebook_id": cell["notebookId"],
        "cell_id": cell["cellId"],
        "cell_version": cell["cellVersion"],
        "language": snapshot_value["language"],
        "mode": snapshot_value["mode"],
        "snapshot_digest": blobs.put(snapshot.encode(snapshot_value)),
        "journal_seq": None,
        "bound_at": clock.now(),
    }
    conn.execute(
        f"INSERT INTO validator_bindings ({_COLUMNS}) VALUES ({', '.join('?' * len(row))})",
        tuple(row[name] for name in _NAMES),
    )
    return _view(row)


def attach_event(conn: sqlite3.Connection, binding_ids: list[str], journal_seq: int) -> None:
    """Record the event that vouches for each binding, in the caller's transaction.

    The event must already name each binding as ``check`` expects; an event that does
    not is refused here (``BINDING_EVENT_MISMATCH``) rather than found out at run time."""
    for binding_id in binding_ids:
        row = _row(conn, binding_id)
        if row is None:
            raise NotFound("BINDING_NOT_FOUND", f"no binding {binding_id}", {"id": binding_id})
        if row["journal_seq"] is not None:
            raise Corrupt(
                "BINDING_EVENT_MISMATCH",
                f"binding {binding_id} is already vouched for by event {row['journal_seq']}",
                {"id": binding_id, "seq": row["journal_seq"]},
            )
        row["journal_seq"] = journal_seq
        if not _journal_vouches(conn, row):
            raise Corrupt(
                "BINDING_EVENT_MISMATCH",
                f"event {journal_seq} does not name binding {binding_id} with its owner,"
                " role and snapshotHash",
                {"id": binding_id, "seq": journal_seq},
            )
        conn.execute(
            "UPDATE validator_bindings SET journal_seq = ? WHERE binding_id = ?",
            (journal_seq, binding_id),
        )


def check(
    conn: sqlite3.Connection, blobs: BlobStore, binding_id: str
) -> tuple[dict[str, Any] | None, str | None]:
    """The snapshot check (docs/ulysses.md, "Validators"): ``(snapshot, None)`` when the
    binding is intact, else ``(None, cause)``."""
    _, bound, cause = _checked(conn, blobs, binding_id)
    return bound, cause


def run(
    conn: sqlite3.Connection,
    blobs: BlobStore,
    binding_id: str,
    observed: Any,
    settings: dict[str, Any],
    *,
    project_root: str | None,
) -> dict[str, Any]:
    """Check the binding, then run its snapshot (never inside a write transaction).

    A failed check returns the runner's mismatch result and runs nothing (its
    ``snapshotHash`` is the row's digest, empty when the row itself is gone); a runtime
    that differs from the bound one adds the diagnostic ``runtime_drift {bound, current}``.
    """
    from ithaca.validators import runner  # the sandbox machinery, only when something runs

    row, bound, cause = _checked(conn, blobs, binding_id)
    digest = row["snapshot_digest"] if row else ""
    if bound is None:
        return runner.mismatch_result(digest, cause or "binding_mismatch")
    current = runtimes.measure(bound["language"], settings)
    diagnostics = []
    if current != bound["runtime"]:
        diagnostics.append(
            {
                "code": "runtime_drift",
                "message": f"bound to {_runtime_text(bound['runtime'])},"
                f" running on {_runtime_text(current)}",
                "bound": bound["runtime"],
                "current": current,
            }
        )
    return runner.run_snapshot(
        bound,
        observed,
        settings,
        project_root=project_root,
        snapshot_hash=digest,
        diagnostics=diagnostics,
    )


def record_run(conn: sqlite3.Connection, binding_id: str, result: dict[str, Any]) -> None:
    """Keep a bound run under its ``evidenceDigest``, in the caller's transaction (the
    same evidence recorded twice for one binding is kept once)."""
    if _row(conn, binding_id) is None:
        raise NotFound("BINDING_NOT_FOUND", f"no binding {binding_id}", {"id": binding_id})
    conn.execute(
        "INSERT OR IGNORE INTO validator_runs (evidence_digest, binding_id, pass, result_json, at)"
        " VALUES (?, ?, ?, ?, ?)",
        (
            result["evidenceDigest"],
            binding_id,
            1 if result["pass"] is True else 0,
            canon.canonical_text(result),
            clock.now(),
        ),
    )


def get(conn: sqlite3.Connection, binding_id: str) -> dict[str, Any]:
    """The binding view with its owner, role and vouching event; ``BINDING_NOT_FOUND``."""
    row = _row(conn, binding_id)
    if row is None:
        raise NotFound("BINDING_NOT_FOUND", f"no binding {binding_id}", {"id": binding_id})
    return {
        **_view(row),
        "owner_kind": row["owner_kind"],
        "owner_id": row["owner_id"],
        "role": row["role"],
        "journal_seq": row["journal_seq"],
        "boundAt": row["bound_at"],
    }


def _row(conn: sqlite3.Connection, binding_id: str) -> dict[str, Any] | None:
    found = conn.execute(
        f"SELECT {_COLUMNS} FROM validator_bindings WHERE binding_id = ?", (binding_id,)
    ).fetchone()
    return None if found is None else dict(zip(_NAMES, found, strict=True))


def _checked(
    conn: sqlite3.Connection, blobs: BlobStore, binding_id: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """``(row, snapshot, cause)``: steps 1–3 of the snapshot check, in order."""
    row = _row(conn, binding_id)
    if row is None or not _journal_vouches(conn, row):
        return row, None, "binding_mismatch"
    try:
        data = blobs.get(row["snapshot_digest"])
    except (NotFound, InvalidInput):  # a malformed digest names no blob
        return row, None, "blob_missing"
    except Corrupt:
        return row, None, "blob_mismatch"
    try:
        return row, snapshot.decode(data), None
    except Corrupt:
        return row, None, "blob_mismatch"


def _view(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "binding_id": row["binding_id"],
        "notebookId": row["notebook_id"],
        "cellId": row["cell_id"],
        "cellVersion": row["cell_version"],
        "snapshotHash": row["snapshot_digest"],
        "language": row["language"],
        "mode": row["mode"],
    }


def _journal_vouches(conn: sqlite3.Connection, row: dict[str, Any]) -> bool:
    """Whether the event at ``row['journal_seq']`` is intact, still chained to its
    successor, and names this binding with its owner, role and digest."""
    seq = row["journal_seq"]
    if seq is None:
        return False
    event = journal.verified_event(conn, seq)
    if event is None:
        return False
    return _names_binding(event["kind"], event["subject"], event["payload"], row)


def _names_binding(kind: str, subject: Any, payload: Any, row: dict[str, Any]) -> bool:
    role = row["role"]
    binding_found = False
    role_named = role in re.split(r"[._]", kind) or (
        isinstance(payload, dict) and payload.get("role") == role
    )
    owner_named = subject == row["owner_id"]
    pending: list[tuple[Any, tuple[str, ...]]] = [(payload, ())]
    while pending:
        value, path = pending.pop()
        if isinstance(value, str):
            owner_named = owner_named or value == row["owner_id"]
        elif isinstance(value, list):
            pending.extend((item, path) for item in value)
        elif isinstance(value, dict):
            if value.get("binding_id") == row["binding_id"]:
                if not _object_agrees(value, row):
                    return False
                binding_found = True
                role_named = (
                    role_named
                    or value.get("role") == role
                    or any(_key_names_role(key, role) for key in path)
                )
            pending.extend((item, (*path, key)) for key, item in value.items())
    return binding_found and owner_named and role_named


def _object_agrees(named: dict[str, Any], row: dict[str, Any]) -> bool:
    """The payload's object for this binding carries its digest and, where it names
    them, the same notebook, cell and version."""
    if named.get("snapshotHash") != row["snapshot_digest"]:
        return False
    return all(named[key] == row[column] for key, column in _ORIGIN_KEYS.items() if key in named)


def _key_names_role(key: str, role: str) -> bool:
    """``primary``, ``primaryValidator`` and ``primary_validator`` name the role primary."""
    if not key.startswith(role):
        return False
    rest = key[len(role) :]
    return rest == "" or rest[0] == "_" or rest[0].isupper()


def _runtime_text(runtime: dict[str, Any]) -> str:
    return f"{runtime.get('name')} {runtime.get('version')}"
