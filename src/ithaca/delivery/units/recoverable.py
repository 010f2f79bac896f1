"""Recoverable units: tracked files and their rows land together or not at all (§3.5).

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
it". No file is read or written while a write transaction is open.

A process killed inside the kernel's atomic write leaves its temp file
(``.ithaca-<16 hex>.tmp``) beside the target, and maybe folders it made for it, so a
rollback also sweeps them (``_sweep_temps``, ``_remove_created``). Only what the unit
can be shown to own goes: in a target's folder, a temp with exactly the kernel's name
that holds the target's new bytes, or any such temp when the intent recorded the folder
as missing at T1 (nothing else writes into a folder a pending unit is bringing into
being); then the recorded folders, deepest first, if they are empty. A half-written
temp in a folder that existed before is left alone: it cannot be told apart from a live
writer's, and deleting that would fail its write.
"""

from __future__ import annotations

import errno
import json
import os
import random
import re
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery.contract import Diagnostic
from ithaca.delivery.idempotency import Guard, Replayed
from ithaca.delivery.units import owners as processes
from ithaca.delivery.units import registry
from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.errors import Conflict, InvalidInput, IthacaError
from ithaca.kernel.files import remove_confined, write_atomic
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
# The exact name ``kernel.files.write_atomic`` gives its temp file (``secrets.token_hex(8)``).
KERNEL_TEMP_NAME = re.compile(r"\.ithaca-[0-9a-f]{16}\.tmp")


@dataclass(frozen=True)
class TrackedWrite:
    """One tracked file a unit writes; ``path`` is relative to the state root.

    ``digest`` is taken once, when the write is made: a unit compares, records and
    registers it, and a ledger of 10,000 tasks is megabytes to hash."""

    path: str
    data: bytes
    kind: str
    scope_type: str
    scope_id: str | None
    digest: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "digest", canon.digest_bytes(self.data))


@dataclass(frozen=True)
class Rename:
    """A folder a unit moves; both paths relative to the state root, on one filesystem."""

    source: str
    target: str


@dataclass(frozen=True)
class Outcome:
    """What an action's commit returns: its result and the last journal seq it wrote."""

    result: dict[str, Any]
    journal_seq: int | None


@dataclass
class Plan:
    """A prepared action: the files it writes and the commit that runs inside T2.

    ``commit`` re-checks what the plan was based on and raises ``Stale`` when that moved,
    so the caller prepares again from the new state.
    """

    op: str
    commit: Callable[[sqlite3.Connection], Outcome]
    writes: tuple[TrackedWrite, ...] = ()
    diagnostics: list[Diagnostic] = field(default_factory=list)
    renames: tuple[Rename, ...] = ()
    # Content-addressed work done first, outside any transaction (an envelope blob):
    # harmless to repeat or to leave behind when the unit fails.
    before: Callable[[], object] | None = None


