"""``run-story-validator``: a story's bound validator run on demand, its run recorded.

The run happens outside the transaction (it can take seconds); the record commits only if
the story is still the one that was run, with the same validator and unchanged since, so
a verdict never lands on a story that moved meanwhile (``CONFLICT``).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel import ids
from ithaca.kernel.errors import Conflict, Refused
from ithaca.ultragoal import records
from ithaca.ultragoal.operation import Context, Row, not_retired, require_phase, story_by_id
from ithaca.ultragoal.planning import WORKING
from ithaca.validators import bindings


def run_story_validator(ctx: Context, command: dict[str, Any]) -> dict[str, Any]:
    story_id = command["id"]
    conn = ctx.read()
    row = records.load(conn, ctx.session_id)
    if row is not None:
        require_phase(row, WORKING, "PHASE_NOT_PLANNING")
    story = story_by_id([] if row is None else records.stories(conn, ctx.session_id), story_id)
    not_retired(story)
    if not story.get("validator"):
        raise Refused(
            "STORY_NO_VALIDATOR", f"story {story_id} binds no validator", {"id": story_id}
        )
    binding_id = story["validator"]["binding_id"]
    result = bindings.run(
        conn,
        ctx.blobs,
        binding_id,
        command.get("observed"),
        ctx.config["validators"],
        project_root=ctx.project.root,
    )

    def apply(tx: sqlite3.Connection, current: Row) -> dict[str, Any]:
        require_phase(current, WORKING, "PHASE_NOT_PLANNING")
        now_story = story_by_id(records.stories(tx, ctx.session_id), story_id)
        if (
            now_story["status"] == "retired"
            or (now_story.get("validator") or {}).get("binding_id") != binding_id
            or now_story["changed_seq"] != story["changed_seq"]
        ):
            raise Conflict(
                "CONFLICT",
                f"story {story_id} changed while its validator ran; run it again",
                {"reason": "story_changed", "id": story_id},
            )
        seq = records.next_seq(tx)
        run = {
            "run_id": _run_id(),
            "pass": result["pass"] is True,
            "reason": result["reason"],
            "snapshot_sha256": result["snapshotHash"],
            "observed_sha256": result["observedDigest"],
            "at": ctx.now,
        }
        if result["cause"] is not None:
            run["cause"] = result["cause"]
        tx.execute(
            "INSERT INTO ultragoal_validator_run (run_id, session_id, story_id, binding_id,"
            " evidence_digest, pass, reason, cause, snapshot_sha256, observed_sha256, at, seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                run["run_id"],
                ctx.session_id,
                story_id,
                binding_id,
                result["evidenceDigest"],
                1 if run["pass"] else 0,
                run["reason"],
                result["cause"],
                run["snapshot_sha256"],
                run["observed_sha256"],
                ctx.now,
                seq,
            ),
        )
        bindings.record_run(tx, binding_id, result)
        ctx.commit(
            tx,
            current,
            "validator_ran",
            {
                "id": story_id,
                "run_id": run["run_id"],
                "pass": run["pass"],
                "evidenceDigest": result["evidenceDigest"],
            },
        )
        return {**run, "diagnostics": result.get("diagnostics", [])}

    return ctx.write(apply)


def _run_id() -> str:
    return ids.new("ugrun")
