"""The per-record three-way merge the ledger import and the Git merge driver share
(docs/delivery.md, "The team ledger: sync").

Whole-document merges are what made the original ledger conflict on every concurrent
edit. Here each record is merged on its own, by digest, against a base (this checkout's
last sync, or Git's merge base): when ours and theirs agree there is nothing to do; when
only one side changed a record, that side wins, deletions included; when both changed
it differently the record conflicts. So branches touching different records always
merge cleanly, and a record both changed is never guessed at. A record listed in
``frozen`` (a task a session is running here) may not be changed by theirs at all.

Standard library and ``ithaca.kernel`` only: the merge driver runs from Git.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import chain

from ithaca.delivery.ledger.format import Key, Record

BOTH_CHANGED = "both_changed"
ACTIVE_TASK = "active_task"


@dataclass(frozen=True)
class Clash:
    """A record the merge cannot settle alone; digests are None for an absent side."""

    key: Key
    base_digest: str | None
    ours_digest: str | None
    theirs_digest: str | None
    reason: str

    @property
    def label(self) -> str:
        return f"{self.key[0]}:{self.key[1]}"

    def as_dict(self) -> dict[str, str | None]:
        return {
            "type": self.key[0],
            "id": self.key[1],
            "base_digest": self.base_digest,
            "ours_digest": self.ours_digest,
            "theirs_digest": self.theirs_digest,
            "reason": self.reason,
        }


@dataclass
class Merge:
    """What theirs brings: ``taken`` maps each key to apply to its record (None removes
    it); ``clashes`` are left unsettled; ``resolved`` names the clashes ``resolve`` chose."""

    taken: dict[Key, Record | None] = field(default_factory=dict)
    clashes: list[Clash] = field(default_factory=list)
    resolved: dict[str, str] = field(default_factory=dict)

    def merged(self, ours: Mapping[Key, Record]) -> dict[Key, Record]:
        """Ours with every taken record applied (clashing records stay ours)."""
        result = dict(ours)
        for key, found in self.taken.items():
            if found is None:
                result.pop(key, None)
            else:
                result[key] = found
        return result


def three_way(
    base: Mapping[Key, str],
    ours: Mapping[Key, Record],
    theirs: Mapping[Key, Record],
    *,
    resolve: Mapping[str, str] | None = None,
    frozen: frozenset[Key] = frozenset(),
) -> Merge:
    """Merge theirs into ours against ``base`` (record digests by key).

    ``resolve`` maps ``type:id`` to ``ours`` or ``theirs`` for records that clash; a
    frozen record stays a clash whatever ``resolve`` says, unless it says ``ours``."""
    choices = resolve or {}
    merge = Merge()
    # Every key once, theirs' first: records are taken in the file's (sorted) order.
    for key in dict.fromkeys(chain(theirs, ours, base)):
        taken = theirs.get(key)
        incoming = None if taken is None else taken.digest
        was = base.get(key)
        if incoming == was:
            continue  # theirs did not change it
        kept = ours.get(key)
        mine = None if kept is None else kept.digest
        if mine == incoming:
            continue  # both already agree
        reason = None
        if key in frozen:
            reason = ACTIVE_TASK
        elif mine != was:
            reason = BOTH_CHANGED
        if reason is None:
            merge.taken[key] = taken
            continue
        label = f"{key[0]}:{key[1]}"
        choice = choices.get(label)
        if choice == "ours":
            merge.resolved[label] = choice
        elif choice == "theirs" and reason == BOTH_CHANGED:
            merge.resolved[label] = choice
            merge.taken[key] = taken
        else:
            merge.clashes.append(Clash(key, was, mine, incoming, reason))
    merge.clashes.sort(key=lambda clash: clash.key)
    return merge
