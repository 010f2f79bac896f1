"""Keeping the store in step with the shipped base set and the team's protocol files.

Seeds: a one-``SELECT`` fast path compares the stored seed-set digest with the code's;
only on a difference does one ``BEGIN IMMEDIATE`` transaction re-check and apply the
change, so reopening a project causes no churn and concurrent openers produce one
``protocols.seeds_reconciled`` event. An override of a base id survives reconciliation;
an override of a retired seed becomes a plain user record.

Files: ``.ithaca/protocols/<id>.json`` are tracked team rules (``kernel.regular.rule_files``
says which entries are: the definition the effect check uses too). They are re-read
whenever the listing (each name and the SHA-256 of its bytes, never a size or a time)
changes. A broken or conflicting file leaves the previous rows alone and is remembered,
so every lookup fails until the file is fixed: a broken team rule is corrupt authority
and is never skipped. So is a rule file that is no singly linked regular file (a
symbolic link, even to an identical copy, a second hard link, a FIFO, a folder): it is
refused as ``PROTOCOL_FILE_INVALID`` (problem ``NOT_REGULAR``), never read through and
never dropped.
"""

from __future__ import annotations

import os

from ithaca.kernel import canon, journal, lightjson, regular
from ithaca.kernel.errors import Conflict, Corrupt, IthacaError
from ithaca.protocols import records, seeds

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any


def stored_state(conn: sqlite3.Connection) -> tuple[int, str | None, dict[str, Any]]:
    """``(revision, seed_set_digest, files state)`` from the one-row state table."""
    revision, seed_digest, files_listing = conn.execute(
        "SELECT revision, seed_set_digest, files_listing FROM protocol_state"
    ).fetchone()
    return revision, seed_digest, lightjson.loads(files_listing) if files_listing else {}


def seeds_in_sync(conn: sqlite3.Connection) -> bool:
    row = conn.execute("SELECT seed_set_digest FROM protocol_state").fetchone()
    return bool(row) and row[0] == seeds.seed_set_digest()


def reconcile_seeds(conn: sqlite3.Connection) -> dict[str, Any] | None:
    """Apply the shipped base set; the caller holds the write transaction.

    Returns the journal payload, or ``None`` when the store was already in sync.
    """
    if seeds_in_sync(conn):
        return None
    shipped = {record["id"]: record for record in seeds.BASE_PROTOCOLS}
    stored = {
        pid: content_hash
        for pid, content_hash in conn.execute("SELECT id, content_hash FROM protocol_seeds")
    }
    report: dict[str, Any] = {
        "seedSetDigest": seeds.seed_set_digest(),
        "added": [],
        "updated": [],
        "removed": [],
        "orphanedOverrides": [],
        "drifted": [],
    }
    for pid, seed in sorted(shipped.items()):
        seed_hash = seeds.seed_hash(seed)
        if stored.get(pid) != seed_hash:
            conn.execute(
                "INSERT OR REPLACE INTO protocol_seeds (id, record_json, content_hash, updated_at)"
                " VALUES (?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
                (pid, canon.canonical_text(seed), seed_hash),
            )
        row = conn.execute(
            "SELECT scope, overrides_base, base_hash, content_hash FROM protocols WHERE id = ?",
            (pid,),
        ).fetchone()
        if row is None:
            records.write_row(conn, seed, scope="base", source="seed")
            report["added"].append(pid)
        elif row[0] == "base":
            if row[3] != seed_hash:
                records.write_row(conn, seed, scope="base", source="seed")
                report["updated"].append(pid)
        elif row[1] and row[2] != seed_hash:
            report["drifted"].append(pid)
    for pid in sorted(set(stored) - set(shipped)):
        conn.execute("DELETE FROM protocol_seeds WHERE id = ?", (pid,))
    for pid, scope, overrides in conn.execute(
        "SELECT id, scope, overrides_base FROM protocols WHERE scope = 'base' OR overrides_base = 1"
    ).fetchall():
        if pid in shipped:
            continue
        if scope == "base":
            conn.execute("DELETE FROM protocols WHERE id = ?", (pid,))
            report["removed"].append(pid)
        elif overrides:
            conn.execute(
                "UPDATE protocols SET overrides_base = 0, base_hash = NULL WHERE id = ?", (pid,)
            )
            report["orphanedOverrides"].append(pid)
    conn.execute("UPDATE protocol_state SET seed_set_digest = ?", (report["seedSetDigest"],))
    journal.append(
        conn, actor="system", kind="protocols.seeds_reconciled", subject=None, payload=report
    )
    return report


def files_listing(folder: str) -> list[list[Any]]:
    """``[name, token]`` of each rule file, sorted (the token is the SHA-256 of its bytes,
    or what stands there instead of a regular file); empty without a folder. A folder that
    is no real folder is one entry, ``["", kind]``."""
    return [[name, token] for name, token, _ in _rule_files(folder)]


def _rule_files(folder: str) -> list[tuple[str, str | None, bytes | None]]:
    """``(name, token, bytes)`` of each rule file (``kernel.regular``)."""
    kind, names = regular.rule_files(folder)
    if kind is not None:
        return [("", kind, None)]
    return [(name, *regular.read(os.path.join(folder, name))) for name in names]


def files_changed(conn: sqlite3.Connection, folder: str) -> bool:
    _, _, state = stored_state(conn)
    return state.get("listing") != files_listing(folder)


def file_error(conn: sqlite3.Connection) -> IthacaError | None:
    """The remembered error of a broken protocol file, if any."""
    return stored_error(stored_state(conn)[2])


