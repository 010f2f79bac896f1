"""Bindings: a snapshot pinned by a journal event, and the check before every run."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.kernel import canon, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Corrupt, NotFound
from ithaca.validators import bindings, runner, runtimes, snapshot
from ithaca.validators.notebooks import NotebookService

PASSING = "from tb_validate import pass_\npass_('fine')\n"
pytestmark = pytest.mark.usefixtures("fixed_runtime")


@pytest.fixture
def blobs(project: IthacaProject) -> BlobStore:
    return BlobStore(project.project.blobs_dir)


@pytest.fixture
def cell(notebooks: NotebookService) -> tuple[str, str]:
    nb = notebooks.create({"title": "Checks"})["notebookId"]
    return nb, notebooks.add_cell({"notebookId": nb, "source": PASSING})["cellId"]


def bind_planned(
    project: IthacaProject,
    blobs: BlobStore,
    cell: tuple[str, str],
    *,
    role: str = "primary",
    owner_id: str = "step_1",
    payload_for: Any = None,
) -> dict[str, Any]:
    """Bind like an owner does: bind, append the owner's event naming it, attach."""
    with project.store.write() as conn:
        built, origin = snapshot.build(conn, *cell, project.config["validators"])
        view = bindings.bind(
            conn, blobs, built, owner_kind="test_step", owner_id=owner_id, role=role, cell=origin
        )
        named = {key: view[key] for key in ("binding_id", "notebookId", "cellId", "cellVersion")}
        named["snapshotHash"] = view["snapshotHash"]
        payload = (
            payload_for(named)
            if payload_for
            else {"step_id": owner_id, f"{role}Validator": named, "primary": "run it"}
        )
        seq = journal.append(
            conn, actor="agent", kind="test.planned", subject="session_1", payload=payload
        )
        bindings.attach_event(conn, [view["binding_id"]], seq)
    return view


def later_event(project: IthacaProject) -> None:
    with project.store.write() as conn:
        journal.append(conn, actor="agent", kind="test.later", subject=None, payload={})


def blob_path(blobs: BlobStore, view: dict[str, Any]) -> Path:
    return blobs.path(view["snapshotHash"])


# --- bind and get -----------------------------------------------------------------------


