"""Worker Packets: the one immutable, digest-bound handoff a worker gets
(docs/delivery.md, "Execution: session and Worker Packets").

A packet names exactly what a worker may rely on — the task contract, the change, the
Context Envelope snapshot, the accepted decisions, the Git boundary, the evidence — and
where its result goes: ``output.path`` (``.ithaca-work/outputs/<sid>/output.json``, in
the work folder the worker may write, outside ``.ithaca/``; a session started before the
move keeps ``.runtime/sessions/<sid>/output.json``, which its packet names) checked
against ``output.schema``. The worker echoes
the packet's digest when it completes the task, so a completion always says which
handoff it answers; a worker never writes the database or accepts its own result.

The packet's ``digest`` is taken over everything but ``id`` and ``digest`` (``id`` is
``wp-`` and 24 hex digits of it). Its canonical bytes are a kernel blob named by that
digest, which is the authority; ``packet.json`` in the session folder is the worker's
copy, written after the session commits, and a copy that no longer matches is
``PACKET_DIGEST_DRIFT``. Paths in a packet are absolute, because the worker reads them
from its own worktree.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ithaca.delivery import documents, templates
from ithaca.delivery.contract import validation_error
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.sessions import worktrees
from ithaca.delivery.units import registry
from ithaca.kernel import canon
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Corrupt, InvalidInput, IthacaError, Refused
from ithaca.kernel.files import write_atomic
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

SCHEMA = "ithaca.worker-packet/1"
ROLE = "worker"
SESSIONS = "sessions"
OUTPUTS = "outputs"
PACKET_FILE = "packet.json"
OUTPUT_FILE = "output.json"
MAX_OUTPUT_BYTES = 1024 * 1024

Packet = dict[str, Any]


def session_folder(project: Project, session_id: str) -> str:
    return os.path.join(os.path.realpath(project.runtime), SESSIONS, session_id)


def output_folder(project: Project, session_id: str) -> str:
    """``.ithaca-work/outputs/<sid>``: the folder the session's worker writes its output in."""
    return worktrees.work_path(project, OUTPUTS, session_id)


def output_path(project: Project, session_id: str) -> str:
    """The absolute real path of the session's output file."""
    return os.path.join(output_folder(project, session_id), OUTPUT_FILE)


def make_output_folder(project: Project, packet: Packet) -> None:
    """Make the folder of the packet's output file when it is the session's own output
    folder (a packet from before the move names a file in the session folder)."""
    folder = output_folder(project, packet["session_id"])
    if os.path.dirname(packet["output"]["path"]) == folder:
        worktrees.work_folder(project, OUTPUTS, packet["session_id"])


def write_output(project: Project, packet: Packet, body: bytes) -> None:
    """Write a given ``data.output`` to the packet's output path, confined to the project
    (or to the session folder, for a packet from before the move)."""
    path = packet["output"]["path"]
    root = os.path.realpath(project.root)
    if path.startswith(worktrees.work_path(project) + os.sep):
        write_atomic(root, os.path.relpath(path, root), body)
    else:
        write_atomic(session_folder(project, packet["session_id"]), OUTPUT_FILE, body)


def packet_path(project: Project, session_id: str) -> str:
    return os.path.join(session_folder(project, session_id), PACKET_FILE)


def body_of(packet: Packet) -> dict[str, Any]:
    """What the digest covers: the packet without ``id`` and ``digest``."""
    return {name: value for name, value in packet.items() if name not in ("id", "digest")}


def sealed(body: dict[str, Any]) -> Packet:
    """The packet for ``body``, with its digest and id."""
    digest = canon.digest(body)
    return {**body, "id": f"wp-{digest[:24]}", "digest": digest}


def build(
    *,
    session_id: str,
    runtime: str,
    task: dict[str, Any],
    change: dict[str, Any] | None,
    envelope: dict[str, Any],
    decisions: list[dict[str, Any]],
    git: dict[str, Any],
    evidence: list[dict[str, Any]],
    output: dict[str, Any],
) -> Packet:
    contract = task["contract"]
    return sealed(
        {
            "schema": SCHEMA,
            "session_id": session_id,
            "runtime": runtime,
            "role": ROLE,
            "task": {
                "id": task["id"],
                "title": contract["title"],
                "deps": contract["deps"],
                "files_modified": contract["files_modified"],
                "acceptance": contract["acceptance"],
                "verification": contract["verification"],
                "contract_digest": task["contract_digest"],
            },
            "change": None
            if change is None
            else {
                "id": change["id"],
                "kind": change["kind"],
                "contract_digest": canon.digest(change["contract"]),
            },
            "context_envelope": envelope,
            "accepted_decisions": decisions,
            "git": git,
            "evidence_refs": evidence,
            "output": output,
        }
    )


def accepted_decisions(
    conn: sqlite3.Connection, project: Project, change_id: str | None
) -> list[dict[str, Any]]:
    """The decisions in force for the task: the baseline's and its change's, accepted and
    not superseded, as ``{id, digest, path}``."""
    rows = conn.execute(
        "SELECT id, digest, path FROM delivery_decisions AS d WHERE status = 'accepted'"
        " AND (scope_type = 'baseline' OR scope_id = ?) AND NOT EXISTS"
        " (SELECT 1 FROM delivery_decisions AS s WHERE s.supersedes_id = d.id) ORDER BY id",
        (change_id,),
    ).fetchall()
    return [
        {"id": row[0], "digest": row[1], "path": os.path.join(project.state_root, row[2])}
        for row in rows
    ]