def stored_error(state: dict[str, Any]) -> IthacaError | None:
    """The error remembered in a files state (``stored_state``), if any."""
    error = state.get("error")
    if not error:
        return None
    cls = Conflict if error["code"] == "PROTOCOL_FILE_CONFLICT" else Corrupt
    return cls(error["code"], error["message"], error["details"])


def reconcile_files(
    conn: sqlite3.Connection, folder: str, project_root: str, workflows: frozenset[str]
) -> dict[str, Any] | None:
    """Apply the protocol files; the caller holds the write transaction.

    Returns the journal payload when rows changed, ``None`` otherwise. A broken file is
    remembered (not raised): lookups raise it through ``file_error``.
    """
    from ithaca.protocols import validate  # hooks only ask whether files changed

    listing = files_listing(folder)
    _, _, state = stored_state(conn)
    if state.get("listing") == listing:
        return None
    try:
        wanted, files_digest = read_files(conn, folder, project_root, workflows)
    except IthacaError as exc:
        _remember(conn, listing, state.get("filesDigest"), exc.to_dict())
        return None
    report: dict[str, Any] = {
        "filesDigest": files_digest,
        "added": [],
        "updated": [],
        "removed": [],
    }
    current = {
        pid: content_hash
        for pid, content_hash in conn.execute(
            "SELECT id, content_hash FROM protocols WHERE source = 'file'"
        )
    }
    seed_rows = records.seed_records(conn)
    for pid, (record, rel_path) in sorted(wanted.items()):
        scope = "user"
        base_hash = seeds.seed_hash(seed_rows[pid]) if pid in seed_rows else None
        new_hash = validate.record_hash(dict(record, scope=scope))
        if current.get(pid) == new_hash:
            continue
        records.write_row(
            conn,
            record,
            scope=scope,
            source="file",
            overrides_base=base_hash is not None,
            base_hash=base_hash,
            file_path=rel_path,
        )
        report["added" if pid not in current else "updated"].append(pid)
    for pid in sorted(set(current) - set(wanted)):
        conn.execute("DELETE FROM protocols WHERE id = ?", (pid,))
        if pid in seed_rows:
            records.write_row(conn, seed_rows[pid], scope="base", source="seed")
        report["removed"].append(pid)
    _remember(conn, listing, files_digest, None)
    if report["added"] or report["updated"] or report["removed"]:
        journal.append(
            conn, actor="system", kind="protocols.files_reconciled", subject=None, payload=report
        )
        return report
    return None


def _remember(
    conn: sqlite3.Connection,
    listing: list[list[Any]],
    files_digest: str | None,
    error: dict[str, Any] | None,
) -> None:
    state = {"listing": listing, "filesDigest": files_digest, "error": error}
    conn.execute(
        "UPDATE protocol_state SET files_digest = ?, files_listing = ?",
        (files_digest, lightjson.dumps(state, sort_keys=True)),
    )


def read_files(
    conn: sqlite3.Connection, folder: str, project_root: str, workflows: frozenset[str]
) -> tuple[dict[str, tuple[dict[str, Any], str]], str]:
    """Every protocol file validated, by id (``(record, path)``), and the files' digest;
    raises ``PROTOCOL_FILE_INVALID`` or ``PROTOCOL_FILE_CONFLICT`` for a broken one."""
    from ithaca.kernel import states
    from ithaca.protocols import validate
    from ithaca.protocols.overrides import check_override

    wanted: dict[str, tuple[dict[str, Any], str]] = {}
    digests = []
    seed_rows = records.seed_records(conn)
    sqlite_ids = {
        pid for (pid,) in conn.execute("SELECT id FROM protocols WHERE source = 'sqlite'")
    }
    for name, token, data in _rule_files(folder):
        path = os.path.join(folder, name)
        rel_path = os.path.relpath(path, project_root).replace(os.sep, "/")
        if data is None:
            raise _not_regular(rel_path, token)
        digests.append({"path": rel_path, "sha256": canon.digest_bytes(data)})
        try:
            raw = lightjson.loads(data)
            record = validate.validate_record(
                raw,
                workflows=workflows,
                known_states=states.KNOWN_STATES,
                allow_reserved=isinstance(raw, dict) and raw.get("id") in seed_rows,
            )
            if record["id"] != name[: -len(".json")]:
                raise Corrupt(
                    "PROTOCOL_FILE_INVALID",
                    f"{rel_path}: the file name must be the protocol id ({record['id']}.json)",
                    {"path": rel_path},
                )
            if record["id"] in seed_rows:
                check_override(seed_rows[record["id"]], record)
        except ValueError as exc:
            raise _invalid_file(rel_path, "INVALID_JSON", str(exc)) from exc
        except IthacaError as exc:
            if exc.code == "PROTOCOL_FILE_INVALID":
                raise
            raise _invalid_file(rel_path, exc.code, exc.message) from exc
        if record["id"] in sqlite_ids:
            raise Conflict(
                "PROTOCOL_FILE_CONFLICT",
                f"{rel_path}: protocol {record['id']} already exists as a stored record",
                {"path": rel_path, "protocolId": record["id"]},
            )
        wanted[record["id"]] = (record, rel_path)
    return wanted, canon.digest(digests)


def _not_regular(rel_path: str, token: str | None) -> Corrupt:
    what = regular.KINDS.get(str(token), "gone")
    return _invalid_file(
        rel_path,
        "NOT_REGULAR",
        f"is {what}, not a regular file with one name; a team rule is read only from one"
        " (put the file itself there)",
    )


def _invalid_file(rel_path: str, problem: str, message: str) -> Corrupt:
    return Corrupt(
        "PROTOCOL_FILE_INVALID",
        f"{rel_path}: {message}",
        {"path": rel_path, "problem": problem},
    )