def test_bind_stores_the_snapshot_blob_and_check_returns_it(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    view = bind_planned(project, blobs, cell)

    bound, cause = bindings.check(project.store.connection(), blobs, view["binding_id"])

    assert cause is None
    assert bound is not None and bound["source"] == PASSING
    assert canon.digest(bound) == view["snapshotHash"]
    assert blobs.get(view["snapshotHash"]) == snapshot.encode(bound)
    assert view == {
        "binding_id": view["binding_id"],
        "notebookId": cell[0],
        "cellId": cell[1],
        "cellVersion": 1,
        "snapshotHash": view["snapshotHash"],
        "language": "python",
        "mode": "judge",
    }


def test_get_adds_owner_role_and_the_vouching_event(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    view = bind_planned(project, blobs, cell)

    got = bindings.get(project.store.connection(), view["binding_id"])

    [event] = journal.query(project.store.connection(), kind="test.planned")
    assert got == {
        **view,
        "owner_kind": "test_step",
        "owner_id": "step_1",
        "role": "primary",
        "journal_seq": event["seq"],
        "boundAt": got["boundAt"],
    }
    with pytest.raises(NotFound) as raised:
        bindings.get(project.store.connection(), "bind_missing")
    assert raised.value.code == "BINDING_NOT_FOUND"


def test_binding_the_same_snapshot_twice_shares_one_blob(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    first = bind_planned(project, blobs, cell, role="primary")
    second = bind_planned(project, blobs, cell, role="recovery")

    assert first["binding_id"] != second["binding_id"]
    assert first["snapshotHash"] == second["snapshotHash"]
    assert len(list(Path(blobs.root).rglob("*"))) == 2  # one fan-out folder, one blob


def test_a_flat_payload_names_the_role_through_the_event_kind(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    with project.store.write() as conn:
        built, origin = snapshot.build(conn, *cell, project.config["validators"])
        view = bindings.bind(
            conn, blobs, built, owner_kind="session", owner_id="ses_1", role="final", cell=origin
        )
        seq = journal.append(
            conn,
            actor="agent",
            kind="ulysses.final_validator_bound",
            subject="ses_1",
            payload={"binding_id": view["binding_id"], "snapshotHash": view["snapshotHash"]},
        )
        bindings.attach_event(conn, [view["binding_id"]], seq)

    assert bindings.check(project.store.connection(), blobs, view["binding_id"])[1] is None


@pytest.mark.parametrize(
    "payload_for",
    [
        lambda named: {"step_id": "step_1", "primary": "run it"},  # binding not named
        lambda named: {
            "step_id": "step_1",
            "primaryValidator": {**named, "snapshotHash": "0" * 64},
        },
        lambda named: {"step_id": "step_1", "recoveryValidator": named},  # another role
        lambda named: {"step_id": "step_9", "primaryValidator": named},  # another owner
        lambda named: {"step_id": "step_1", "primaryValidator": {**named, "cellVersion": 2}},
    ],
)
def test_attach_refuses_an_event_that_does_not_vouch_for_the_binding(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str], payload_for: Any
) -> None:
    before = project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0]

    with pytest.raises(Corrupt) as raised:
        bind_planned(project, blobs, cell, payload_for=payload_for)

    assert raised.value.code == "BINDING_EVENT_MISMATCH"
    conn = project.store.connection()
    assert conn.execute("SELECT count(*) FROM journal").fetchone()[0] == before
    assert conn.execute("SELECT count(*) FROM validator_bindings").fetchone()[0] == 0


def test_a_binding_never_attached_to_an_event_fails_the_check(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    with project.store.write() as conn:
        built, origin = snapshot.build(conn, *cell, project.config["validators"])
        view = bindings.bind(
            conn, blobs, built, owner_kind="k", owner_id="o", role="r", cell=origin
        )

    assert bindings.check(project.store.connection(), blobs, view["binding_id"]) == (
        None,
        "binding_mismatch",
    )


# --- tamper -----------------------------------------------------------------------------


def _edit_blob(blobs: BlobStore, view: dict[str, Any]) -> None:
    path = blob_path(blobs, view)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes().replace(b"fine", b"FINE"))


def _replace_blob_with_other_snapshot(blobs: BlobStore, view: dict[str, Any]) -> None:
    path = blob_path(blobs, view)
    os.chmod(path, 0o644)
    path.write_bytes(b'{"schema":"something else"}')


def _delete_blob(blobs: BlobStore, view: dict[str, Any]) -> None:
    blob_path(blobs, view).unlink()


def _symlink_blob(blobs: BlobStore, view: dict[str, Any]) -> None:
    path = blob_path(blobs, view)
    copy = path.with_name("copy")
    copy.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(copy)


@pytest.mark.parametrize(
    ("tamper", "cause"),
    [
        (_edit_blob, "blob_mismatch"),
        (_replace_blob_with_other_snapshot, "blob_mismatch"),
        (_symlink_blob, "blob_mismatch"),
        (_delete_blob, "blob_missing"),
    ],
)
def test_tampered_blobs_fail_the_check_with_their_cause(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str], tamper: Any, cause: str
) -> None:
    view = bind_planned(project, blobs, cell)

    tamper(blobs, view)

    assert bindings.check(project.store.connection(), blobs, view["binding_id"]) == (None, cause)


def test_a_blob_with_the_right_digest_but_not_a_snapshot_is_a_blob_mismatch(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    """Rebinding the row and rewriting the journal around a non-snapshot blob still fails
    at decoding: only canonical snapshot bytes are ever run."""
    junk = blobs.put(b"not json")
    view = bind_planned(
        project,
        blobs,
        cell,
        payload_for=lambda named: {"step_id": "step_1", "primaryValidator": named},
    )
    conn = project.store.connection()
    conn.execute(
        "UPDATE validator_bindings SET snapshot_digest = ? WHERE binding_id = ?",
        (junk, view["binding_id"]),
    )
    _rewrite_event(project, view, lambda payload: _swap_digest(payload, junk))

    assert bindings.check(conn, blobs, view["binding_id"]) == (None, "blob_mismatch")


def _swap_digest(payload: dict[str, Any], digest: str) -> dict[str, Any]:
    return {**payload, "primaryValidator": {**payload["primaryValidator"], "snapshotHash": digest}}


def _rewrite_event(project: IthacaProject, view: dict[str, Any], change: Any) -> None:
    """Edit the vouching event's payload and recompute its own hash (not its successors')."""
    conn = project.store.connection()
    seq = bindings.get(conn, view["binding_id"])["journal_seq"]
    [event] = [e for e in journal.query(conn, after_seq=seq - 1, limit=1)]
    row = conn.execute("SELECT prev_hash FROM journal WHERE seq = ?", (seq,)).fetchone()
    payload = change(event["payload"])
    body = {key: event[key] for key in ("seq", "at", "actor", "kind", "subject")}
    new_hash = journal.chain_hash(row[0], {**body, "payload": payload})
    conn.execute(
        "UPDATE journal SET payload = ?, hash = ? WHERE seq = ?",
        (canon.canonical_text(payload), new_hash, seq),
    )


def test_changing_the_bindings_digest_is_a_binding_mismatch(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str], notebooks: NotebookService
) -> None:
    view = bind_planned(project, blobs, cell)
    notebooks.update_cell({"notebookId": cell[0], "cellId": cell[1], "source": "x = 1\n"})
    with project.store.write() as conn:
        other, _ = snapshot.build(conn, *cell, project.config["validators"])
    other_digest = blobs.put(snapshot.encode(other))
    conn = project.store.connection()

    conn.execute(
        "UPDATE validator_bindings SET snapshot_digest = ? WHERE binding_id = ?",
        (other_digest, view["binding_id"]),
    )

    assert bindings.check(conn, blobs, view["binding_id"]) == (None, "binding_mismatch")


@pytest.mark.parametrize(
    ("column", "value"),
    [("role", "recovery"), ("owner_id", "step_2"), ("cell_version", 2), ("journal_seq", 1)],
)
def test_changing_the_bindings_owner_role_version_or_event_is_a_binding_mismatch(
    project: IthacaProject,
    blobs: BlobStore,
    cell: tuple[str, str],
    notebooks: NotebookService,
    column: str,
    value: Any,
) -> None:
    view = bind_planned(project, blobs, cell)
    notebooks.update_cell({"notebookId": cell[0], "cellId": cell[1], "source": "x = 1\n"})
    conn = project.store.connection()

    conn.execute(
        f"UPDATE validator_bindings SET {column} = ? WHERE binding_id = ?",
        (value, view["binding_id"]),
    )

    assert bindings.check(conn, blobs, view["binding_id"]) == (None, "binding_mismatch")


def test_editing_the_journal_payload_is_a_binding_mismatch(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    view = bind_planned(project, blobs, cell)
    conn = project.store.connection()
    seq = bindings.get(conn, view["binding_id"])["journal_seq"]

    conn.execute(
        "UPDATE journal SET payload = replace(payload, 'run it', 'run that') WHERE seq = ?",
        (seq,),
    )

    assert bindings.check(conn, blobs, view["binding_id"]) == (None, "binding_mismatch")


def test_rehashing_the_edited_event_breaks_its_successors_link(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    view = bind_planned(project, blobs, cell)
    later_event(project)

    _rewrite_event(project, view, lambda payload: {**payload, "primary": "run that"})

    conn = project.store.connection()
    assert bindings.check(conn, blobs, view["binding_id"]) == (None, "binding_mismatch")


def test_an_unknown_binding_fails_the_check(project: IthacaProject, blobs: BlobStore) -> None:
    assert bindings.check(project.store.connection(), blobs, "bind_missing") == (
        None,
        "binding_mismatch",
    )


def test_notebook_edits_after_binding_change_nothing(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str], notebooks: NotebookService
) -> None:
    view = bind_planned(project, blobs, cell)
    notebooks.update_cell({"notebookId": cell[0], "cellId": cell[1], "source": "fail()\n"})
    notebooks.add_cell({"notebookId": cell[0], "source": "x", "filename": "requirements.txt"})
    later_event(project)

    bound, cause = bindings.check(project.store.connection(), blobs, view["binding_id"])

    assert cause is None
    assert bound is not None
    assert (bound["source"], bound["manifests"]) == (PASSING, [])


# --- run and record_run -----------------------------------------------------------------


def test_run_executes_the_bound_snapshot(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str], notebooks: NotebookService
) -> None:
    view = bind_planned(project, blobs, cell)
    notebooks.update_cell(
        {"notebookId": cell[0], "cellId": cell[1], "source": "raise SystemExit(3)"}
    )

    result = bindings.run(
        project.store.connection(),
        blobs,
        view["binding_id"],
        {"any": "thing"},
        project.config["validators"],
        project_root=project.project.root,
    )

    assert (result["pass"], result["reason"]) == (True, "fine")
    assert result["snapshotHash"] == view["snapshotHash"]
    assert result["hashMatched"] is True


def test_a_tampered_binding_runs_nothing(
    project: IthacaProject,
    blobs: BlobStore,
    cell: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    view = bind_planned(project, blobs, cell)
    _delete_blob(blobs, view)

    def must_not_run(*args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("a tampered binding ran")

    monkeypatch.setattr(runner, "run_snapshot", must_not_run)
    result = bindings.run(
        project.store.connection(),
        blobs,
        view["binding_id"],
        None,
        project.config["validators"],
        project_root=None,
    )

    assert result == runner.mismatch_result(view["snapshotHash"], "blob_missing")
    assert (result["pass"], result["reason"], result["cause"]) == (
        False,
        "snapshot_hash_mismatch",
        "blob_missing",
    )
    assert result["hashMatched"] is False and result["exitCode"] is None


def test_a_changed_runtime_runs_with_a_runtime_drift_diagnostic(
    project: IthacaProject,
    blobs: BlobStore,
    cell: tuple[str, str],
    fixed_runtime: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    view = bind_planned(project, blobs, cell)
    bound = dict(fixed_runtime)
    current = {"name": "cpython", "version": "3.13.0"}
    monkeypatch.setattr(runtimes, "measure", lambda language, settings: dict(current))

    result = bindings.run(
        project.store.connection(),
        blobs,
        view["binding_id"],
        None,
        project.config["validators"],
        project_root=None,
    )

    assert result["pass"] is True
    [drift] = [d for d in result["diagnostics"] if d["code"] == "runtime_drift"]
    assert (drift["bound"], drift["current"]) == (bound, current)


def test_record_run_keeps_a_result_under_its_evidence_digest_once(
    project: IthacaProject, blobs: BlobStore, cell: tuple[str, str]
) -> None:
    view = bind_planned(project, blobs, cell)
    conn = project.store.connection()
    result = bindings.run(
        conn, blobs, view["binding_id"], 1, project.config["validators"], project_root=None
    )

    for _ in range(2):
        with project.store.write() as tx:
            bindings.record_run(tx, view["binding_id"], result)

    rows = conn.execute("SELECT evidence_digest, binding_id, pass FROM validator_runs").fetchall()
    assert rows == [(result["evidenceDigest"], view["binding_id"], 1)]
    with pytest.raises(NotFound), project.store.write() as tx:
        bindings.record_run(tx, "bind_missing", result)
