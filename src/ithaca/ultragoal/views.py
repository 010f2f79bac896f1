"""The read shapes: ``get``, ``status --json``, the verdict artifact.

``get`` keeps the original state object's keys so the seed's skill text reads it
unchanged; everything Ithaca adds sits under one ``ithaca`` key. The verdict artifact is
not a file an agent writes: it is rebuilt from the verdict rows on every read, and its
``objective_verdict`` is derived, so it cannot disagree with the rows it summarises.
"""

from __future__ import annotations

from ithaca.ultragoal import evidence, records, reducer
from ithaca.ultragoal.ttl import LIVE_TTL_S, elapsed_s

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from typing import Any

OPTIONAL_STORY_KEYS = ("steering_evidence", "steering_rationale", "split_from", "split_into")


def story(entry: dict[str, Any]) -> dict[str, Any]:
    """A story as ``get`` shows it."""
    shown = {
        "id": entry["id"],
        "story": entry["story"],
        "acceptance_criteria": list(entry["acceptance_criteria"]),
        "verification_surface": entry["verification_surface"],
        "status": entry["status"],
    }
    for key in OPTIONAL_STORY_KEYS:
        if entry.get(key) is not None:
            shown[key] = entry[key]
    if entry.get("validator"):
        validator = entry["validator"]
        shown["validator"] = {
            key: validator[key] for key in ("notebookId", "cellId", "snapshot_sha256", "language")
        }
    return shown


def state(conn: sqlite3.Connection, row: dict[str, Any]) -> dict[str, Any]:
    """The original state object plus ``pristine`` and ``ithaca``."""
    session_id = row["session_id"]
    all_stories = records.stories(conn, session_id)
    current = records.current_story(all_stories, records.verdicts(conn, session_id))
    shown: dict[str, Any] = {key: row[key] for key in records.STATE_FIELDS}
    shown["completion_evidence_paths"] = [pair["path"] for pair in row["completion_evidence"]]
    shown.update(
        {
            key: row[key]
            for key in (
                "schema_version",
                "last_touched_at",
                "progress_touched_at",
                "review_dispatch_used",
                "review_dispatch_cap",
                "approved_review_artifact_sha256",
            )
        }
    )
    shown["dismissed_review_findings"] = [
        {key: entry[key] for key in ("artifact_sha256", "ref", "class", "rationale")}
        for entry in records.dismissals(conn, session_id)
    ]
    if row["review_resolution"] is not None:
        shown["review_resolution"] = row["review_resolution"]
    shown["stories"] = [story(entry) for entry in all_stories]
    shown["codex_goal_objective"] = row["codex_goal_objective"]
    for key in ("last_seen_head", "last_seen_stories_digest"):
        if row[key] is not None:
            shown[key] = row[key]
    shown["pristine"] = records.is_pristine(row)
    shown["ithaca"] = {
        "session_id": session_id,
        "max_wall_minutes": row["max_wall_minutes"],
        "wall_used_s": row["wall_used_s"],
        "budget_kind": row["budget_kind"],
        "host_capped": row["host_capped"],
        "current_story": None if current is None else current["id"],
        "completion_evidence": row["completion_evidence"],
        "relayed_confirmations": relayed_confirmations(all_stories),
        "retired_after_confirmation": retired_after_confirmation(all_stories),
        "diagnostics": [],
    }
    return shown


def relayed_confirmations(all_stories: list[dict[str, Any]]) -> list[str]:
    """Confirmed stories whose approval the agent relayed rather than the user gave."""
    return [s["id"] for s in all_stories if s["status"] == "confirmed" and s["confirmed_relayed"]]


def retired_after_confirmation(all_stories: list[dict[str, Any]]) -> list[str]:
    return [s["id"] for s in all_stories if s["status"] == "retired" and s["ever_confirmed"]]


def verdict_artifact(
    all_stories: list[dict[str, Any]], by_story: dict[str, dict[str, Any]]
) -> dict[str, Any] | None:
    """The verdict artifact rebuilt from the rows, or None when there are none."""
    if not by_story:
        return None
    order = {entry["id"]: index for index, entry in enumerate(all_stories)}
    entries = sorted(
        by_story.values(), key=lambda e: (order.get(e["story_id"], len(order)), e["story_id"])
    )
    newest = max(entries, key=lambda e: e["seq"])
    return {
        "objective_verdict": derived_verdict(all_stories, by_story),
        "stories": [
            {
                "id": entry["story_id"],
                "verdict": entry["verdict"],
                "evidence_refs": [pair["path"] for pair in entry["evidence"]],
                "evidence_sha256": {pair["path"]: pair["sha256"] for pair in entry["evidence"]},
            }
            for entry in entries
        ],
        "verifier": newest["verifier"],
        "at": newest["at"],
    }


