"""Kill a real writer with SIGKILL at a random moment, then check what survived.

Shared by ``tests/reliability/test_kills.py`` (a few kills) and ``bench/kill_campaign.py``
(hundreds). Rounds share a project (the bench starts a fresh one every 50 rounds, as the
team ledger each record call rewrites grows with every task), so each writer also opens
whatever the earlier kills left behind.

**The writer** is this file run as a script (``python kill_harness.py PROJECT ROUND
UNITS``): a separate Python process that opens the project with the public API and
repeats a unit of delivery and protocols work ``UNITS`` times: open a change, accept a
decision, define a task, start it (a session and its packet), complete it with an outcome,
append an event, bind a research artifact, admit a protocols event and load its bundle.
Each record call also publishes the team ledger (``.ithaca/tasks/tasks.json``). Before
each operation it prints ``BEGIN {json}`` and, once the call has returned, ``ACK {json}``
(flushed): an ACK is the success the caller was told about.

**The kill.** The parent stops the writer (SIGSTOP) at the chosen moment, looks at what
it is doing, then kills it (SIGKILL; a stopped process dies at once). A kill is
*mid-write* when, at that instant, the writer held SQLite's WAL write lock (an exclusive
POSIX lock on byte 120 of ``state.db-shm``, read from ``/proc/locks``: it is taken by
``BEGIN IMMEDIATE`` and released when the ``COMMIT`` has finished) or had the temporary
file of an atomic file write open (``.ithaca-<16 hex>.tmp`` among ``/proc/PID/fd``).
A *random* kill picks its moment uniformly in ``[0, duration)`` after the spawn, where
``duration`` is the measured life of an unkilled writer. An *aimed* kill starts at such
a moment too, then stops and resumes the writer every 0-2 ms until it is caught
mid-write (at most ``AIM_TRIES`` looks), so mid-write kills are certain to occur.

**After each kill** ``ithaca doctor --json`` runs first (nothing else opens the store
before it). If it has findings, ``ithaca doctor --repair`` runs and then doctor again.
Then, read with plain ``sqlite3``:

- *lost*: an acknowledged operation whose result is not in the store (or its file is
  missing or differs from the digest the store registered).
- *half-written*: a kill after which a reader can see something partial that doctor did
  not flag or its repair did not settle: a row without its journal event or an event
  without its row, a journal chain that does not verify, ``PRAGMA integrity_check`` not
  ``ok``, a completed task without its outcome artifact (or an outcome file that is
  missing or does not parse), a registered file that is missing or differs from its
  digest, a file under ``changes/`` that nothing registered, a tracked JSON file that
  does not parse, a file write intent still unsettled, or a ``.ithaca-*.tmp`` left
  anywhere in the project. A state that stays counts once, for the kill that left it.
- *false completion*: a task marked completed that no writer asked to complete.
- *unhealthy*: doctor still reports findings after ``--repair``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
AIM_TRIES = 400
TEMP_NAME = re.compile(r"\.ithaca-[0-9a-f]{16}\.tmp$")
WAL_WRITE_LOCK_BYTE = 120  # SQLite's WAL_WRITE_LOCK: byte 120 of the -shm file
# Row table -> (journal kind, SQL for the subject ids of the campaign's rows)
PAIRS = {
    "change": ("delivery.change_opened", "SELECT id FROM delivery_changes WHERE id LIKE 'kc-%'"),
    "decision": (
        "delivery.decision_accepted",
        "SELECT id FROM delivery_decisions WHERE scope_id LIKE 'kc-%'",
    ),
    "task": ("delivery.task_defined", "SELECT id FROM delivery_tasks WHERE id LIKE 'K%'"),
    "completed task": (
        "delivery.task_completed",
        "SELECT id FROM delivery_tasks WHERE id LIKE 'K%' AND status = 'completed'",
    ),
    "session": ("delivery.session_spawned", "SELECT id FROM delivery_sessions"),
    "artifact": (
        "delivery.artifact_bound",
        "SELECT id FROM delivery_artifacts WHERE kind = 'research'",
    ),
    "protocols event": ("protocols.event_admitted", "SELECT id FROM protocol_events"),
}
CAMPAIGN_EVENTS = {
    "delivery.change_opened": "subject LIKE 'kc-%'",
    "delivery.decision_accepted": "json_extract(payload, '$.path') LIKE 'changes/active/kc-%'",
    "delivery.task_defined": "subject LIKE 'K%'",
    "delivery.task_completed": "subject LIKE 'K%'",
    "delivery.session_spawned": "1",
    "delivery.artifact_bound": "json_extract(payload, '$.kind') = 'research'",
    "protocols.event_admitted": "1",
}


# --- the writer ---------------------------------------------------------------------------


def drive(project_dir: str, round_no: int, units: int) -> None:
    """The writer process: ``units`` units of work, BEGIN/ACK lines on stdout."""
    import ithaca

    began = time.perf_counter()
    project = ithaca.open_project(project_dir)
    service = project.delivery
    _say("READY", {})

    def record(key: str, kind: str, action: str, data: dict[str, Any]) -> dict[str, Any]:
        entry = {"kind": kind, "action": action, "data": data, "idempotency_key": key}
        answer: dict[str, Any] = service.record({"entries": [entry]})["results"][0]
        return answer

    for unit in range(units):
        change = f"kc-r{round_no}-u{unit}"
        task = f"K{round_no}-{unit}"
        _say("BEGIN", {"op": "change", "id": change})
        body = {"id": change, "kind": "standard", "title": "Kill", "intent": f"# {change}\n"}
        record(f"{change}-open", "change_contract", "open", body)
        _say("ACK", {"op": "change", "id": change})
        _say("BEGIN", {"op": "decision", "change": change})
        decided = record(
            f"{change}-decide",
            "decision",
            "accept",
            {
                "scope": {"change_id": change},
                "question": "Where does it live?",
                "recommendation": "here",
                "selection": {"choice": "here", "rationale": "it is simplest"},
                "owner": "campaign",
            },
        )
        _say("ACK", {"op": "decision", "id": decided["result"]["decision"]["id"]})
        _say("BEGIN", {"op": "task", "id": task})
        contract = {
            "id": task,
            "change_id": change,
            "title": "Do it",
            "verification": {"argv": ["true"]},
            "files_modified": ["src/app.py"],
        }
        record(f"{task}-define", "task_contract", "define", contract)
        _say("ACK", {"op": "task", "id": task})
        _say("BEGIN", {"op": "start", "task": task})
        started = record(f"{task}-start", "task_outcome", "start", {"task_id": task})["result"]
        _say("ACK", {"op": "start", "task": task, "session": started["session"]["id"]})
        output = {
            "task_id": task,
            "status": "completed",
            "summary": f"{task} done",
            "changed_files": ["src/app.py"],
            "verification": {"argv": ["true"], "exit_code": 0},
        }
        _say("BEGIN", {"op": "complete", "task": task})
        done = record(
            f"{task}-complete",
            "task_outcome",
            "complete",
            {
                "task_id": task,
                "session_id": started["session"]["id"],
                "packet_digest": started["packet"]["digest"],
                "output": output,
            },
        )
        artifact = done["result"]["artifact"]
        _say("ACK", {"op": "complete", "task": task, "outcome": artifact["path"]})
        _say("BEGIN", {"op": "event", "round": round_no, "n": unit})
        noted = record(
            f"{change}-note",
            "event",
            "append",
            {"type": "kill_note", "payload": {"round": round_no, "n": unit}},
        )
        _say("ACK", {"op": "event", "round": round_no, "n": unit, "seq": noted["journal_seq"]})
        _say("BEGIN", {"op": "artifact", "change": change})
        bound = record(
            f"{change}-research",
            "artifact",
            "bind",
            {
                "kind": "research",
                "scope": {"change_id": change},
                "path": f"research/{change}.md",
                "content": f"# {change}\n\nFound {unit}.\n",
            },
        )
        path = bound["result"]["artifact"]["path"]
        _say("ACK", {"op": "artifact", "id": bound["result"]["artifact"]["id"], "path": path})
        _say("BEGIN", {"op": "admit"})
        event = project.protocols.admit_event(connector="test", host_session_id=change)
        _say("ACK", {"op": "admit", "id": event["id"]})
        _say("BEGIN", {"op": "load", "id": event["id"]})
        project.protocols.load_protocols({"eventId": event["id"]})
        _say("ACK", {"op": "load", "id": event["id"]})
    project.close()
    _say("DONE", {"seconds": time.perf_counter() - began})


def _say(tag: str, data: dict[str, Any]) -> None:
    sys.stdout.write(f"{tag} {json.dumps(data)}\n")
    sys.stdout.flush()


# --- one round ----------------------------------------------------------------------------


@dataclass
class Totals:
    """What the rounds found, summed."""

    rounds: int = 0
    kills: int = 0
    aimed: int = 0
    mid_write: int = 0
    mid_write_random: int = 0
    kills_random: int = 0
    in_db_write: int = 0
    in_file_write: int = 0
    in_operation: int = 0
    in_startup: int = 0
    finished_first: int = 0
    acked: int = 0
    lost: int = 0
    half_written: int = 0
    false_completions: int = 0
    doctor_findings: int = 0
    repairs: int = 0
    unhealthy_rounds: int = 0
    pending_intents: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    finding_codes: Counter[str] = field(default_factory=Counter)
    half_kinds: Counter[str] = field(default_factory=Counter)
    seen: set[str] = field(default_factory=set)


def spawn(project_dir: Path, round_no: int, units: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE), str(project_dir), str(round_no), str(units)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def make_project(project_dir: Path) -> Path:
    """A fresh Git repository with ``ithaca init`` applied."""
    from ithaca import init_project

    project_dir.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(project_dir)], check=True)
    made, _ = init_project(project_dir)
    made.close()
    return project_dir


def calibrate(project_dir: Path, round_no: int, units: int, totals: Totals) -> float:
    """Run one writer to the end (checked like any round); returns its life in seconds,
    spawn to exit. Its work is numbered ``round_no``."""
    began = time.perf_counter()
    process = spawn(project_dir, round_no, units)
    out, err = process.communicate(timeout=300)
    seconds = time.perf_counter() - began
    if process.returncode != 0:
        raise RuntimeError(f"the unkilled writer failed ({process.returncode}): {err[-2000:]}")
    check_round(project_dir, round_no, out, totals, killed=False)
    return seconds


def kill_round(
    project_dir: Path,
    round_no: int,
    units: int,
    duration: float,
    rng: random.Random,
    totals: Totals,
    *,
    aim: bool,
    target: str = "any",
) -> None:
    """Spawn a writer, kill it at a random moment (aimed: when caught mid-write, in a
    database write with ``target="db"``, in a file write with ``"file"``), check."""
    state = project_dir / ".ithaca" / ".runtime"
    delay = rng.uniform(0, duration)
    process = spawn(project_dir, round_no, units)
    time.sleep(delay)
    caught = _look(process.pid, state)
    tries = 1
    wanted = {"any": any, "db": lambda seen: seen[0], "file": lambda seen: seen[1]}[target]
    while aim and caught is not None and not wanted(caught) and tries < AIM_TRIES:
        os.kill(process.pid, signal.SIGCONT)
        time.sleep(rng.uniform(0, 0.002))
        caught = _look(process.pid, state)
        tries += 1
    if caught is None:  # the writer had already finished: not a kill
        totals.finished_first += 1
        out, _ = process.communicate(timeout=60)
        check_round(project_dir, round_no, out, totals, killed=False)
        return
    os.kill(process.pid, signal.SIGKILL)
    out, _ = process.communicate(timeout=60)
    db_write, file_write = caught
    totals.kills += 1
    totals.aimed += aim
    totals.kills_random += not aim
    totals.in_db_write += db_write
    totals.in_file_write += file_write
    totals.mid_write += db_write or file_write
    totals.mid_write_random += (db_write or file_write) and not aim
    check_round(project_dir, round_no, out, totals, killed=True)


def _look(pid: int, state: Path) -> tuple[bool, bool] | None:
    """Stop the writer and say (holds the WAL write lock, has a temp file open); None
    when it has already exited (it is then left to be reaped)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return None
    if not _stopped(pid):
        return None
    return _holds_write_lock(pid, state / "state.db-shm"), _writing_temp(pid)


