"""Verification runs as rows: recorded with their journal event, found again by tree.

A run is kept with the content digest of the tree it ran on, so the critic and
``ithaca verify`` find a run for the project as it is now by that digest alone; a
passing run is reused while the digest (and the runner configuration) is unchanged.
The per-test outcomes go to a blob, named in the row. Standard library and the kernel
only: the Stop hook records the run it made itself.
"""

from __future__ import annotations

from ithaca.kernel import canon, ids, journal

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

    from ithaca.kernel.blobs import BlobStore
    from ithaca.verification.run import Outcome
    from ithaca.verification.runners import Runner

EVENT = "verify.run"
COUNTS = ("collected", "passed", "failed", "errors", "skipped")
COLUMNS = (
    "seq, id, started_at, finished_at, session_id, actor, runner, command_json, tree_digest,"
    " config_digest, status, exit_code, collected, passed, failed, errors, skipped,"
    " duration_ms, tests_blob, reason"
)
# A run whose result stands for its tree: one that could not finish says nothing of it.
SETTLED = ("passed", "failed", "no_tests")


def record(
    conn: sqlite3.Connection,
    blobs: BlobStore,
    *,
    runner: Runner,
    outcome: Outcome,
    tree_digest: str,
    config_digest: str,
    started_at: str,
    finished_at: str,
    session_id: str | None,
    actor: str,
) -> dict[str, Any]:
    """Insert one run and its ``verify.run`` event; the caller holds the transaction."""
    tests_blob = blobs.put(canon.canonical(outcome.tests)) if outcome.tests else None
    counts = outcome.counts or {}
    run = {
        "id": ids.new("vrf"),
        "started_at": started_at,
        "finished_at": finished_at,
        "session_id": session_id,
        "actor": actor,
        "runner": runner.name,
        "command": list(runner.command),
        "tree_digest": tree_digest,
        "config_digest": config_digest,
        "status": outcome.status,
        "exit_code": outcome.exit_code,
        "counts": outcome.counts,
        "duration_ms": int(outcome.duration_s * 1000),
        "tests_blob": tests_blob,
        "reason": outcome.reason,
    }
    conn.execute(
        f"INSERT INTO verification_runs ({COLUMNS.split(', ', 1)[1]})"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            run["id"],
            started_at,
            finished_at,
            session_id,
            actor,
            runner.name,
            canon.canonical_text(run["command"]),
            tree_digest,
            config_digest,
            outcome.status,
            outcome.exit_code,
            *(counts.get(name) for name in COUNTS),
            run["duration_ms"],
            tests_blob,
            outcome.reason,
        ),
    )
    payload = {key: value for key, value in run.items() if key not in ("session_id", "actor")}
    run["seq"] = journal.append(conn, actor=actor, kind=EVENT, subject=session_id, payload=payload)
    return run


def settled_for(
    conn: sqlite3.Connection, tree_digest: str, runner: str, config_digest: str
) -> dict[str, Any] | None:
    """The latest run that settled on this tree with this runner and configuration."""
    found = conn.execute(
        f"SELECT {COLUMNS} FROM verification_runs WHERE tree_digest = ? AND runner = ?"
        " AND config_digest = ? AND status IN ('passed','failed','no_tests')"
        " ORDER BY seq DESC LIMIT 1",
        (tree_digest, runner, config_digest),
    ).fetchone()
    return _row(found)


def latest(conn: sqlite3.Connection, runner: str | None = None) -> dict[str, Any] | None:
    """The latest run (of ``runner``, when given)."""
    if runner is None:
        found = conn.execute(
            f"SELECT {COLUMNS} FROM verification_runs ORDER BY seq DESC LIMIT 1"
        ).fetchone()
    else:
        found = conn.execute(
            f"SELECT {COLUMNS} FROM verification_runs WHERE runner = ? ORDER BY seq DESC LIMIT 1",
            (runner,),
        ).fetchone()
    return _row(found)


def by_id(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    found = conn.execute(
        f"SELECT {COLUMNS} FROM verification_runs WHERE id = ?", (run_id,)
    ).fetchone()
    return _row(found)


def tests(blobs: BlobStore, run: dict[str, Any] | None) -> dict[str, str]:
    """A run's per-test outcomes ({} when it kept none)."""
    if run is None or not run["tests_blob"]:
        return {}
    from ithaca.kernel import lightjson

    found = lightjson.loads(blobs.get(run["tests_blob"]).decode("utf-8"))
    return found if isinstance(found, dict) else {}


def accepted_after(conn: sqlite3.Connection, config_digest: str, seq: int) -> bool:
    """Whether the user accepted this runner configuration after journal ``seq``."""
    found = conn.execute(
        "SELECT 1 FROM verification_accepted WHERE config_digest = ? AND seq > ?",
        (config_digest, seq),
    ).fetchone()
    return found is not None


def _row(found: tuple[Any, ...] | None) -> dict[str, Any] | None:
    if found is None:
        return None
    names = [name.strip() for name in COLUMNS.split(",")]
    row = dict(zip(names, found, strict=True))
    from ithaca.kernel import lightjson

    row["command"] = lightjson.loads(row.pop("command_json"))
    row["counts"] = None if row["collected"] is None else {name: row.pop(name) for name in COUNTS}
    for name in COUNTS:
        row.pop(name, None)
    return row