class Stale(Exception):
    """What a plan was based on changed before it could commit; prepare it again."""


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
        if not changed and not plan.renames:
            with self.store.write() as conn:
                return _commit(conn, plan, guard)
        intent = self._begin(plan.op, changed, guard, plan.renames)
        try:
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
    ) -> dict[str, Any]:
        """T1: record the intent, once no live unit holds one of its paths."""
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
        steps: dict[str, Any] = {"targets": targets}
        if moves:
            steps["renames"] = moves
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
            if not self._rename(move["source"], move["target"]):
                raise Stale(move["source"])

    def _rename(self, source: str, target: str) -> bool:
        """Move the folder ``source`` to ``target`` (both under the state root) and fsync
        both parents; False when ``source`` is no folder or ``target`` exists."""
        source_parts, target_parts = source.split("/"), target.split("/")
        source_fd = _open_folders(self.state_root, source_parts[:-1], create=False)
        if source_fd is None:
            return False
        try:
            if _kind(source_fd, source_parts[-1]) != stat.S_IFDIR:
                return False
            target_fd = _open_folders(self.state_root, target_parts[:-1], create=True)
            assert target_fd is not None
            try:
                if _kind(target_fd, target_parts[-1]) is not None:
                    return False
                os.rename(
                    source_parts[-1],
                    target_parts[-1],
                    src_dir_fd=source_fd,
                    dst_dir_fd=target_fd,
                )
                os.fsync(target_fd)
                os.fsync(source_fd)
            finally:
                os.close(target_fd)
        finally:
            os.close(source_fd)
        return True

    def _move_back(self, renames: list[dict[str, str]]) -> None:
        """Undo the moves a unit made (those it did not make are left alone)."""
        for move in reversed(renames):
            if self._rename(move["target"], move["source"]):
                self._prune_empty_folders(move["target"])

    def _abandon(self, intent: dict[str, Any]) -> None:
        """Undo a unit that failed in this process, and forget its intent."""
        try:
            self._roll_back(intent["targets"], intent["renames"], intent["created"])
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
            self._roll_back(targets, renames, parsed.get("created", []))
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

    def _roll_back(
        self,
        targets: list[dict[str, Any]],
        renames: list[dict[str, str]],
        created: list[str],
    ) -> None:
        """Undo a pending unit: files and their temps, the folders it made (some lie in
        a moved folder), then the moves."""
        self._restore(targets, created)
        self._remove_created(created)
        self._move_back(renames)

    def _restore(self, targets: list[dict[str, Any]], created: list[str]) -> None:
        """Put back every target this unit wrote (its copy, or nothing if it was new) and
        sweep the temps a write killed before its rename left beside it. Folders are
        left for ``_remove_created``."""
        for target in targets:
            path = target["path"]
            self._sweep_temps(path, target["expected"], created)
            if registry.file_digest(self.state_root, path) != target["expected"]:
                continue  # never written by this unit (or already restored)
            if target["previous"] is None:
                remove_confined(self.state_root, path)
                continue
            copy = registry.read_bytes(self.runtime, target["copy"])
            if copy is not None and canon.digest_bytes(copy) == target["previous"]:
                write_atomic(self.state_root, path, copy)

    def _sweep_temps(self, path: str, expected: str, created: list[str]) -> None:
        """Delete the kernel temps beside ``path`` that this unit owns: all of them in a
        folder it made, else only those holding its new bytes (digest ``expected``)."""
        folders = path.split("/")[:-1]
        made = "/".join(folders) in created
        folder_fd = _open_folders(self.state_root, folders, create=False)
        if folder_fd is None:
            return
        try:
            swept = False
            for name in os.listdir(folder_fd):
                if not KERNEL_TEMP_NAME.fullmatch(name) or _kind(folder_fd, name) != stat.S_IFREG:
                    continue
                if made or _digest_at(folder_fd, name) == expected:
                    os.unlink(name, dir_fd=folder_fd)
                    swept = True
            if swept:
                os.fsync(folder_fd)
        finally:
            os.close(folder_fd)

    def _remove_created(self, created: list[str]) -> None:
        """Remove the folders the intent recorded as made by it, deepest first, when
        empty; a folder something else has filled since stays, and so does the parent of
        a moved folder until ``_move_back`` empties it."""
        for folder in sorted(created, key=lambda name: name.count("/"), reverse=True):
            try:
                os.rmdir(os.path.join(self.state_root, folder))
            except OSError:
                continue

    def _prune_empty_folders(self, path: str) -> None:
        """Remove the folders a folder moved back leaves empty, from its old parent up."""
        parts = path.split("/")[:-1]
        while parts:
            try:
                os.rmdir(os.path.join(self.state_root, *parts))
            except OSError:
                return
            parts.pop()

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
    """Every path an intent's steps hold: its targets and both ends of its moves."""
    parsed = json.loads(steps)
    found = {target["path"] for target in parsed["targets"]}
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


def _open_folders(root: str, folders: list[str], *, create: bool) -> int | None:
    """A descriptor of ``root/folders…`` walked without following symlinks (made when
    ``create``); None when a folder is missing. A symlink on the way is ``PATH_UNSAFE``."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    for name in folders:
        try:
            if create and _kind(fd, name) is None:
                os.mkdir(name, dir_fd=fd)
            child = os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise InvalidInput(
                    "PATH_UNSAFE",
                    f"{'/'.join(folders)} passes through a symlink or a file",
                    {"path": "/".join(folders)},
                ) from exc
            raise
        finally:
            os.close(fd)
        fd = child
    return fd


def _kind(folder_fd: int, name: str) -> int | None:
    """The file type of ``name`` in the folder (not following a symlink), None if absent."""
    try:
        return stat.S_IFMT(os.stat(name, dir_fd=folder_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return None


def _digest_at(folder_fd: int, name: str) -> str | None:
    """The digest of the regular file ``name`` in the folder, None if it cannot be read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        return canon.digest_bytes(handle.read())


def _set_status(conn: sqlite3.Connection, intent_id: str, status: str) -> None:
    conn.execute(
        "UPDATE delivery_fs_intents SET status = ?, updated_at = ? WHERE id = ?",
        (status, clock.now(), intent_id),
    )


def flat(answer: dict[str, Any]) -> dict[str, Any]:
    """A single-unit tool's answer: the action's result beside diagnostics and seq."""
    return {
        **answer["result"],
        "diagnostics": answer["diagnostics"],
        "journal_seq": answer["journal_seq"],
    }


def unchanged(op: str, result: dict[str, Any], diagnostics: list[Diagnostic]) -> Plan:
    """A plan that changes nothing and writes no event; its key still records the answer."""
    return Plan(op, lambda conn: Outcome({**result, "unchanged": True}, None), (), diagnostics)
