"""The protocols part's doctor check: every row verified, files readable, seeds current."""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel import states
from ithaca.kernel.config import load
from ithaca.kernel.errors import IthacaError
from ithaca.protocols import reconcile, records, seeds


def check(project: Any, conn: sqlite3.Connection) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = []
    try:
        workflows = seeds.known_workflows(load(project.state_root))
    except IthacaError as exc:
        return [{"code": exc.code, "severity": "error", "message": exc.message}]
    for record in records.read_all(conn):
        try:
            records.verify(record, workflows=workflows, states=states.KNOWN_STATES)
        except IthacaError as exc:
            findings.append(
                {
                    "code": exc.code,
                    "severity": "error",
                    "message": exc.message,
                    "subject": record["id"],
                }
            )
    error = reconcile.file_error(conn)
    if error is not None:
        findings.append({"code": error.code, "severity": "error", "message": error.message})
    if not reconcile.seeds_in_sync(conn):
        findings.append(
            {
                "code": "SEEDS_OUT_OF_DATE",
                "severity": "warning",
                "message": "the base protocols were not reconciled since the last upgrade",
            }
        )
    return findings
