"""Protocol rows as records: reading, verifying and shaping them for bundles.

Every row is re-validated and its ``content_hash`` re-computed when it is read for a
lookup. A row that fails either is corrupt authority and fails the lookup with
``STORE_CORRUPT``; it never degrades to an empty selector, which would make it a
global rule.
"""

from __future__ import annotations

from ithaca.kernel import clock, lightjson
from ithaca.kernel.connection import sqlite
from ithaca.kernel.errors import Corrupt, IthacaError

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

COLUMNS = (
    "id, name, description, scope, enabled, priority, selector_json, rules_json,"
    " constraints_json, source, tags_json, overrides_base, base_hash, file_path,"
    " content_hash, created_at, updated_at"
)


def row_to_record(row: tuple[Any, ...]) -> dict[str, Any]:
    """A stored row as a record dict (no verification)."""
    (
        pid,
        name,
        description,
        scope,
        enabled,
        priority,
        selector_json,
        rules_json,
        constraints_json,
        source,
        tags_json,
        overrides_base,
        base_hash,
        file_path,
        content_hash,
        created_at,
        updated_at,
    ) = row
    return {
        "id": pid,
        "name": name,
        "description": description,
        "scope": scope,
        "enabled": bool(enabled),
        "priority": priority,
        "selector": lightjson.loads(selector_json),
        "rules": lightjson.loads(rules_json),
        "constraints": lightjson.loads(constraints_json),
        "tags": lightjson.loads(tags_json),
        "source": source,
        "overridesBase": bool(overrides_base),
        "baseHash": base_hash,
        "filePath": file_path,
        "contentHash": content_hash,
        "createdAt": created_at,
        "updatedAt": updated_at,
    }


def hashed_view(record: dict[str, Any]) -> dict[str, Any]:
    from ithaca.protocols import validate  # not on a hook's path through cached bundles

    return {key: record[key] for key in validate.HASHED_FIELDS}


def verify(record: dict[str, Any], *, workflows: frozenset[str], states: frozenset[str]) -> None:
    """Raise ``STORE_CORRUPT`` unless the record is well formed and its hash matches."""
    from ithaca.protocols import validate

    pid = record.get("id")
    try:
        raw = {key: record[key] for key in validate.INPUT_FIELDS}
        validate.validate_record(raw, workflows=workflows, known_states=states, allow_reserved=True)
    except (IthacaError, KeyError) as exc:
        problem = exc.code if isinstance(exc, IthacaError) else "MISSING_FIELD"
        raise corrupt(pid, problem) from exc
    if validate.record_hash(hashed_view(record)) != record.get("contentHash"):
        raise corrupt(pid, "HASH_MISMATCH")


def corrupt(protocol_id: Any, problem: str) -> Corrupt:
    return Corrupt(
        "STORE_CORRUPT",
        f"protocol {protocol_id} is corrupt ({problem}); run `ithaca doctor`",
        {"protocolId": protocol_id, "problem": problem},
    )


def read_rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """Every protocol row as stored, in bundle order (priority DESC, id ASC)."""
    try:
        return conn.execute(
            f"SELECT {COLUMNS} FROM protocols ORDER BY priority DESC, id ASC"
        ).fetchall()
    except sqlite.DatabaseError as exc:
        raise Corrupt("STORE_CORRUPT", f"protocols table unreadable: {exc}", {}) from exc


