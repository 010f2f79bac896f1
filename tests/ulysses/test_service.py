"""The Ulysses service over a real project: store, journal, Git, validators, knowledge."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ithaca import open_project
from ithaca.app import IthacaProject
from ithaca.kernel import journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, IthacaError, Refused
from ithaca.ulysses import gate, machine
from ithaca.ulysses.service import UlyssesService
from ithaca.validators import bindings, sandbox
from ithaca.validators.notebooks import NotebookService

WAIT_SECONDS = 60
JUDGE = textwrap.dedent(
    """
    from tb_validate import observed, pass_, fail
    data = observed()
    pass_("ok is true") if data.get("ok") else fail("ok is not true", data)
    """
)
# Says on stdout that it ran (a validator can write nothing outside its run folder).
MARKER = textwrap.dedent(
    """
    from tb_validate import observed, pass_, fail
    print("marker ran")
    pass_("ran") if observed().get("ok") else fail("ran and failed")
    """
)
# Waits until the test lets it finish; the test sees it running in /proc.
WAITER = textwrap.dedent(
    """
    import pathlib, time
    from tb_validate import observed, pass_, fail
    go = pathlib.Path(observed()["folder"]) / "go"
    deadline = time.monotonic() + 25
    while not go.exists():
        if time.monotonic() > deadline:
            fail("never released")
            raise SystemExit(0)
        time.sleep(0.02)
    pass_("released")
    """
)


def runs_a_cell(ancestor: int, filename: str) -> bool:
    """Whether a process below ``ancestor`` is running the cell ``filename`` (its path is
    the last word of the validator's command line, and of bubblewrap's around it)."""
    parents, running = {}, []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat") as handle:
                parents[int(name)] = int(handle.read().rpartition(")")[2].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as handle:
                argv = handle.read().rstrip(b"\0").split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if argv[-1].endswith(f"/{filename}".encode()):
            running.append(int(name))
    for pid in running:
        while pid > 1:
            if pid == ancestor:
                return True
            pid = parents.get(pid, 0)
    return False


class Rig:
    """A project with a notebook of validator cells and the Ulysses service over it."""

    def __init__(self, project: IthacaProject):
        self.project = project
        self.root = Path(project.project.root)
        self.notebooks = NotebookService(project.project, project.store, project.config)
        self.service = UlyssesService(project.project, project.store, project.config)
        self.notebook_id = self.notebooks.create({"title": "checks"})["notebookId"]
        self.cells: dict[str, dict[str, str]] = {}

    def bind_final(self, name: str = "final", **arguments: Any) -> dict[str, Any]:
        """Bind the JUDGE cell ``name`` as the final validator, shown failing on the problem."""
        given = {"observed": {"ok": False}, **arguments}
        return self.service.bind_final_validator({**self.cell(name), **given})

    def cell(self, name: str, source: str = JUDGE) -> dict[str, str]:
        if name not in self.cells:
            added = self.notebooks.add_cell(
                {"notebookId": self.notebook_id, "source": source, "filename": f"{name}.py"}
            )
            self.cells[name] = {"notebookId": self.notebook_id, "cellId": added["cellId"]}
        return self.cells[name]

    @property
    def conn(self) -> Any:
        return self.project.store.connection()

    def last_seq(self) -> int:
        row = self.conn.execute("SELECT max(seq) FROM journal").fetchone()
        return int(row[0] or 0)

    def events(self, kind: str) -> list[dict[str, Any]]:
        return journal.query(self.conn, kind=kind)

    def state(self) -> dict[str, Any]:
        row = self.conn.execute(
            "SELECT state_json FROM ulysses_sessions WHERE status = 'active'"
        ).fetchone()
        state: dict[str, Any] = json.loads(row[0])
        return state

    def gate(self) -> tuple[dict[str, Any], int] | None:
        row = self.conn.execute(
            "SELECT state_json, updated_seq FROM gate_state WHERE part = 'ulysses'"
        ).fetchone()
        return None if row is None else (json.loads(row[0]), row[1])

    def gate_state(self) -> dict[str, Any]:
        """The state the gate reads, which must have been written."""
        found = self.gate()
        assert found is not None
        return found[0]

    def init(self, problem: str = "the login test flakes", **extra: Any) -> dict[str, Any]:
        return self.service.init({"problem": problem, **extra})

    def plan(
        self,
        primary: str = "raise the retry count",
        recovery: str = "revert the retry change",
        *,
        primary_cell: str = "primary",
        recovery_cell: str = "recovery",
        primary_source: str = JUDGE,
        **extra: Any,
    ) -> dict[str, Any]:
        return self.service.plan(
            {
                "primary": primary,
                "recovery": recovery,
                "primaryValidator": self.cell(primary_cell, primary_source),
                "recoveryValidator": self.cell(recovery_cell),
                **extra,
            }
        )

    def to_phase(self, phase: str) -> None:
        """From no session to ``phase`` along the shortest path."""
        self.init()
        if phase == "IDLE":
            return
        self.plan()
        if phase == "PRIMARY":
            return
        self.service.outcome({"observed": {"ok": False}})
        if phase == "RECOVERY":
            return
        self.service.outcome({"observed": {"ok": False}})
        assert self.state()["phase"] == "REFLECT"


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


@pytest.fixture
def spawned(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The outcome of every validator process the test starts, in order."""
    outcomes: list[Any] = []
    execute = sandbox.execute

    def recording(*args: Any, **kwargs: Any) -> Any:
        outcomes.append(execute(*args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(sandbox, "execute", recording)
    return outcomes


@pytest.fixture
def rig(project_dir: Path) -> Iterator[Rig]:
    (project_dir / "app.txt").write_text("one\n")
    git(project_dir, "add", "-A")
    git(project_dir, "commit", "-qm", "start")
    project = open_project(project_dir)
    yield Rig(project)
    project.close()


def refuses(code: str, rig: Rig, call: Any, *args: Any) -> IthacaError:
    """``call`` refuses with ``code`` and leaves the journal and the session as they were."""
    seq = rig.last_seq()
    sessions = rig.conn.execute("SELECT * FROM ulysses_sessions ORDER BY session_id").fetchall()
    with pytest.raises(IthacaError) as caught:
        call(*args)
    assert caught.value.code == code, caught.value
    assert rig.last_seq() == seq
    assert rig.conn.execute("SELECT * FROM ulysses_sessions ORDER BY session_id").fetchall() == (
        sessions
    )
    return caught.value


# --- init, resume, note -----------------------------------------------------------------


def test_init_records_the_initial_checkpoint_at_head(rig: Rig) -> None:
    answer = rig.init(constraints=["no network"])
    head = git(rig.root, "rev-parse", "HEAD")
    assert answer["checkpoint"]["label"] == "initial"
    assert answer["checkpoint"]["git_head"] == head
    assert answer["checkpoint"]["restorable"] is True
    assert (answer["phase"], answer["S"], answer["required_action"]) == ("IDLE", 0, "plan")
    assert answer["related_lessons"] == []
    assert [e["payload"]["constraints"] for e in rig.events("ulysses.init")] == [["no network"]]
    assert rig.gate() == ({"session_id": answer["session_id"], "phase": "IDLE"}, rig.last_seq())
    assert gate.read_state(rig.conn) == (answer["session_id"], "IDLE")


def test_init_while_a_session_is_active_is_refused(rig: Rig) -> None:
    rig.init()
    refuses("SESSION_ACTIVE", rig, rig.init, "another problem")


def test_superseding_init_closes_the_old_session_and_abandons_its_step(rig: Rig) -> None:
    old = rig.init()["session_id"]
    rig.plan()
    fresh = rig.init("a different problem", supersede=True)
    assert fresh["superseded_session"] == old
    assert [e["subject"] for e in rig.events("ulysses.superseded")] == [old]
    row = rig.conn.execute(
        "SELECT status, state_json FROM ulysses_sessions WHERE session_id = ?", (old,)
    ).fetchone()
    assert row[0] == "superseded"
    assert json.loads(row[1])["steps"][-1]["result"] == "abandoned"
    assert rig.gate_state() == {"session_id": fresh["session_id"], "phase": "IDLE"}
    assert rig.conn.execute("SELECT count(*) FROM lessons").fetchone()[0] == 0


def test_init_offers_at_most_three_related_lessons(rig: Rig) -> None:
    for number in range(4):
        rig.init(f"login test flakes on runner {number}")
        rig.service.complete(
            {
                "terminalState": "environment_compromised",
                "summary": f"runner {number} had a broken clock; the login test trusts it",
            }
        )
    related = rig.init("the login test flakes again")["related_lessons"]
    assert len(related) == 3
    assert {"id", "title", "summary", "terminalState", "date", "path"} <= set(related[0])


def test_init_outside_git_reports_no_git(tmp_path: Path) -> None:
    from ithaca import init_project

    project, _ = init_project(tmp_path)
    try:
        service = UlyssesService(project.project, project.store, project.config)
        answer = service.init({"problem": "no repository here"})
    finally:
        project.close()
    assert answer["checkpoint"]["git_head"] is None
    assert [d["code"] for d in answer["diagnostics"]] == ["no_git"]


def test_resume_from_a_new_process_reloads_the_trace(rig: Rig) -> None:
    session_id = rig.init()["session_id"]
    rig.plan()
    rig.service.note({"thought": "the failure needs a cold cache", "kind": "evidence"})
    script = textwrap.dedent(
        f"""
        import json
        from ithaca import open_project
        from ithaca.ulysses.service import UlyssesService
        project = open_project({str(rig.root)!r})
        service = UlyssesService(project.project, project.store, project.config)
        print(json.dumps(service.resume({{"session_id": {session_id!r}}})))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=WAIT_SECONDS
    )
    assert done.returncode == 0, done.stderr
    resumed = json.loads(done.stdout)
    assert (resumed["session_id"], resumed["phase"]) == (session_id, "PRIMARY")
    assert resumed["active_step"]["primary"] == "raise the retry count"
    assert [note["thought"] for note in resumed["notes"]] == ["the failure needs a cold cache"]
    assert [event["kind"] for event in resumed["history"]] == [
        "ulysses.init",
        "ulysses.planned",
        "ulysses.noted",
    ]
    assert resumed["history_event_count"] == 3


def test_resume_naming_another_session_is_session_not_active(rig: Rig) -> None:
    active = rig.init()["session_id"]
    error = refuses("SESSION_NOT_ACTIVE", rig, rig.service.resume, {"session_id": "uly_OTHER"})
    assert error.details["active"] == active


def test_without_a_session_only_init_and_status_answer(rig: Rig) -> None:
    assert rig.service.status() == {"active": False}
    refuses("NO_ACTIVE_SESSION", rig, rig.service.note, {"thought": "hello"})
    refuses("NO_ACTIVE_SESSION", rig, rig.service.outcome, {"observed": None})
    refuses("NO_ACTIVE_SESSION", rig, rig.service.resume, {})


def test_note_adds_to_the_trace_without_changing_the_version(rig: Rig) -> None:
    rig.init()
    version = rig.state()["version"]
    first = rig.service.note({"thought": "seen twice", "data": {"runs": [1, 2]}})
    second = rig.service.note({"thought": "why now?", "kind": "question"})
    assert (first["note_seq"], second["note_seq"]) == (1, 2)
    assert rig.state()["version"] == version
    noted = rig.events("ulysses.noted")
    assert [e["payload"]["kind"] for e in noted] == ["observation", "question"]
    assert len(noted[0]["payload"]["data_digest"]) == 64
    assert "data_digest" not in noted[1]["payload"]
    assert rig.service.resume()["notes"][0]["data"] == {"runs": [1, 2]}


# --- plan -------------------------------------------------------------------------------


def test_plan_pins_both_validators_by_digest_in_the_journal(rig: Rig) -> None:
    rig.init()
    step = rig.plan()["active_step"]
    (planned,) = rig.events("ulysses.planned")
    blobs = BlobStore(rig.project.project.blobs_dir)
    for role in ("primary", "recovery"):
        pinned = planned["payload"][f"{role}Validator"]
        assert pinned["snapshotHash"] == step[f"{role}Validator"]["snapshotHash"]
        assert blobs.exists(pinned["snapshotHash"])
        row = rig.conn.execute(
            "SELECT owner_kind, owner_id, role, snapshot_digest, journal_seq"
            " FROM validator_bindings WHERE binding_id = ?",
            (pinned["binding_id"],),
        ).fetchone()
        assert row == ("ulysses", planned["subject"], role, pinned["snapshotHash"], planned["seq"])
    assert planned["payload"]["base"]["git_head"] == git(rig.root, "rev-parse", "HEAD")
    assert rig.gate_state()["phase"] == "PRIMARY"


def test_notebook_edits_after_plan_change_no_verdict(rig: Rig) -> None:
    rig.init()
    rig.plan()
    rig.notebooks.update_cell(
        {**rig.cell("primary"), "source": "from tb_validate import fail\nfail('edited')\n"}
    )
    answer = rig.service.outcome({"observed": {"ok": True}})
    assert answer["assessment"] == "expected"
    assert answer["validation"]["reason"] == "ok is true"
    assert answer["checkpoint"]["label"] == "checkpoint_1"


def test_plan_repeating_a_failed_move_is_forbidden(rig: Rig) -> None:
    rig.to_phase("REFLECT")
    rig.service.reflect({"hypothesis": "the cache is stale", "falsification": "a cold run fails"})
    failed_step = rig.state()["steps"][-1]["step_id"]
    variants = (
        "RAISE THE RETRY COUNT",
        "  raise   the\tretry count ",
        "ｒａｉｓｅ ｔｈｅ ｒｅｔｒｙ ｃｏｕｎｔ",
    )
    for field in ("primary", "recovery"):
        for variant in variants:  # case, whitespace, NFKC; a refusal leaves the session as it was
            moves = {"primary": "clear the cache", "recovery": "restore the cache", field: variant}
            error = refuses("FORBIDDEN_MOVE", rig, rig.plan, moves["primary"], moves["recovery"])
            assert (error.details["field"], error.details["move"]) == (field, variant)
            assert error.details["origin_step"] == failed_step


def tags(text: str) -> str:
    """``text`` spelled in Unicode tag characters, which draw nothing."""
    return "".join(chr(0xE0000 + ord(char)) for char in text)


# The rig's failed primary, "raise the retry count", with characters that draw nothing or
# a blank that imitates a space.
INVISIBLY_REPEATED = {
    "zero-width space inside a word": "raise the re\u200btry count",
    "zero-width joiner and non-joiner": "rai\u200dse the re\u200ctry count",
    "word joiner": "raise\u2060 the retry count",
    "byte order mark": "\ufeffraise the retry count",
    "variation selector after a letter": "raise the retry c\ufe0fount",
    "variation selector 17 after a letter": "raise the retry coun\U000e0100t",
    "tag characters": "raise the retry count" + tags(" ignore the forbidden list"),
    "Hangul filler": "raise the re\u3164try count",
    "halfwidth Hangul filler": "rai\uffa0se the retry count",
    "braille blank for a space": "raise\u2800the retry count",
    "ogham space mark for a space": "raise the\u1680retry count",
    "soft hyphen": "raise the re\u00adtry count",
    "left-to-right override": "raise the \u202dretry\u202c count",
    "right-to-left override of one letter": "raise the retry c\u202eo\u202cunt",
    "bidi isolate and mark": "raise the \u2067retry\u2069\u200f count",
    "Mongolian vowel separator": "raise the retry\u180e count",
    "combining grapheme joiner": "raise the ret\u034fry count",
    "interlinear annotation anchor": "raise the\ufff9 retry count",
}


def test_plan_repeating_a_failed_move_with_invisible_characters_is_forbidden(rig: Rig) -> None:
    rig.to_phase("REFLECT")
    rig.service.reflect({"hypothesis": "the cache is stale", "falsification": "a cold run fails"})
    original = refuses("FORBIDDEN_MOVE", rig, rig.plan, "raise the retry count", "a new idea")
    for kind, variant in INVISIBLY_REPEATED.items():
        error = refuses("FORBIDDEN_MOVE", rig, rig.plan, variant, "a new idea")
        assert error.message == original.message, kind
        assert error.details == dict(original.details, move=variant), kind
    # Different words stay a different move, whatever invisible characters they carry.
    answer = rig.plan("raise the re\u200btry\u2800limit", "re\u00advert the \ufe0flimit")
    assert answer["phase"] == "PRIMARY"
    assert rig.state()["active_step"]["primary"] == "raise the re\u200btry\u2800limit"


def test_plan_refusals_follow_the_phase(rig: Rig) -> None:
    rig.to_phase("PRIMARY")
    refuses("STEP_ACTIVE", rig, rig.plan, "another idea", "another fallback")
    rig.service.outcome({"observed": {"ok": False}})
    rig.service.outcome({"observed": {"ok": False}})
    refuses("REFLECT_REQUIRED", rig, rig.plan, "another idea", "another fallback")
    refuses("REFLECT_REQUIRED", rig, rig.service.outcome, {"observed": {"ok": True}})


def test_plan_with_an_unknown_cell_changes_nothing(rig: Rig) -> None:
    rig.init()
    ref = {"notebookId": rig.notebook_id, "cellId": "cell_MISSING"}
    arguments = {
        "primary": "a",
        "recovery": "b",
        "primaryValidator": ref,
        "recoveryValidator": rig.cell("recovery"),
    }
    refuses("CELL_NOT_FOUND", rig, rig.service.plan, arguments)


# --- outcome ----------------------------------------------------------------------------


def test_outcome_walks_primary_recovery_and_reflect(rig: Rig) -> None:
    rig.to_phase("PRIMARY")
    failed = rig.service.outcome({"observed": {"ok": False}, "details": "still red"})
    assert (failed["assessment"], failed["phase"], failed["S"]) == (
        "unexpected-unfavorable",
        "RECOVERY",
        2,
    )
    reflect = rig.service.outcome({"observed": {"ok": False}})
    assert (reflect["phase"], reflect["required_action"]) == ("REFLECT", "reflect")
    assert [m["text"] for m in reflect["forbidden_moves"]] == [
        "raise the retry count",
        "revert the retry change",
    ]
    outcomes = rig.events("ulysses.outcome")
    assert [(e["payload"]["from"], e["payload"]["to"]) for e in outcomes] == [
        ("PRIMARY", "RECOVERY"),
        ("RECOVERY", "REFLECT"),
    ]
    assert outcomes[0]["payload"]["details"] == "still red"
    assert outcomes[1]["payload"]["reflect_base"]["label"] == "reflect_base"
    runs = rig.conn.execute("SELECT count(*) FROM validator_runs").fetchone()[0]
    assert runs == 2
    assert rig.gate_state()["phase"] == "REFLECT"


def test_reflect_notices_a_changed_worktree_and_a_restated_hypothesis(rig: Rig) -> None:
    rig.to_phase("REFLECT")
    (rig.root / "app.txt").write_text("edited during reflection\n")
    answer = rig.service.reflect(
        {"hypothesis": "The cache is stale", "falsification": "the cache is stale"}
    )
    assert (answer["hypothesis_seq"], answer["hypothesis_count"], answer["phase"]) == (
        1,
        1,
        "IDLE",
    )
    assert [d["code"] for d in answer["diagnostics"]] == [
        "worktree_changed_during_reflect",
        "falsification_restates_hypothesis",
    ]


def test_reflect_outside_reflect_is_refused(rig: Rig) -> None:
    rig.to_phase("RECOVERY")
    arguments = {"hypothesis": "h", "falsification": "f"}
    refuses("RECOVERY_OUTCOME_PENDING", rig, rig.service.reflect, arguments)


def tamper_blob_bytes(rig: Rig, binding: dict[str, Any]) -> None:
    path = BlobStore(rig.project.project.blobs_dir).path(binding["snapshotHash"])
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes().replace(b"marker", b"marked"))


def tamper_delete_blob(rig: Rig, binding: dict[str, Any]) -> None:
    BlobStore(rig.project.project.blobs_dir).path(binding["snapshotHash"]).unlink()


def tamper_binding_digest(rig: Rig, binding: dict[str, Any]) -> None:
    with rig.project.store.write() as conn:
        conn.execute(
            "UPDATE validator_bindings SET snapshot_digest = ? WHERE binding_id = ?",
            ("0" * 64, binding["binding_id"]),
        )


def tamper_delete_binding(rig: Rig, binding: dict[str, Any]) -> None:
    with rig.project.store.write() as conn:
        conn.execute(
            "DELETE FROM validator_bindings WHERE binding_id = ?", (binding["binding_id"],)
        )


def tamper_journal_payload(rig: Rig, binding: dict[str, Any]) -> None:
    (planned,) = rig.events("ulysses.planned")
    payload = dict(planned["payload"], primary="something else entirely")
    with rig.project.store.write() as conn:
        conn.execute(
            "UPDATE journal SET payload = ? WHERE seq = ?", (json.dumps(payload), planned["seq"])
        )


@pytest.mark.parametrize(
    ("tamper", "kind"),
    [
        (tamper_blob_bytes, "blob_mismatch"),
        (tamper_delete_blob, "blob_missing"),
        (tamper_binding_digest, "binding_mismatch"),
        (tamper_delete_binding, "binding_mismatch"),
        (tamper_journal_payload, "binding_mismatch"),
    ],
    ids=["blob-bytes", "blob-deleted", "binding-digest", "binding-deleted", "journal-payload"],
)
def test_a_tampered_validator_runs_nothing_and_forces_reflect(
    rig: Rig, spawned: list[Any], tamper: Any, kind: str
) -> None:
    rig.init()
    rig.plan(primary_cell="marker", primary_source=MARKER)
    (planned,) = rig.events("ulysses.planned")
    tamper(rig, planned["payload"]["primaryValidator"])

    answer = rig.service.outcome({"observed": {"ok": True}})

    assert spawned == []
    assert answer["validatorTampering"] is True
    assert (answer["phase"], answer["S"]) == ("REFLECT", 2)
    assert answer["validation"]["reason"] == "snapshot_hash_mismatch"
    assert answer["validation"]["cause"] == kind
    (event,) = rig.events("ulysses.validator_tampering")
    assert (event["payload"]["role"], event["payload"]["kind"]) == ("primary", kind)
    assert {m["reason"] for m in rig.state()["forbidden_moves"]} == {"tampered"}
    rig.service.reflect({"hypothesis": "someone edits blobs", "falsification": "blobs intact"})
    refuses(
        "FORBIDDEN_MOVE",
        rig,
        lambda: rig.plan("Raise the retry count", "a new fallback", primary_cell="marker"),
    )
    assert rig.gate_state()["phase"] == "IDLE"


def test_a_crash_between_run_and_commit_changes_nothing_and_the_call_can_repeat(
    rig: Rig, spawned: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    rig.init()
    rig.plan(primary_cell="marker", primary_source=MARKER)
    before = rig.state()
    seq = rig.last_seq()
    real = machine.transition

    def crash(*args: Any) -> Any:
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(machine, "transition", crash)
    with pytest.raises(KeyboardInterrupt):
        rig.service.outcome({"observed": {"ok": True}})
    assert [outcome.stdout for outcome in spawned] == ["marker ran\n"]  # the validator did run
    assert rig.state() == before
    assert rig.last_seq() == seq
    assert rig.conn.execute("SELECT count(*) FROM validator_runs").fetchone()[0] == 0

    monkeypatch.setattr(machine, "transition", real)
    answer = rig.service.outcome({"observed": {"ok": True}})
    assert answer["assessment"] == "expected"
    assert len(rig.events("ulysses.outcome")) == 1


OUTCOME_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from ithaca import open_project
    from ithaca.kernel.errors import IthacaError
    from ithaca.ulysses.service import UlyssesService
    project = open_project(sys.argv[1])
    service = UlyssesService(project.project, project.store, project.config)
    try:
        answer = service.outcome({"observed": {"folder": sys.argv[2]}})
        print(json.dumps({"phase": answer["phase"]}))
    except IthacaError as exc:
        print(json.dumps({"error": exc.code}))
    """
)


def test_two_concurrent_outcomes_make_one_transition(rig: Rig, tmp_path: Path) -> None:
    rig.init()
    rig.plan(primary_cell="waiter", primary_source=WAITER)
    version = rig.state()["version"]
    folder = tmp_path / "gate"
    folder.mkdir()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", OUTCOME_SCRIPT, str(rig.root), str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    deadline = time.monotonic() + WAIT_SECONDS
    while not all(runs_a_cell(p.pid, "waiter.py") for p in processes):  # both read the state
        assert time.monotonic() < deadline, "the validators never started"
        for process in processes:
            assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    (folder / "go").write_text("")
    answers = []
    for process in processes:
        out, err = process.communicate(timeout=WAIT_SECONDS)
        assert process.returncode == 0, err
        answers.append(json.loads(out))

    assert sorted(answers, key=str) == [{"error": "STATE_CONFLICT"}, {"phase": "IDLE"}]
    assert len(rig.events("ulysses.outcome")) == 1
    assert rig.state()["version"] == version + 1


def test_a_rollback_during_a_run_voids_it(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    rig.init()
    rig.plan()
    run = bindings.run

    def run_while_the_user_rolls_back(*args: Any, **kwargs: Any) -> dict[str, Any]:
        result = run(*args, **kwargs)
        rig.service.rollback({"label": "initial"})
        return result

    monkeypatch.setattr(bindings, "run", run_while_the_user_rolls_back)
    with pytest.raises(Conflict) as caught:
        rig.service.outcome({"observed": {"ok": True}})
    assert caught.value.code == "STATE_CONFLICT"
    assert rig.events("ulysses.outcome") == []
    assert rig.state()["phase"] == "PRIMARY"


def test_a_git_failure_refuses_with_its_code_but_reflect_goes_on(rig: Rig) -> None:
    rig.to_phase("RECOVERY")
    index = rig.root / ".git" / "index"
    intact = index.read_bytes()
    index.write_bytes(b"not an index")  # HEAD still resolves; `git status` fails

    error = refuses("GIT_FAILED", rig, rig.service.outcome, {"observed": {"ok": False}})
    assert isinstance(error, Refused) and "git status failed" in error.message

    index.write_bytes(intact)
    rig.service.outcome({"observed": {"ok": False}})
    index.write_bytes(b"not an index")
    answer = rig.service.reflect({"hypothesis": "the index is stale", "falsification": "rebuild"})
    assert answer["phase"] == "IDLE"
    assert [d["code"] for d in answer["diagnostics"]] == ["worktree_unreadable"]
    (reflected,) = rig.events("ulysses.reflected")
    assert reflected["payload"]["worktree_digest"] is None


# --- final validator and complete -------------------------------------------------------


def test_resolved_needs_a_bound_final_validator_a_summary_and_observed(rig: Rig) -> None:
    rig.init()
    resolved = {"terminalState": "resolved", "summary": "s" * 50, "observed": {"ok": True}}
    refuses("FINAL_VALIDATOR_REQUIRED", rig, rig.service.complete, resolved)
    rig.bind_final()
    no_summary = {"terminalState": "resolved", "observed": {"ok": True}}
    refuses("SUMMARY_REQUIRED", rig, rig.service.complete, no_summary)
    refuses("SUMMARY_REQUIRED", rig, rig.service.complete, {**resolved, "summary": "  "})
    no_observed = {"terminalState": "resolved", "summary": "s" * 50}
    refuses("OBSERVED_REQUIRED", rig, rig.service.complete, no_observed)
    refuses(
        "FINAL_VALIDATOR_ALREADY_BOUND", rig, rig.service.bind_final_validator, rig.cell("other")
    )


def test_a_failing_final_validator_leaves_the_state(rig: Rig) -> None:
    rig.init()
    rig.bind_final()
    rig.plan()
    arguments = {"terminalState": "resolved", "summary": "s" * 50, "observed": {"ok": False}}
    error = refuses("FINAL_VALIDATOR_FAILED", rig, rig.service.complete, arguments)
    assert error.details["validation"]["reason"] == "ok is not true"
    assert rig.state()["phase"] == "PRIMARY"


def test_resolved_is_refused_in_reflect(rig: Rig) -> None:
    rig.init()
    rig.bind_final()
    rig.plan()
    rig.service.outcome({"observed": {"ok": False}})
    rig.service.outcome({"observed": {"ok": False}})
    arguments = {"terminalState": "resolved", "summary": "s" * 50, "observed": {"ok": True}}
    refuses("REFLECT_REQUIRED", rig, rig.service.complete, arguments)


def test_resolved_with_a_passing_final_validator_records_a_lesson(rig: Rig) -> None:
    session_id = rig.init()["session_id"]
    rig.bind_final()
    rig.plan()
    rig.service.outcome({"observed": {"ok": True}})
    summary = "Raising the retry count hides the race; the fix is to await the login event."
    answer = rig.service.complete(
        {"terminalState": "resolved", "summary": summary, "observed": {"ok": True}}
    )
    assert (answer["status"], answer["terminalState"]) == ("resolved", "resolved")
    assert answer["validation"]["pass"] is True
    assert answer["diagnostics"] == []
    assert (rig.root / answer["lesson"]["path"]).is_file()
    (completed,) = rig.events("ulysses.completed")
    assert completed["payload"]["lesson"]["id"] == answer["lesson"]["id"]
    assert completed["payload"]["final"]["evidenceDigest"] == answer["validation"]["evidenceDigest"]
    assert rig.events("knowledge.lesson_recorded")[0]["seq"] < completed["seq"]
    assert rig.gate() is None
    assert rig.service.status()["last_session"]["session_id"] == session_id


def test_a_tampered_final_validator_persists_reflect_then_refuses(rig: Rig) -> None:
    rig.init()
    bound = rig.bind_final()["finalValidator"]
    rig.plan()
    tamper_delete_blob(rig, bound)
    arguments = {"terminalState": "resolved", "summary": "s" * 50, "observed": {"ok": True}}
    with pytest.raises(Corrupt) as caught:
        rig.service.complete(arguments)
    assert caught.value.code == "VALIDATOR_TAMPERED"
    state = rig.state()
    assert (state["status"], state["phase"]) == ("active", "REFLECT")
    assert state["steps"][-1]["result"] == "tampered"
    (event,) = rig.events("ulysses.validator_tampering")
    assert (event["payload"]["role"], event["payload"]["kind"]) == ("final", "blob_missing")
    assert rig.gate_state()["phase"] == "REFLECT"
    assert rig.events("ulysses.completed") == []


@pytest.mark.parametrize("missing", [None, []])
def test_insufficient_information_needs_a_missing_list(rig: Rig, missing: Any) -> None:
    rig.init()
    arguments: dict[str, Any] = {"terminalState": "insufficient_information"}
    if missing is not None:
        arguments["missing"] = missing
    refuses("MISSING_LIST_REQUIRED", rig, rig.service.complete, arguments)


@pytest.mark.parametrize("phase", ["IDLE", "PRIMARY", "RECOVERY", "REFLECT"])
def test_environment_compromised_closes_from_every_phase(rig: Rig, phase: str) -> None:
    rig.to_phase(phase)
    answer = rig.service.complete({"terminalState": "environment_compromised", "summary": "x"})
    assert answer["status"] == "environment_compromised"
    assert "lesson" in answer
    assert [d["code"] for d in answer["diagnostics"]] == ["thin_summary"]
    assert rig.gate() is None
    assert rig.service.status()["active"] is False


def test_insufficient_information_with_a_blank_summary_records_no_lesson(rig: Rig) -> None:
    rig.init()
    answer = rig.service.complete(
        {
            "terminalState": "insufficient_information",
            "missing": ["the CI runner's clock"],
            "summary": "  ",
        }
    )
    assert "lesson" not in answer
    assert answer["diagnostics"] == []
    (completed,) = rig.events("ulysses.completed")
    assert completed["payload"] == {
        "terminalState": "insufficient_information",
        "missing": ["the CI runner's clock"],
    }


# --- rollback ---------------------------------------------------------------------------


def test_rollback_restores_the_worktree_and_keeps_the_phase(rig: Rig) -> None:
    (rig.root / "gone.txt").write_text("tracked\n")
    git(rig.root, "add", "gone.txt")
    git(rig.root, "commit", "-qm", "gone")
    (rig.root / "untracked.txt").write_text("kept in the snapshot\n")
    rig.init()
    rig.plan(irreversible=True)
    version = rig.state()["version"]
    (rig.root / "app.txt").write_text("the second version\n")
    (rig.root / "gone.txt").unlink()
    (rig.root / "untracked.txt").unlink()
    (rig.root / "new.txt").write_text("made after the checkpoint\n")
    state_file = rig.root / ".ithaca" / "notes.txt"
    state_file.write_text("Ithaca's own\n")

    answer = rig.service.rollback({"label": "initial"})

    assert (rig.root / "app.txt").read_text() == "one\n"
    assert (rig.root / "gone.txt").read_text() == "tracked\n"
    assert (rig.root / "untracked.txt").read_text() == "kept in the snapshot\n"
    assert not (rig.root / "new.txt").exists()
    assert state_file.read_text() == "Ithaca's own\n"
    assert answer["pre_rollback"]["label"] == "pre_rollback_1"
    assert any("irreversible" in warning for warning in answer["warnings"])
    state = rig.state()
    assert (state["phase"], state["version"]) == ("PRIMARY", version + 1)
    assert [p["label"] for p in state["checkpoints"]] == ["initial", "pre_rollback_1"]
    (event,) = rig.events("ulysses.rolled_back")
    assert event["actor"] == "user"
    assert event["payload"]["checkpoint"]["label"] == "initial"


def test_rollback_to_an_unknown_checkpoint_is_refused(rig: Rig) -> None:
    rig.init()
    refuses("CHECKPOINT_NOT_FOUND", rig, rig.service.rollback, {"label": "checkpoint_9"})


def test_the_mcp_tool_cannot_roll_back(rig: Rig) -> None:
    rig.init()
    error = refuses("USER_ONLY", rig, rig.service.dispatch, {"operation": "rollback", "label": "x"})
    assert isinstance(error, Refused)


# --- dispatch ---------------------------------------------------------------------------


def test_dispatch_runs_each_operation_and_accepts_the_host_session(rig: Rig) -> None:
    host = {"session": "host-session-1"}
    started = rig.service.dispatch({"operation": "init", "problem": "p", **host})
    noted = rig.service.dispatch({"operation": "note", "thought": "t", **host})
    status = rig.service.dispatch({"operation": "status", **host})
    assert started["phase"] == "IDLE"
    assert noted["note_seq"] == 1
    assert status["active"] is True and status["history_event_count"] == 2


def test_dispatch_refuses_malformed_input_with_a_pointer(rig: Rig) -> None:
    rig.init()
    with pytest.raises(InvalidInput) as caught:
        rig.service.dispatch({"operation": "reflect", "hypothesis": "h", "falsification": 3})
    assert caught.value.details == {"pointer": "/falsification", "problem": "WRONG_TYPE"}
    with pytest.raises(InvalidInput) as oversize:
        rig.service.dispatch({"operation": "outcome", "observed": "x" * (1024 * 1024 + 1)})
    assert oversize.value.code == "OBSERVED_TOO_LARGE"


# --- malformed input, property ----------------------------------------------------------

CELL = {"notebookId": "nb_x", "cellId": "cell_x"}
VALID: dict[str, dict[str, Any]] = {
    "init": {"problem": "p", "constraints": ["c"], "supersede": False},
    "plan": {
        "primary": "a",
        "recovery": "b",
        "irreversible": False,
        "primaryValidator": CELL,
        "recoveryValidator": CELL,
    },
    "outcome": {"observed": {"ok": True}, "details": "d"},
    "bind_final_validator": dict(CELL),
    "reflect": {"hypothesis": "h", "falsification": "f"},
    "note": {"thought": "t", "kind": "evidence", "data": {"x": 1}},
    "status": {},
    "resume": {"session_id": "uly_x"},
    "complete": {"terminalState": "resolved", "summary": "s", "observed": {}},
}
FIELD_KINDS: dict[str, dict[str, str]] = {
    "init": {"problem": "text", "constraints": "list", "supersede": "flag"},
    "plan": {
        "primary": "text",
        "recovery": "text",
        "irreversible": "flag",
        "primaryValidator": "cell",
        "recoveryValidator": "cell",
    },
    "outcome": {"details": "optional_text"},
    "bind_final_validator": {"notebookId": "text", "cellId": "text"},
    "reflect": {"hypothesis": "text", "falsification": "text"},
    "note": {"thought": "text", "kind": "choice"},
    "status": {},
    "resume": {"session_id": "text"},
    "complete": {"terminalState": "choice", "summary": "optional_text"},
}
WRONG_VALUES: dict[str, list[Any]] = {
    "text": [5, None, [], {}, True, "   ", "x" * 8001],
    "optional_text": [5, None, ["x"], "x" * 8001],
    "list": ["x", {}, [1], ["  "], ["x"] * 51],
    "flag": ["yes", 1, None],
    "cell": ["x", [], {"notebookId": "n"}, {**CELL, "extra": 1}, {**CELL, "cellId": ""}],
    "choice": ["nope", 5, None],
}
REQUIRED: dict[str, list[str]] = {
    "init": ["problem"],
    "plan": ["primary", "recovery", "primaryValidator", "recoveryValidator"],
    "outcome": ["observed"],
    "bind_final_validator": ["notebookId", "cellId"],
    "reflect": ["hypothesis", "falsification"],
    "note": ["thought"],
    "complete": ["terminalState", "summary", "observed"],
}


@st.composite
def malformed(draw: st.DrawFn) -> Any:
    operation = draw(st.sampled_from(sorted(VALID)))
    arguments = {"operation": operation, **copy.deepcopy(VALID[operation])}
    mutations = ["unknown", "operation", "session", "nan", "not_object"]
    if FIELD_KINDS[operation]:
        mutations.append("wrong")
    if REQUIRED.get(operation):
        mutations.append("drop")
    mutation = draw(st.sampled_from(mutations))
    if mutation == "unknown":
        arguments[draw(st.sampled_from(["bogus", "Problem", "observed_", "step"]))] = 1
    elif mutation == "operation":
        arguments["operation"] = draw(st.sampled_from(["", "Init", "finish", None, 3]))
    elif mutation == "session":
        arguments["session"] = draw(st.sampled_from(["has space", "", "é", 7]))
    elif mutation == "nan":
        arguments["observed" if operation == "outcome" else "extra"] = float("nan")
    elif mutation == "not_object":
        return draw(st.sampled_from([[arguments], operation, None]))
    elif mutation == "wrong":
        field, kind = draw(st.sampled_from(sorted(FIELD_KINDS[operation].items())))
        arguments[field] = draw(st.sampled_from(WRONG_VALUES[kind]))
    else:
        del arguments[draw(st.sampled_from(REQUIRED[operation]))]
    return arguments


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(arguments=malformed())
def test_malformed_input_of_every_operation_is_refused_before_anything(
    rig: Rig, arguments: Any
) -> None:
    if rig.conn.execute("SELECT count(*) FROM ulysses_sessions").fetchone()[0] == 0:
        rig.init()
        rig.plan()
    seq = rig.last_seq()
    with pytest.raises(InvalidInput) as caught:
        rig.service.dispatch(arguments)
    assert caught.value.code in {
        "INVALID_INPUT",
        "SUMMARY_REQUIRED",
        "OBSERVED_REQUIRED",
        "OBSERVED_TOO_LARGE",
    }
    if caught.value.code == "INVALID_INPUT":
        assert {"pointer", "problem"} <= set(caught.value.details)
    assert rig.last_seq() == seq


# --- the final validator is fixed before the fix, and can fail -----------------------------

PROBE_MARKER = """\
import os
from tb_validate import pass_, fail
fixed = os.path.exists(os.path.join(os.environ["ITHACA_PROJECT_ROOT"], "fixed.txt"))
pass_("the fix is in place") if fixed else fail("fixed.txt is missing")
"""


def probe(rig: Rig, name: str = "probe") -> dict[str, str]:
    if name not in rig.cells:
        added = rig.notebooks.add_cell(
            {
                "notebookId": rig.notebook_id,
                "source": PROBE_MARKER,
                "filename": f"{name}.py",
                "mode": "probe",
            }
        )
        rig.cells[name] = {"notebookId": rig.notebook_id, "cellId": added["cellId"]}
    return rig.cells[name]


def test_a_final_validator_that_passes_on_the_problem_is_refused(rig: Rig) -> None:
    rig.init()
    error = refuses(
        "FINAL_VALIDATOR_CANNOT_FAIL",
        rig,
        rig.service.bind_final_validator,
        {**rig.cell("final"), "observed": {"ok": True}},
    )
    assert error.details["validation"]["pass"] is True
    assert rig.state()["finalValidator"] is None


def test_a_judge_final_validator_needs_the_problem_as_it_stands(rig: Rig) -> None:
    rig.init()
    refuses("PROBLEM_OBSERVATION_REQUIRED", rig, rig.service.bind_final_validator, rig.cell("f"))
    bound = rig.bind_final("f")
    assert bound["finalValidator"]["cellId"] == rig.cell("f")["cellId"]
    (event,) = rig.events("ulysses.final_validator_bound")
    assert event["actor"] == "agent"
    assert event["payload"]["failsOnProblem"]["reason"] == "ok is not true"


def test_a_probe_final_validator_measures_the_project_as_it_stands(rig: Rig) -> None:
    rig.init()
    (rig.root / "fixed.txt").write_text("already\n")
    refuses("FINAL_VALIDATOR_CANNOT_FAIL", rig, rig.service.bind_final_validator, probe(rig))
    (rig.root / "fixed.txt").unlink()
    rig.service.bind_final_validator(probe(rig))  # no observed: a probe looks for itself
    assert rig.state()["finalValidator"]["mode"] == "probe"


def test_after_the_first_outcome_only_the_user_binds_on_the_first_failing_data(rig: Rig) -> None:
    rig.init()
    rig.plan()
    rig.service.outcome({"observed": {"ok": False, "seen": "first"}})
    for name in ("final", "other"):
        rig.cell(name)  # made before the refusals, which must leave the journal as it was
    refuses("FINAL_VALIDATOR_LATE", rig, rig.bind_final)
    bound = rig.service.replace_final_validator(rig.cell("final"))  # the CLI's --replace
    assert bound["finalValidator"]["cellId"] == rig.cell("final")["cellId"]
    (event,) = rig.events("ulysses.final_validator_bound")
    assert event["actor"] == "user"
    refuses("FINAL_VALIDATOR_ALREADY_BOUND", rig, rig.bind_final, "other")
    rig.service.replace_final_validator(rig.cell("other"))
    latest = rig.events("ulysses.final_validator_bound")[-1]
    assert latest["payload"]["replaced"] == event["payload"]["binding_id"]


def test_the_agent_cannot_replace_the_final_validator_through_dispatch(rig: Rig) -> None:
    rig.init()
    rig.bind_final()
    error = refuses(
        "USER_ONLY",
        rig,
        rig.service.dispatch,
        {"operation": "replace_final_validator", **rig.cell("other")},
    )
    assert error.details["reason"] == "cli_only"
