"""Worker Packets (reference §9.4): digest-bound, immutable, re-verified on read, and the
worker's output checked against the packet's own schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ithaca.delivery import templates
from ithaca.delivery.sessions import packets
from ithaca.kernel import canon
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Corrupt, Refused

SESSION = "ses_01JB0000000000000000000000"


@pytest.fixture
def packet(project: Any) -> dict[str, Any]:
    found = packets.build(
        session_id=SESSION,
        runtime="claude",
        task={
            "id": "T-1",
            "contract": {
                "title": "Add login form",
                "deps": [],
                "files_modified": ["src/app.py"],
                "acceptance": [{"id": "A1", "criterion": "valid credentials reach /home"}],
                "verification": {"argv": ["pytest", "-q"]},
            },
            "contract_digest": "c" * 64,
        },
        change={"id": "add-login", "kind": "standard", "contract": {"outcome": "sign in"}},
        envelope={"id": "ctx-1", "digest": "e" * 64, "path": "/tmp/envelope"},
        decisions=[],
        git={
            "base_head": None,
            "branch": None,
            "worktree": None,
            "diff_range": None,
            "allowed_paths": ["src/app.py"],
        },
        evidence=[],
        output={
            "path": packets.output_path(project.project, SESSION),
            "schema": templates.TASK_OUTPUT_SCHEMA,
        },
    )
    packets.store_blob(project.project, found)
    packets.write_file(project.project, found)
    packets.make_output_folder(project.project, found)
    return found


def good_output(**changes: Any) -> dict[str, Any]:
    return {
        "task_id": "T-1",
        "status": "completed",
        "summary": "login form added",
        "changed_files": ["src/app.py"],
        "verification": {"argv": ["pytest", "-q"], "exit_code": 0},
        **changes,
    }


def test_the_digest_covers_everything_but_id_and_digest(packet):
    body = packets.body_of(packet)
    assert packet["digest"] == canon.digest(body)
    assert packet["id"] == f"wp-{packet['digest'][:24]}"
    assert packet["schema"] == "ithaca.worker-packet/1"
    assert packet["change"]["contract_digest"] == canon.digest({"outcome": "sign in"})


def test_a_packet_reads_back_from_its_blob(project, packet):
    assert packets.load(project.project, packet["digest"], SESSION) == packet


def test_an_edited_packet_file_is_drift(project, packet):
    path = Path(packets.packet_path(project.project, SESSION))
    edited = {**json.loads(path.read_text()), "runtime": "codex"}
    path.write_text(json.dumps(edited))
    with pytest.raises(Corrupt) as caught:
        packets.load(project.project, packet["digest"], SESSION)
    assert caught.value.code == "PACKET_DIGEST_DRIFT"


def test_a_changed_blob_is_drift(project, packet):
    blob = BlobStore(project.project.blobs_dir).path(packet["digest"])
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes().replace(b"claude", b"codex!"))
    with pytest.raises(Corrupt) as caught:
        packets.load(project.project, packet["digest"], SESSION)
    assert caught.value.code == "PACKET_DIGEST_DRIFT"


def test_a_valid_output_passes(packet):
    packets.check_output(packet, good_output())


@pytest.mark.parametrize(
    ("output", "pointer", "problem"),
    [
        ({"status": "completed"}, "/task_id", "MISSING_FIELD"),
        (good_output(extra=1), "/extra", "UNKNOWN_FIELD"),
        (good_output(status="done"), "/status", "NOT_ALLOWED"),
        (good_output(task_id="T-2"), "/task_id", "TASK_MISMATCH"),
        (good_output(status="blocked"), "/status", "BLOCKED"),
        ([1, 2], "", "WRONG_TYPE"),
    ],
)
def test_an_output_the_schema_refuses_is_named_by_pointer(packet, output, pointer, problem):
    with pytest.raises(Refused) as caught:
        packets.check_output(packet, output)
    assert caught.value.code == "OUTPUT_SCHEMA_INVALID"
    assert (caught.value.details["field"], caught.value.details["problem"]) == (pointer, problem)


def test_a_missing_or_unreadable_output_file(packet):
    with pytest.raises(Refused) as caught:
        packets.read_output(packet)
    assert caught.value.code == "OUTPUT_MISSING"
    Path(packet["output"]["path"]).write_text("{not json")
    with pytest.raises(Refused) as caught:
        packets.read_output(packet)
    assert caught.value.code == "OUTPUT_SCHEMA_INVALID"
