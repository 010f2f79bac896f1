"""Stories that bind a validator: snapshot at ingestion, bind in the journaled transaction.

A story's verification surface may name a validator cell; the validators engine freezes
that cell as a snapshot when the story is created or revised, so later notebook edits
change nothing. Snapshots are built before the write transaction (the runtime is
measured then); binding stores the blob and the engine's binding row inside it, and the
story's event names every binding so the engine can vouch for it before each run.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from ithaca.kernel.blobs import BlobStore
from ithaca.validators import bindings, snapshot

OWNER_KIND = "ultragoal"
ROLE = "story"

Built = dict[str, tuple[dict[str, Any], dict[str, Any]]]


def build(
    conn: sqlite3.Connection, parsed: list[dict[str, Any]], settings: dict[str, Any]
) -> Built:
    """The snapshot and origin cell of each story that names a validator, by story id."""
    built: Built = {}
    for story in parsed:
        reference = story.get("validator")
        if reference:
            built[story["id"]] = snapshot.build(
                conn, reference["notebookId"], reference["cellId"], settings
            )
    return built


def bind(
    tx: sqlite3.Connection, blobs: BlobStore, session_id: str, built: Built
) -> dict[str, dict[str, Any]]:
    """Bind each built snapshot to the session; returns each story's stored validator
    ``{notebookId, cellId, snapshot_sha256, language, binding_id}``."""
    stored = {}
    for story_id, (snapshot_value, cell) in built.items():
        view = bindings.bind(
            tx,
            blobs,
            snapshot_value,
            owner_kind=OWNER_KIND,
            owner_id=session_id,
            role=ROLE,
            cell=cell,
        )
        stored[story_id] = {
            "notebookId": view["notebookId"],
            "cellId": view["cellId"],
            "snapshot_sha256": view["snapshotHash"],
            "language": view["language"],
            "binding_id": view["binding_id"],
            "cellVersion": view["cellVersion"],
        }
    return stored


def event_entries(stored: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """How the story event names its bindings (what the engine's vouching check reads)."""
    return [
        {
            "story_id": story_id,
            "role": ROLE,
            "binding_id": validator["binding_id"],
            "snapshotHash": validator["snapshot_sha256"],
            "notebookId": validator["notebookId"],
            "cellId": validator["cellId"],
            "cellVersion": validator["cellVersion"],
        }
        for story_id, validator in sorted(stored.items())
    ]


def attach(tx: sqlite3.Connection, stored: dict[str, dict[str, Any]], seq: int) -> None:
    if stored:
        bindings.attach_event(tx, [v["binding_id"] for v in stored.values()], seq)
