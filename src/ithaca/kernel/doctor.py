"""``ithaca doctor``: integrity of the store, the journal chain and each part's state.

The kernel checks what it owns (SQLite's ``integrity_check``, the schema version, the
hash chain); each part contributes a check through the provider registry, so a later
part adds its own without editing this module. Checking never writes; ``repair``
migrates an old schema after a backup and runs each part's repair (lesson files
rewritten from the index, for one).
"""

from __future__ import annotations

import sqlite3
from importlib import import_module
from typing import Any

from ithaca.kernel import journal
from ithaca.kernel.migrations import LATEST_VERSION
from ithaca.kernel.store import Store

# Each provider is "module:function" taking (project, conn) and returning findings.
PROVIDERS: tuple[str, ...] = ("ithaca.protocols.health:check", "ithaca.ulysses.knowledge:check")


# Each repair is "module:function" taking (project, conn) and returning what it restored.
REPAIRS: tuple[str, ...] = ("ithaca.ulysses.knowledge:restore_missing_files",)


def repair(project: Any, store: Store) -> list[str]:
    """Migrate an old schema (after a backup), then let each part restore what it can."""
    done = store.migrate()
    conn = store.connection()
    for provider in REPAIRS:
        module, _, name = provider.partition(":")
        done.extend(getattr(import_module(module), name)(project, conn))
    return done


def check(project: Any, store: Store) -> dict[str, Any]:
    """Every finding as ``{code, severity, message, subject?}``; ``ok`` when none is an error."""
    conn = store.connection()
    findings: list[dict[str, Any]] = []
    try:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    except sqlite3.DatabaseError as exc:
        integrity = [str(exc)]
    if integrity != ["ok"]:
        findings.append(_finding("INTEGRITY_FAILED", "error", "; ".join(integrity)))
    version = store.version()
    if version < LATEST_VERSION:
        findings.append(
            _finding(
                "STATE_NEEDS_MIGRATION",
                "error",
                f"schema {version} < {LATEST_VERSION}; run `ithaca doctor --repair`",
            )
        )
    else:
        for problem in journal.verify(conn):
            findings.append(
                _finding(
                    "JOURNAL_CHAIN_BROKEN",
                    "error",
                    f"journal row {problem.seq}: {problem.problem}",
                    subject=str(problem.seq),
                    seq=problem.seq,
                )
            )
        for provider in PROVIDERS:
            module, _, name = provider.partition(":")
            findings.extend(getattr(import_module(module), name)(project, conn))
    events = conn.execute("SELECT count(*) FROM journal").fetchone()[0] if version else 0
    return {
        "ok": not any(f["severity"] == "error" for f in findings),
        "schemaVersion": version,
        "latestVersion": LATEST_VERSION,
        "journalEvents": events,
        "findings": findings,
    }


def _finding(code: str, severity: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"code": code, "severity": severity, "message": message, **extra}