def _stopped(pid: int) -> bool:
    """Wait until the kernel reports the process stopped (SIGSTOP is asynchronous)."""
    for _ in range(2000):
        try:
            status = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        code = status.rsplit(")", 1)[1].split()[0]
        if code == "T":
            return True
        if code in ("Z", "X"):
            return False
        time.sleep(0.0001)
    return False


def _holds_write_lock(pid: int, shm: Path) -> bool:
    try:
        inode = shm.stat().st_ino
        locks = Path("/proc/locks").read_text()
    except OSError:
        return False
    for line in locks.splitlines():
        parts = line.split()
        # "1: POSIX  ADVISORY  WRITE 1234 08:01:5678 120 120"
        if len(parts) < 8 or parts[1] != "POSIX" or parts[3] != "WRITE":
            continue
        if parts[4] != str(pid) or parts[5].rsplit(":", 1)[1] != str(inode):
            continue
        start, end = int(parts[6]), parts[7]
        stop = int(end) if end != "EOF" else 1 << 62
        if start <= WAL_WRITE_LOCK_BYTE <= stop:
            return True
    return False


def _writing_temp(pid: int) -> bool:
    folder = Path(f"/proc/{pid}/fd")
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    for name in names:
        try:
            target = os.readlink(folder / name)
        except OSError:
            continue
        if TEMP_NAME.search(target):
            return True
    return False


