"""Recoverable units: tracked files and their rows land together or not at all
(docs/delivery.md, "Recoverable units").

A unit that writes tracked files runs in four steps, so that no crash can leave a file
the database does not know, or a row whose file is missing:

1. **T1** records an intent (``delivery_fs_intents``, ``pending``): each target's path,
   the digest it will have, the digest it had, and where a copy of the old file goes
   (``.runtime/recovery/<intent>/<n>``). A pending intent also locks its paths: a second
   unit naming one waits until the first is settled.
2. Outside any transaction: the old files are still as the plan saw them (else the plan
   is stale and is prepared again), copies are taken, the new files are written with the
   kernel's atomic writer.
3. **T2** re-checks the idempotency key, runs the action's commit (its own re-checks, its
   rows, its journal events), registers the files with their digests, stores the key's
   answer and marks the intent ``committed``.
4. Post-commit work, then ``done``: dropping the copies. Publishing the team ledger
   follows the unit in ``DeliveryService``, which also publishes when it recovers a dead
   writer's ``committed`` intent.

A unit may also rely on files it does not write (``Read``: the ledger an import takes).
T1 locks them like targets, and step 2 checks they still hold the bytes the plan read:
once no other unit can be writing them, what is there is what that unit committed, or
what it put back, never its uncommitted bytes (the plan is ``Stale`` otherwise).

A unit may also move folders (``Rename``: archiving moves a change folder). The moves
happen in step 2 before any file is written, so every target names its final place;
they are recorded in the intent, and rolling back restores the files first, then moves
each folder back. A rename never replaces an existing folder, stays on one filesystem
and fsyncs both parent folders. A pending intent locks the moved folders (and every
path under them) like it locks its files.

A failure before T2 commits restores the files at once (a file bearing the new digest is
deleted, or replaced by its copy) and forgets the intent, so an error writes nothing. A
process that dies instead leaves its intent ``pending``; the next service to open the
project (``recover_dead``) finds the owner gone (pid missing, or its start time differs)
and rolls the files back the same way, or, for a ``committed`` intent, finishes the
post-commit work. Files whose bytes would not change are not rewritten, so a target's
new digest always differs from its old one and "bears the new digest" means "we wrote
it". No file is read or written while a write transaction is open. Rolling back, the
temps a killed write left included, is ``ithaca.delivery.units.rollback``; the plans a
unit runs are ``ithaca.delivery.units.plans``.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable
from typing import Any

from ithaca.delivery.idempotency import Guard, Replayed
from ithaca.delivery.units import owners as processes
from ithaca.delivery.units import registry
from ithaca.delivery.units.folders import rename_folder
from ithaca.delivery.units.plans import Plan, Read, Rename, Stale, TrackedWrite
from ithaca.delivery.units.rollback import roll_back
from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.errors import Conflict, IthacaError
from ithaca.kernel.files import write_atomic
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

# How long a unit waits for another live unit holding one of its paths.
PATH_WAIT_S = 30.0
# How often a request is prepared again after other writers overtook its plan.
MAX_ATTEMPTS = 8
RECOVERY_FOLDER = "recovery"


class Units:
    """Runs plans as recoverable units in one project, and recovers dead owners' units."""

    def __init__(self, project: Project, store: Store):
        self.state_root = project.state_root
        self.runtime = project.runtime
        self.store = store

    # --- running ------------------------------------------------------------------------

    def run_keyed(
        self,
        guard: Guard,
        prepare: Callable[[sqlite3.Connection], Plan],
        subject: str,
        details: dict[str, Any],
    ) -> tuple[dict[str, Any], bool]:
        """Prepare a plan on a read snapshot and run it under ``guard``, preparing again
        while other writers overtake it: ``(answer, replayed)``. This is how every
        mutating delivery request runs, so retries and replays behave the same in all."""
        for _ in range(MAX_ATTEMPTS):
            try:
                with self.store.read() as conn:
                    guard.check(conn)
                    plan = prepare(conn)
                return self.run(plan, guard), False
            except Replayed as replay:
                return replay.stored, True
            except Stale:
                continue
        raise Conflict(
            "STORE_BUSY", f"{subject} kept being overtaken by other writers; try again", details
        )

    def run(self, plan: Plan, guard: Guard | None) -> dict[str, Any]:
        """Commit ``plan``; returns the answer ``{result, diagnostics, journal_seq}``."""
        if plan.before is not None:
            plan.before()
        changed = []
        for write in plan.writes:
            now_at = _before_renames(write.path, plan.renames)
            before = registry.file_digest(self.state_root, now_at)
            if before != write.digest:
                changed.append((write, before))
        if plan.writes_nothing:
            with self.store.read() as conn:
                if guard is not None:
                    guard.check(conn)  # a key that already answered replays its answer
                outcome = plan.commit(conn)
            return {"result": outcome.result, "diagnostics": plan.diagnostics, "journal_seq": None}
        if not changed and not plan.renames and not plan.reads:
            with self.store.write() as conn:
                return _commit(conn, plan, guard)
        intent = self._begin(plan.op, changed, guard, plan.renames, plan.reads)
        try:
            self._check_reads(plan.reads)
            self._move(intent["renames"])
            self._write_files(intent, [write for write, _ in changed])
            with self.store.write() as conn:
                answer = _commit(conn, plan, guard)
                _set_status(conn, intent["id"], "committed")
        except BaseException:
            self._abandon(intent)
            raise
        self._finish(intent)
        return answer

    def _begin(
        self,
        op: str,
        changed: list[tuple[TrackedWrite, str | None]],
        guard: Guard | None,
        renames: tuple[Rename, ...] = (),
        reads: tuple[Read, ...] = (),
    ) -> dict[str, Any]:
        """T1: record the intent, once no live unit holds one of its paths (its targets,
        both ends of its moves, the files it read)."""
        intent_id = ids.new("int")
        targets = [
            {
                "path": write.path,
                "expected": write.digest,
                "previous": before,
                "copy": None if before is None else f"{RECOVERY_FOLDER}/{intent_id}/{index}",
            }
            for index, (write, before) in enumerate(changed)
        ]
        moves = [{"source": move.source, "target": move.target} for move in renames]
        paths = {write.path for write, _ in changed}
        paths |= {move.source for move in renames} | {move.target for move in renames}
        paths |= {read.path for read in reads}
        steps: dict[str, Any] = {"targets": targets}
        if moves:
            steps["renames"] = moves
        if reads:
            steps["reads"] = sorted({read.path for read in reads})
        created = self._missing_folders([write.path for write, _ in changed], renames)
        if created:
            steps["created"] = created
        pid, start = processes.current_owner()
        deadline = time.monotonic() + PATH_WAIT_S
        delay = 0.05
        while True:
            with self.store.write() as conn:
                if guard is not None:
                    guard.check(conn)
                blockers = _pending_on(conn, paths)
                if not blockers:
                    now = clock.now()
                    conn.execute(
                        "INSERT INTO delivery_fs_intents (id, op, status, owner_pid, owner_start,"
                        " steps, created_at, updated_at) VALUES (?, ?, 'pending', ?, ?, ?, ?, ?)",
                        (
                            intent_id,
                            op,
                            pid,
                            start,
                            canon.canonical_text(steps),
                            now,
                            now,
                        ),
                    )
                    return {
                        "id": intent_id,
                        "op": op,
                        "targets": targets,
                        "renames": moves,
                        "created": created,
                    }
            dead = [row for row in blockers if not processes.is_alive(row[3], row[4])]
            for row in dead:
                self._recover(row)
            if len(dead) == len(blockers):
                continue
            if time.monotonic() >= deadline:
                raise Conflict(
                    "STORE_BUSY",
                    "another writer kept these files busy; try again",
                    {"paths": sorted(paths)},
                )
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 2.0)

    def _missing_folders(self, paths: list[str], renames: tuple[Rename, ...]) -> list[str]:
        """The folders holding ``paths`` that do not exist yet, so writing will make them
        (a folder inside a moved one is looked for where it lies before the move)."""
        missing: set[str] = set()
        for path in paths:
            parts = path.split("/")[:-1]
            while parts:
                folder = "/".join(parts)
                now_at = _before_renames(folder, renames)
                if os.path.lexists(os.path.join(self.state_root, now_at)):
                    break
                missing.add(folder)
                parts.pop()
        return sorted(missing)

    def _check_reads(self, reads: tuple[Read, ...]) -> None:
        """Step 2, first: the files the plan read still hold those bytes. T1 holds their
        paths, so no other unit is writing them: a unit that wrote one meanwhile has
        committed or put the old bytes back, and the plan is prepared again."""
        for read in reads:
            if registry.file_digest(self.state_root, read.path) != read.digest:
                raise Stale(read.path)

    def _write_files(self, intent: dict[str, Any], writes: list[TrackedWrite]) -> None:
        """Step 2: check the old bytes are still the planned ones, copy them, write."""
        olds = []
        for target in intent["targets"]:
            old = registry.read_bytes(self.state_root, target["path"])
            if (None if old is None else canon.digest_bytes(old)) != target["previous"]:
                raise Stale(target["path"])
            olds.append(old)
        for target, write, old in zip(intent["targets"], writes, olds, strict=True):
            if old is not None:
                write_atomic(self.runtime, target["copy"], old)
            write_atomic(self.state_root, write.path, write.data)

    def _move(self, renames: list[dict[str, str]]) -> None:
        """Step 2, first part: move each folder, never over an existing one."""
        for move in renames:
            if not rename_folder(self.state_root, move["source"], move["target"]):
                raise Stale(move["source"])

    def _abandon(self, intent: dict[str, Any]) -> None:
        """Undo a unit that failed in this process, and forget its intent."""
        try:
            roll_back(
                self.state_root,
                self.runtime,
                intent["targets"],
                intent["renames"],
                intent["created"],
            )
            with self.store.write() as conn:
                conn.execute("DELETE FROM delivery_fs_intents WHERE id = ?", (intent["id"],))
            self._drop_copies(intent["id"])
        except (OSError, IthacaError):
            pass  # the intent stays pending; recovery finishes it once this process is gone

    def _finish(self, intent: dict[str, Any]) -> None:
        """Step 4, after the effect committed: a failure here is left to recovery."""
        try:
            self._drop_copies(intent["id"])
            with self.store.write() as conn:
                _set_status(conn, intent["id"], "done")
        except (OSError, IthacaError):
            pass

    # --- recovery -------------------------------------------------------------------------

    def recover_dead(self) -> list[dict[str, Any]]:
        """Settle every unit whose owner died; returns what was done to each."""
        rows = (
            self.store.connection()
            .execute(
                "SELECT id, op, status, owner_pid, owner_start, steps FROM delivery_fs_intents"
                " WHERE status IN ('pending', 'committed') ORDER BY created_at, id"
            )
            .fetchall()
        )
        settled = []
        for row in rows:
            if not processes.is_alive(row[3], row[4]):
                found = self._recover(row)
                if found is not None:
                    settled.append(found)
        return settled

    def _recover(self, row: tuple[Any, ...]) -> dict[str, Any] | None:
        intent_id, op, status, _pid, _start, steps = row
        parsed = json.loads(steps)
        targets, renames = parsed["targets"], parsed.get("renames", [])
        if status == "pending":
            roll_back(self.state_root, self.runtime, targets, renames, parsed.get("created", []))
        outcome = "rolled_back" if status == "pending" else "done"
        with self.store.write() as conn:
            moved = conn.execute(
                "UPDATE delivery_fs_intents SET status = ?, updated_at = ?"
                " WHERE id = ? AND status = ?",
                (outcome, clock.now(), intent_id, status),
            ).rowcount
            if not moved:
                return None  # another process settled it first
            kind = "delivery.intent_rolled_back" if status == "pending" else "delivery.intent_done"
            payload: dict[str, Any] = {
                "intent": intent_id,
                "op": op,
                "paths": [target["path"] for target in targets],
            }
            if renames:
                payload["renames"] = renames
            journal.append(conn, actor="system", kind=kind, subject=intent_id, payload=payload)
        self._drop_copies(intent_id)
        return {"intent": intent_id, "op": op, "was": status, "now": outcome}

    def _drop_copies(self, intent_id: str) -> None:
        shutil.rmtree(os.path.join(self.runtime, RECOVERY_FOLDER, intent_id), ignore_errors=True)


