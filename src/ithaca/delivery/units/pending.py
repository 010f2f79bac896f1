"""What a pending recoverable unit has done to the tracked files so far, told file by file.

A unit that has not committed yet (``pending``: still running, or its writer died) has
moved its folders and written some of its files, while the registry still describes the
files as they were: a moved change folder looks like registered files gone missing and
unregistered files appearing elsewhere. That is no loss: rolling the unit back (``doctor
--repair``, or the next service to open the project once its writer is gone) restores
everything. So doctor asks here which of its file findings a pending unit explains, and
reports those files as part of the unit instead of as missing, changed or unregistered.

A file is the unit's when the unit's own record accounts for it: a registered file under
a folder the unit moved that now lies at its new place with its registered bytes
(``moved``); a target bearing the digest the unit writes, where there was none
(``written``) or another file the unit keeps a copy of (``replaced``); any file under a
folder the unit moved in (``moved``); a kernel temp beside one of its targets
(``temp``). Anything else stays a finding of its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery.units import owners as processes
from ithaca.kernel.files import TEMP_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


@dataclass
class PendingUnit:
    """One pending intent, and the files it was found to explain."""

    intent_id: str
    op: str
    owner_pid: int
    alive: bool
    targets: list[dict[str, Any]]
    renames: list[dict[str, str]]
    files: list[dict[str, str]] = field(default_factory=list)

    def moved_to(self, path: str) -> str | None:
        """Where the unit's moves put a file that was at ``path``, None if none moved it."""
        for move in self.renames:
            if path.startswith(move["source"] + "/"):
                return move["target"] + path[len(move["source"]) :]
        return None

    def moved_from(self, path: str) -> str | None:
        """Where a file now at ``path`` lay before the unit's moves, None if not moved."""
        for move in self.renames:
            if path.startswith(move["target"] + "/"):
                return move["source"] + path[len(move["target"]) :]
        return None

    def target(self, path: str) -> dict[str, Any] | None:
        return next((found for found in self.targets if found["path"] == path), None)

    def holds_temp(self, path: str) -> bool:
        """Whether ``path`` is a kernel temp beside one of the unit's targets."""
        folder, _, name = path.rpartition("/")
        return TEMP_NAME.fullmatch(name) is not None and any(
            found["path"].rpartition("/")[0] == folder for found in self.targets
        )

    def note(self, path: str, state: str, **more: str) -> None:
        self.files.append({"path": path, "state": state, **more})


def pending_units(conn: sqlite3.Connection) -> list[PendingUnit]:
    """Every ``pending`` intent, oldest first, with whether its writer still lives."""
    found = []
    for intent_id, op, pid, start, steps in conn.execute(
        "SELECT id, op, owner_pid, owner_start, steps FROM delivery_fs_intents"
        " WHERE status = 'pending' ORDER BY created_at, id"
    ):
        parsed = json.loads(steps)
        found.append(
            PendingUnit(
                intent_id,
                op,
                pid,
                processes.is_alive(pid, start),
                list(parsed.get("targets", [])),
                list(parsed.get("renames", [])),
            )
        )
    return found


def explain(
    units: list[PendingUnit],
    registered: dict[str, str],
    digest_of: Callable[[str], str | None],
) -> tuple[set[str], set[str]]:
    """Assign the files the pending ``units`` account for to them (``PendingUnit.files``).
    ``registered`` maps path → registered digest, ``digest_of(path)`` is the file's
    current digest (None when absent). Returns ``(registered paths explained, present
    unregistered paths explained)``; the caller reports the rest as usual."""
    explained_registered: set[str] = set()
    explained_present: set[str] = set()
    for path, digest in registered.items():
        actual = digest_of(path)
        for unit in units:
            target = unit.target(path)
            if actual is None:
                now_at = unit.moved_to(path)
                if now_at is not None and digest_of(now_at) == digest:
                    unit.note(path, "moved", now_at=now_at)
                    explained_registered.add(path)
                    explained_present.add(now_at)
                    break
            elif actual != digest and target is not None and actual == target["expected"]:
                unit.note(path, "replaced")
                explained_registered.add(path)
                break
    return explained_registered, explained_present


def explain_unregistered(units: list[PendingUnit], path: str, actual: str | None) -> bool:
    """Whether a present file the registry does not know is one of the units' (noted)."""
    for unit in units:
        target = unit.target(path)
        if target is not None and actual == target["expected"]:
            unit.note(path, "written" if target["previous"] is None else "replaced")
            return True
        if unit.moved_from(path) is not None:
            unit.note(path, "moved", now_at=path)
            return True
        if unit.holds_temp(path):
            unit.note(path, "temp")
            return True
    return False


def describe(unit: PendingUnit) -> str:
    """What the unit did so far, in one phrase: ``moved A → B; wrote x, y``."""
    parts = []
    for move in unit.renames:
        parts.append(f"moved {move['source']} → {move['target']}")
    written = [found["path"] for found in unit.files if found["state"] in ("written", "replaced")]
    if written:
        parts.append("wrote " + _listed(written))
    moved = [found for found in unit.files if found["state"] == "moved"]
    if moved:
        parts.append(f"{len(moved)} file{'s' * (len(moved) != 1)} moved with it")
    return "; ".join(parts) or "nothing on disk yet"


def _listed(paths: list[str], shown: int = 5) -> str:
    more = len(paths) - shown
    return ", ".join(paths[:shown]) + (f" and {more} more" if more > 0 else "")
