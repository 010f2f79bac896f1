"""The fixed schemas ``ithaca init`` ships under ``.ithaca/reports/templates/``.

A Worker Packet names the schema its output must satisfy; the default one lives in the
project, tracked, so a team reads the same contract its workers are held to, and the
file is registered like every other file Ithaca writes, so an edit behind Ithaca's back
shows in ``doctor``. Shipping is idempotent: a file that already holds these bytes is
left alone and journals nothing.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.units import registry
from ithaca.delivery.units.plans import Outcome, Plan, TrackedWrite
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel import canon, journal

TASK_OUTPUT_PATH = "reports/templates/task-output.schema.json"

# The default worker output (docs/delivery.md, "Execution: session and Worker Packets").
TASK_OUTPUT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ithaca task output",
    "type": "object",
    "required": ["task_id", "status", "summary", "changed_files", "verification"],
    "additionalProperties": False,
    "properties": {
        "task_id": {"type": "string"},
        "status": {"enum": ["completed", "blocked"]},
        "summary": {"type": "string"},
        "changed_files": {"type": "array", "items": {"type": "string"}},
        "verification": {
            "type": "object",
            "required": ["argv", "exit_code"],
            "additionalProperties": False,
            "properties": {
                "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "exit_code": {"type": "integer"},
                "output_ref": {"type": "string"},
            },
        },
        "commit": {"type": "string"},
    },
}


def ship(units: Units) -> list[str]:
    """Write the templates that are missing or differ; returns the paths written."""
    data = canon.canonical(TASK_OUTPUT_SCHEMA) + b"\n"
    write = TrackedWrite(TASK_OUTPUT_PATH, data, "template", "project", None)
    with units.store.read() as conn:
        registered = conn.execute(
            "SELECT digest FROM delivery_files WHERE path = ?", (TASK_OUTPUT_PATH,)
        ).fetchone()
    on_disk = registry.file_digest(units.state_root, TASK_OUTPUT_PATH)
    if registered is not None and registered[0] == write.digest == on_disk:
        return []

    def commit(conn: Any) -> Outcome:
        seq = journal.append(
            conn,
            actor="system",
            kind="delivery.templates_shipped",
            subject=None,
            payload={"paths": [TASK_OUTPUT_PATH], "digests": [write.digest]},
        )
        return Outcome({"paths": [TASK_OUTPUT_PATH]}, seq)

    units.run(Plan(op="templates", commit=commit, writes=(write,)), None)
    return [TASK_OUTPUT_PATH]