def derived_verdict(all_stories: list[dict[str, Any]], by_story: dict[str, dict[str, Any]]) -> str:
    live = [entry for entry in all_stories if entry["status"] != "retired"]
    if all(
        entry["status"] == "confirmed" and by_story.get(entry["id"], {}).get("verdict") == "APPROVE"
        for entry in live
    ):
        return "APPROVE"
    if any(entry["verdict"] == "REQUEST_CHANGES" for entry in by_story.values()):
        return "REQUEST_CHANGES"
    return "COMMENT"


def status(conn: sqlite3.Connection, session_id: str, roots: evidence.Roots) -> dict[str, Any]:
    """``status --json``: the phase token and everything a gate would look at."""
    row = records.load(conn, session_id)
    if row is None:
        return {
            "status": "absent",
            "state": None,
            "verdict_artifact": None,
            "codereview_artifact": None,
            "review_result": None,
            "current_story": None,
            "stale_evidence": [],
        }
    all_stories = records.stories(conn, session_id)
    by_story = records.verdicts(conn, session_id)
    review = records.review(conn, session_id)
    current = records.current_story(all_stories, by_story)
    return {
        "status": row["phase"],
        "state": state(conn, row),
        "verdict_artifact": verdict_artifact(all_stories, by_story),
        "codereview_artifact": None if review is None else review["artifact"],
        "review_result": reducer.reduce(
            row, all_stories, review, records.dismissals(conn, session_id)
        ),
        "current_story": None if current is None else story(current),
        "stale_evidence": stale_evidence(row, by_story, roots),
    }


def stale_evidence(
    row: dict[str, Any], by_story: dict[str, dict[str, Any]], roots: evidence.Roots
) -> list[dict[str, str]]:
    """Recorded evidence whose file is gone or changed, with who recorded it."""
    owned: list[tuple[str, dict[str, Any]]] = [
        ("completion", p) for p in row["completion_evidence"]
    ]
    for story_id, entry in sorted(by_story.items()):
        owned += [(f"story:{story_id}", pair) for pair in entry["evidence"]]
    resolution = row["review_resolution"]
    if resolution:
        owned += [
            ("review_resolution", {"path": path, "sha256": sha})
            for path, sha in sorted(resolution["evidence_sha256"].items())
        ]
    return [
        {"owner": owner, "path": pair["path"]}
        for owner, pair in owned
        if evidence.check(pair, roots) is not None
    ]


def others(conn: sqlite3.Connection, session_id: str, now: str) -> list[dict[str, Any]]:
    """Other sessions' pursuits that are active, non-pristine and progress-live."""
    rows = conn.execute(
        "SELECT session_id, outcome, started_at, progress_touched_at, last_touched_at, phase,"
        " iteration FROM ultragoal_pursuit WHERE session_id != ? AND active = 1"
        " ORDER BY started_at, session_id",
        (session_id,),
    ).fetchall()
    listed = []
    for sid, outcome, started, progressed, touched, phase, iteration in rows:
        if phase == "planning" and iteration == 0 and outcome == "":
            continue
        idle = elapsed_s(progressed or touched, now)
        if idle > LIVE_TTL_S:
            continue
        listed.append(
            {
                "short": sid[:8],
                "sid": sid,
                "purpose": outcome,
                "started_at": started,
                "idle_seconds": int(idle),
            }
        )
    return listed


def overview(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every session's active pursuit, latest first: its phase, objective and the story it
    is on (``ithaca status``)."""
    rows = conn.execute(
        "SELECT session_id FROM ultragoal_pursuit WHERE active = 1"
        " ORDER BY last_touched_at DESC, session_id"
    ).fetchall()
    found = []
    for (session_id,) in rows:
        row = records.load(conn, session_id)
        if row is None:
            continue
        all_stories = records.stories(conn, session_id)
        current = records.current_story(all_stories, records.verdicts(conn, session_id))
        found.append(
            {
                "session_id": session_id,
                "phase": row["phase"],
                "outcome": row["outcome"],
                "unconfirmed": sum(1 for entry in all_stories if entry["status"] == "unconfirmed"),
                "current_story": None if current is None else story(current),
            }
        )
    return found