# --- the checks ---------------------------------------------------------------------------


def _lines(out: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for line in out.splitlines():
        tag, _, rest = line.partition(" ")
        try:
            found.append((tag, json.loads(rest)))
        except ValueError:
            continue  # a line cut by the kill
    return found


def check_round(
    project_dir: Path, round_no: int, out: str, totals: Totals, *, killed: bool
) -> None:
    totals.rounds += 1
    lines = _lines(out)
    begun = [data for tag, data in lines if tag == "BEGIN"]
    acked = [data for tag, data in lines if tag == "ACK"]
    if killed and len(begun) > len(acked):
        totals.in_operation += 1
    if killed and not any(tag == "READY" for tag, _ in lines):
        totals.in_startup += 1
    totals.acked += len(acked)
    _remember_completions(project_dir, begun)
    doctor = _doctor(project_dir)
    findings = doctor.get("findings", [])
    totals.doctor_findings += len(findings)
    totals.finding_codes.update(str(f.get("code") or f.get("id") or f)[:60] for f in findings)
    totals.pending_intents += _pending_intents(project_dir)
    if findings or not doctor.get("ok"):
        totals.repairs += 1
        repair = _doctor(project_dir, "--repair")
        again = _doctor(project_dir)
        if again.get("findings") or not again.get("ok"):
            totals.unhealthy_rounds += 1
            done = {key: repair.get(key) for key in ("ok", "status", "repaired", "error")}
            if not repair.get("ok"):
                done["findings"] = str(repair.get("findings"))[:600]
            _problem(totals, round_no, f"doctor --repair answered {done}")
            _problem(totals, round_no, f"doctor after repair: {again.get('findings')}")
    lost, half, false = _inspect(project_dir, acked)
    totals.lost += len(lost)
    totals.false_completions += len(false)
    for text in [*lost, *false]:
        _problem(totals, round_no, text)
    # A partial state counts once, for the kill that left it (it stays visible after).
    new = [(category, text) for category, text in half if text not in totals.seen]
    totals.seen.update(text for _, text in half)
    totals.half_written += bool(new)
    for category, text in new:
        totals.half_kinds[category] += 1
        _problem(totals, round_no, text)


def _doctor(project_dir: Path, *flags: str) -> dict[str, Any]:
    ran = subprocess.run(
        [
            str(Path(sys.executable).parent / "ithaca"),
            "--project",
            str(project_dir),
            "doctor",
            *flags,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        answer: dict[str, Any] = json.loads(ran.stdout)
    except ValueError:
        problem = f"NO_JSON exit {ran.returncode}: {ran.stderr.strip()[-300:]}"
        return {"ok": False, "findings": [{"code": problem}]}
    return answer


def _completion_log(project_dir: Path) -> Path:
    return project_dir.parent / f"{project_dir.name}-asked-to-complete.txt"


def _remember_completions(project_dir: Path, begun: list[dict[str, Any]]) -> None:
    asked = [data["task"] for data in begun if data.get("op") == "complete"]
    with _completion_log(project_dir).open("a", encoding="utf-8") as log:
        for task in asked:
            log.write(task + "\n")


def _connect(project_dir: Path) -> sqlite3.Connection:
    return sqlite3.connect(project_dir / ".ithaca" / ".runtime" / "state.db", timeout=30)


def _pending_intents(project_dir: Path) -> int:
    conn = _connect(project_dir)
    try:
        return int(
            conn.execute(
                "SELECT count(*) FROM delivery_fs_intents WHERE status IN ('pending', 'committed')"
            ).fetchone()[0]
        )
    finally:
        conn.close()


def _problem(totals: Totals, round_no: int, text: str) -> None:
    if len(totals.problems) < 50:
        totals.problems.append(f"round {round_no}: {text}")


def _sha(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _inspect(
    project_dir: Path, acked: list[dict[str, Any]]
) -> tuple[list[str], list[tuple[str, str]], list[str]]:
    """What is lost, half-written (category, text) and falsely completed in the store as
    it now stands."""
    from ithaca.kernel import journal_check

    state_root = project_dir / ".ithaca"
    conn = _connect(project_dir)
    half: list[tuple[str, str]] = []
    lost: list[str] = []

    def flag(category: str, text: str) -> None:
        half.append((category, text))

    try:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if integrity != "ok":
            flag("integrity", f"integrity_check: {integrity}")
        chain = journal_check.verify(conn)
        if chain:
            flag("journal chain", f"journal chain: {chain[:3]}")
        registered = dict(conn.execute("SELECT path, digest FROM delivery_files").fetchall())
        # rows and their journal events, both ways
        for name, (kind, query) in PAIRS.items():
            rows = {r[0] for r in conn.execute(query)}
            events = {
                r[0]
                for r in conn.execute(
                    f"SELECT subject FROM journal WHERE kind = ? AND {CAMPAIGN_EVENTS[kind]}",
                    (kind,),
                )
            }
            for missing in sorted(rows - events):
                flag("row without its event", f"{name} {missing} has no {kind} event")
            for missing in sorted(events - rows):
                flag("event without its row", f"{kind} event for {missing} without its {name} row")
        # completed tasks carry their outcome
        completed = conn.execute(
            "SELECT t.id, a.path FROM delivery_tasks t LEFT JOIN delivery_artifacts a"
            " ON a.scope_type = 'task' AND a.scope_id = t.id AND a.kind = 'task_outcome'"
            " WHERE t.id LIKE 'K%' AND t.status = 'completed'"
        ).fetchall()
        for task, path in completed:
            if path is None:
                flag(
                    "completed without outcome",
                    f"task {task} completed without an outcome artifact",
                )
                continue
            file = state_root / path
            try:
                json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                flag("completed without outcome", f"outcome {path} of {task} unreadable: {exc}")
        # every registered file is there with its digest; nothing unregistered in changes/
        for path, digest in registered.items():
            if _sha(state_root / path) != digest:
                flag(
                    "registered file missing or changed",
                    f"registered file {path} missing or changed",
                )
        changes = state_root / "changes"
        if changes.is_dir():
            for file in changes.rglob("*"):
                if file.is_file() and file.relative_to(state_root).as_posix() not in registered:
                    flag(
                        "file nobody registered",
                        f"unregistered file {file.relative_to(state_root)}",
                    )
        # tracked JSON parses; no temp file; no unsettled write
        for file in state_root.rglob("*.json"):
            if ".runtime" in file.relative_to(state_root).parts:
                continue
            try:
                json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                flag(
                    "tracked file does not parse",
                    f"{file.relative_to(state_root)} does not parse: {exc}",
                )
        for file in project_dir.rglob("*"):
            if TEMP_NAME.search(file.name):
                flag("temp file left", f"temp file left: {file.relative_to(project_dir)}")
        unsettled = conn.execute(
            "SELECT id, op, status FROM delivery_fs_intents"
            " WHERE status IN ('pending', 'committed')"
        ).fetchall()
        for row in unsettled:
            flag("write left unsettled", f"file write intent unsettled after doctor: {row}")
        # every acknowledged operation is there
        for data in acked:
            if not _present(conn, state_root, registered, data):
                lost.append(f"acknowledged but absent: {data}")
        asked = set(_completion_log(project_dir).read_text(encoding="utf-8").split())
        false: list[str] = []
        for task, _path in completed:
            if task not in asked:
                false.append(f"task {task} completed but never asked to")
    finally:
        conn.close()
    return lost, half, false


def _present(
    conn: sqlite3.Connection, state_root: Path, registered: dict[str, str], data: dict[str, Any]
) -> bool:
    def one(query: str, *args: Any) -> Any:
        row = conn.execute(query, args).fetchone()
        return None if row is None else row[0]

    op = data["op"]
    if op == "change":
        return one("SELECT id FROM delivery_changes WHERE id = ?", data["id"]) is not None
    if op == "decision":
        return one("SELECT id FROM delivery_decisions WHERE id = ?", data["id"]) is not None
    if op == "task":
        return one("SELECT id FROM delivery_tasks WHERE id = ?", data["id"]) is not None
    if op == "start":
        return one("SELECT id FROM delivery_sessions WHERE id = ?", data["session"]) is not None
    if op == "complete":
        status = one("SELECT status FROM delivery_tasks WHERE id = ?", data["task"])
        path = data["outcome"]
        return status == "completed" and _sha(state_root / path) == registered.get(path)
    if op == "event":
        payload = one(
            "SELECT payload FROM journal WHERE seq = ? AND kind = 'observation.kill_note'",
            data["seq"],
        )
        return payload is not None and json.loads(payload) == {
            "round": data["round"],
            "n": data["n"],
        }
    if op == "artifact":
        path = data["path"]
        row = one("SELECT id FROM delivery_artifacts WHERE id = ?", data["id"])
        return row is not None and _sha(state_root / path) == registered.get(path)
    if op == "admit":
        return one("SELECT id FROM protocol_events WHERE id = ?", data["id"]) is not None
    if op == "load":
        found = one(
            "SELECT seq FROM journal WHERE kind = 'protocols.bundle_loaded' AND subject = ?",
            data["id"],
        )
        return found is not None
    raise ValueError(f"unknown op {op!r}")


if __name__ == "__main__":
    drive(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