def evidence_refs(
    conn: sqlite3.Connection, project: Project, task_id: str, change_id: str | None
) -> list[dict[str, Any]]:
    """The current artifacts bound to the task or its change, as ``{artifact_id, path,
    digest}`` (copies live under the state root, references in the checkout)."""
    rows = conn.execute(
        "SELECT id, path, digest, mode FROM delivery_artifacts WHERE status = 'current'"
        " AND ((scope_type = 'task' AND scope_id = ?) OR (scope_type = 'change' AND scope_id = ?))"
        " ORDER BY id",
        (task_id, change_id),
    ).fetchall()
    return [
        {
            "artifact_id": row[0],
            "path": os.path.join(project.state_root if row[3] == "copy" else project.root, row[1]),
            "digest": row[2],
        }
        for row in rows
    ]


def output_schema(conn: sqlite3.Connection, project: Project) -> dict[str, Any]:
    """The default output schema: the shipped template, verified against its registered
    digest (the built-in copy for a project initialised before templates shipped)."""
    known = registry.lookup(conn, templates.TASK_OUTPUT_PATH)
    if known is None:
        return templates.TASK_OUTPUT_SCHEMA
    data = registry.read_verified(
        project.state_root, templates.TASK_OUTPUT_PATH, known["digest"], "ARTIFACT_DIGEST_MISMATCH"
    )
    found: dict[str, Any] = json.loads(data)
    return found


# --- storing and reading ---------------------------------------------------------------


def store_blob(project: Project, packet: Packet) -> None:
    """The packet's canonical body as a kernel blob named by its digest."""
    stored = BlobStore(project.blobs_dir).put(canon.canonical(body_of(packet)))
    if stored != packet["digest"]:
        raise Corrupt(
            "PACKET_DIGEST_DRIFT",
            "the packet's bytes do not hash to its digest",
            {"digest": packet["digest"], "stored": stored},
        )


def write_file(project: Project, packet: Packet) -> str:
    """The worker's copy, ``sessions/<sid>/packet.json``; returns its path."""
    relpath = f"{SESSIONS}/{packet['session_id']}/{PACKET_FILE}"
    write_atomic(project.runtime, relpath, documents.pretty_json(packet))
    return packet_path(project, packet["session_id"])


def load(project: Project, digest: str, session_id: str) -> Packet:
    """The packet stored under ``digest``, re-verified: its blob must hash to it and the
    session's ``packet.json``, when present, must still be the same packet."""
    try:
        body = json.loads(BlobStore(project.blobs_dir).get(digest))
    except (IthacaError, ValueError) as exc:
        raise _drift(digest, f"its stored copy cannot be read ({exc})") from exc
    packet = sealed(body)
    if packet["digest"] != digest or packet["session_id"] != session_id:
        raise _drift(digest, "its stored copy names another packet")
    copy = registry.read_no_follow(packet_path(project, session_id))
    if copy is not None:
        try:
            on_disk = json.loads(copy)
            matches = isinstance(on_disk, dict) and canon.digest(body_of(on_disk)) == digest
        except (ValueError, InvalidInput):
            matches = False
        if not matches:
            raise _drift(digest, f"{packet_path(project, session_id)} was changed")
    return packet


def _drift(digest: str, problem: str) -> Corrupt:
    return Corrupt(
        "PACKET_DIGEST_DRIFT",
        f"Worker Packet {digest[:24]}: {problem}; run `ithaca doctor`",
        {"digest": digest},
    )


# --- the worker's output ----------------------------------------------------------------


def read_output(packet: Packet) -> tuple[bytes, Any]:
    """The output file's bytes and value, or ``OUTPUT_MISSING`` / ``OUTPUT_SCHEMA_INVALID``."""
    path = packet["output"]["path"]
    data = registry.read_no_follow(path)
    if data is None:
        raise Refused(
            "OUTPUT_MISSING",
            f"the worker's output {path} does not exist; write it (or give data.output)",
            {"path": path},
        )
    if len(data) > MAX_OUTPUT_BYTES:
        raise _invalid(path, "", "TOO_LARGE", f"{len(data)} bytes; at most {MAX_OUTPUT_BYTES}")
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise _invalid(path, "", "INVALID_JSON", f"is not JSON: {exc}") from exc
    return data, value


def check_output(packet: Packet, value: Any) -> None:
    """``OUTPUT_SCHEMA_INVALID`` unless ``value`` satisfies the packet's output schema,
    names the packet's task, and does not report the task blocked."""
    path = packet["output"]["path"]
    try:
        check(packet["output"]["schema"], value)
    except InvalidInput as exc:
        pointer = str(exc.details.get("pointer", ""))
        raise _invalid(path, pointer, str(exc.details.get("problem")), exc.message) from exc
    if not isinstance(value, dict):
        return
    if "task_id" in value and value["task_id"] != packet["task"]["id"]:
        raise _invalid(path, "/task_id", "TASK_MISMATCH", f"must be {packet['task']['id']}")
    if value.get("status") == "blocked":
        raise _invalid(
            path, "/status", "BLOCKED", "says blocked; record task_outcome block instead"
        )


def _invalid(path: str, pointer: str, problem: str, message: str) -> Refused:
    return Refused(
        "OUTPUT_SCHEMA_INVALID",
        f"the worker's output {path} does not satisfy the packet's schema: {message}",
        {"path": path, "field": pointer, "problem": problem},
    )


def output_bytes(value: Any) -> bytes:
    """How a given ``data.output`` is written to the output path."""
    try:
        return documents.pretty_json(value)
    except InvalidInput as exc:
        raise validation_error("/output", "NOT_ENCODABLE", exc.message) from exc