def read_all(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every protocol row as a record, in bundle order, unverified."""
    records = []
    for row in read_rows(conn):
        try:
            records.append(row_to_record(row))
        except (ValueError, TypeError) as exc:
            raise corrupt(row[0], "INVALID_JSON") from exc
    return records


def read_one(conn: sqlite3.Connection, protocol_id: str) -> dict[str, Any] | None:
    row = conn.execute(f"SELECT {COLUMNS} FROM protocols WHERE id = ?", (protocol_id,)).fetchone()
    return row_to_record(row) if row else None


def read_many(conn: sqlite3.Connection, protocol_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The rows with these ids, by id, in one query."""
    marks = ",".join("?" * len(protocol_ids))
    rows = conn.execute(f"SELECT {COLUMNS} FROM protocols WHERE id IN ({marks})", protocol_ids)
    return {row[0]: row_to_record(row) for row in rows}


def counts(conn: sqlite3.Connection) -> dict[str, int]:
    """How many base protocols there are, and user protocols enabled and disabled."""
    by_kind = dict(
        conn.execute("SELECT scope || ':' || enabled, count(*) FROM protocols GROUP BY 1")
    )
    return {
        "base": by_kind.get("base:1", 0),
        "userEnabled": by_kind.get("user:1", 0),
        "userDisabled": by_kind.get("user:0", 0),
    }


def recent_sessions(conn: sqlite3.Connection, limit: int = 5) -> list[dict[str, Any]]:
    """The host sessions that most recently admitted a prompt, and whether each loaded
    its bundle."""
    rows = conn.execute(
        "SELECT host_session_id, current_event_id, loaded_digest IS NOT NULL"
        " FROM protocol_sessions ORDER BY updated_at DESC LIMIT ?",
        (limit,),
    ).fetchall()
    return [
        {"hostSessionId": sid, "currentEventId": eid, "bundleLoaded": bool(loaded)}
        for sid, eid, loaded in rows
    ]


def seed_records(conn: sqlite3.Connection) -> dict[str, dict[str, Any]]:
    """The base set as last reconciled, by id."""
    return {
        pid: lightjson.loads(record_json)
        for pid, record_json in conn.execute("SELECT id, record_json FROM protocol_seeds")
    }


def effective_constraints(
    record: dict[str, Any], seeds: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """An override keeps the seed's constraints first, then adds its own."""
    if record.get("overridesBase") and record["id"] in seeds:
        return list(seeds[record["id"]]["constraints"]) + list(record["constraints"])
    return list(record["constraints"])


def bundle_shape(record: dict[str, Any], seeds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The protocol object of a bundle (docs/protocols.md, "How a turn works")."""
    return {
        "id": record["id"],
        "name": record["name"],
        "description": record["description"],
        "scope": record["scope"],
        "enabled": record["enabled"],
        "priority": record["priority"],
        "selector": record["selector"],
        "rules": record["rules"],
        "constraints": effective_constraints(record, seeds),
        "source": record["source"],
        "tags": record["tags"],
    }


def public_shape(record: dict[str, Any], seeds: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A record as ``get`` and ``list`` return it."""
    shaped = bundle_shape(record, seeds)
    shaped["constraints"] = record["constraints"]
    shaped.update(
        {
            "overridesBase": record["overridesBase"],
            "baseHash": record["baseHash"],
            "filePath": record["filePath"],
            "contentHash": record["contentHash"],
            "effectiveConstraints": effective_constraints(record, seeds),
            "createdAt": record["createdAt"],
            "updatedAt": record["updatedAt"],
        }
    )
    return shaped


def write_row(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    *,
    scope: str,
    source: str,
    overrides_base: bool = False,
    base_hash: str | None = None,
    file_path: str | None = None,
) -> dict[str, Any]:
    """Insert or replace one row from a validated record; returns the stored record."""
    from ithaca.protocols import validate

    now = clock.now()
    full = dict(record, scope=scope)
    content_hash = validate.record_hash(hashed_view(full))
    existing = conn.execute(
        "SELECT created_at FROM protocols WHERE id = ?", (full["id"],)
    ).fetchone()
    created_at = existing[0] if existing else now
    conn.execute(
        f"INSERT OR REPLACE INTO protocols ({COLUMNS}) VALUES"
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            full["id"],
            full["name"],
            full["description"],
            scope,
            int(full["enabled"]),
            full["priority"],
            _json(full["selector"]),
            _json(full["rules"]),
            _json(full["constraints"]),
            source,
            _json(full["tags"]),
            int(overrides_base),
            base_hash,
            file_path,
            content_hash,
            created_at,
            now,
        ),
    )
    stored = read_one(conn, full["id"])
    assert stored is not None
    return stored


def _json(value: Any) -> str:
    return lightjson.dumps(value, ensure_ascii=False, separators=(",", ":"))