def _commit(conn: sqlite3.Connection, plan: Plan, guard: Guard | None) -> dict[str, Any]:
    """T2's body: key re-check, the action's commit, file registration, the key's answer."""
    if guard is not None:
        guard.check(conn)
    outcome = plan.commit(conn)
    for write in plan.writes:
        registry.register(
            conn, write.path, write.digest, write.kind, write.scope_type, write.scope_id
        )
    answer = {
        "result": outcome.result,
        "diagnostics": plan.diagnostics,
        "journal_seq": outcome.journal_seq,
    }
    if guard is not None:
        guard.seal(conn, answer)
    return answer


def _pending_on(conn: sqlite3.Connection, paths: set[str]) -> list[tuple[Any, ...]]:
    """Pending intents that name one of ``paths``, or a folder holding one, or a path
    inside one of them (a moved folder locks everything under it)."""
    rows = conn.execute(
        "SELECT id, op, status, owner_pid, owner_start, steps FROM delivery_fs_intents"
        " WHERE status = 'pending'"
    ).fetchall()
    return [row for row in rows if any(_overlaps(theirs, paths) for theirs in _locked(row[5]))]


def _locked(steps: str) -> set[str]:
    """Every path an intent's steps hold: its targets, the files it read and both ends
    of its moves."""
    parsed = json.loads(steps)
    found = {target["path"] for target in parsed["targets"]}
    found |= set(parsed.get("reads", []))
    for move in parsed.get("renames", []):
        found |= {move["source"], move["target"]}
    return found


def _overlaps(path: str, paths: set[str]) -> bool:
    return any(
        path == other or path.startswith(other + "/") or other.startswith(path + "/")
        for other in paths
    )


def _before_renames(path: str, renames: tuple[Rename, ...]) -> str:
    """Where what a unit will have at ``path`` lies before its folders move."""
    for move in renames:
        if path == move.target or path.startswith(move.target + "/"):
            return move.source + path[len(move.target) :]
    return path


def _set_status(conn: sqlite3.Connection, intent_id: str, status: str) -> None:
    conn.execute(
        "UPDATE delivery_fs_intents SET status = ?, updated_at = ? WHERE id = ?",
        (status, clock.now(), intent_id),
    )
