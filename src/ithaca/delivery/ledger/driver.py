"""The Git merge driver for the team ledger: ``ithaca sync merge-driver %O %A %B [%P]``
(docs/delivery.md, "The team ledger: sync").

Git's line merge would interleave two branches' ledgers into conflict markers (or, worse,
into valid JSON whose digests no longer hold). Registered for ``.ithaca/tasks/tasks.json``,
this driver merges record by record instead, with Git's merge base as the base: records
only one branch changed are taken from it, and records both changed keep our version and
are listed in a ``conflicts`` block with both sides in full, so ``ithaca sync import
--resolve type:id=ours|theirs`` can settle them from the file alone.

Exit codes are what Git expects: 0 merged (our file rewritten), 1 conflicts (our file
rewritten with the block, so Git stops the merge), 2 a side is not a valid ledger (our
file untouched). It needs no database, only the standard library and ``ithaca.kernel``,
and runs as ``python -m ithaca.delivery.ledger.driver`` too.
"""

from __future__ import annotations

import os
import sys

from ithaca.delivery.ledger import bulk as ledger_bulk
from ithaca.delivery.ledger.format import Conflict, Ledger, document, parse, render
from ithaca.delivery.ledger.merge import three_way
from ithaca.kernel import errors
from ithaca.kernel.files import write_atomic

MERGED, CONFLICTED, INVALID = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    """Merge ``%B`` into ``%A`` against ``%O``; returns Git's exit code."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (3, 4):
        print("usage: ithaca sync merge-driver BASE OURS THEIRS [PATH]", file=sys.stderr)
        return INVALID
    shown = args[3] if len(args) == 4 else "the team ledger"
    try:
        with ledger_bulk.paused():
            conflicts = merge_files(args[0], args[1], args[2], shown)
    except (errors.IthacaError, OSError) as exc:
        print(f"ithaca merge driver: {shown} left as it was: {exc}", file=sys.stderr)
        return INVALID
    if not conflicts:
        return MERGED
    print(f"ithaca merge driver: {len(conflicts)} record(s) of {shown} conflict:", file=sys.stderr)
    for found in conflicts:
        print(f"  {found.label}", file=sys.stderr)
    print(
        "settle each with `ithaca sync import --resolve TYPE:ID=ours|theirs`, then `git add`",
        file=sys.stderr,
    )
    return CONFLICTED


def merge_files(base_path: str, ours_path: str, theirs_path: str, shown: str) -> list[Conflict]:
    """Verify all three versions, write the merge over ``ours_path``; the conflicts left."""
    base_data = _read(base_path)
    # An empty merge base: the file did not exist there (both branches added it).
    base = parse(base_data, f"{shown} (merge base)") if base_data.strip() else None
    ours = parse(_read(ours_path), f"{shown} (ours)")
    theirs = parse(_read(theirs_path), f"{shown} (theirs)")
    merged = merge(base, ours, theirs)
    write_atomic(
        os.path.dirname(os.path.abspath(ours_path)), os.path.basename(ours_path), render(merged)
    )
    return list(merged.conflicts)


def merge(base: Ledger | None, ours: Ledger, theirs: Ledger) -> Ledger:
    """The merged ledger: theirs' changes over ours, clashes kept as ours and listed."""
    for side in (base, theirs):
        if side is not None and side.project_id != ours.project_id:
            raise errors.Corrupt(
                "LEDGER_PROJECT_MISMATCH",
                f"the branches hold ledgers of different projects ({ours.project_id},"
                f" {side.project_id})",
                {"ours": ours.project_id, "theirs": side.project_id},
            )
    for side in (ours, theirs):
        if side.conflicts:
            raise errors.Conflict(
                "LEDGER_UNRESOLVED_CONFLICTS",
                "a side still holds unresolved conflicts; settle them with"
                " `ithaca sync import --resolve` first",
                {"conflicts": [found.label for found in side.conflicts]},
            )
    base_digests = {} if base is None else {key: found.digest for key, found in base.index.items()}
    result = three_way(base_digests, ours.index, theirs.index)
    conflicts = tuple(
        Conflict(
            clash.key[0],
            clash.key[1],
            clash.base_digest,
            ours.index.get(clash.key),
            theirs.index.get(clash.key),
        )
        for clash in result.clashes
    )
    return document(
        ours.project_id,
        tuple(result.merged(ours.index).values()),
        generation=max(ours.generation, theirs.generation) + 1,
        parent_digest=ours.state_digest,
        ancestors=(ours.state_digest, theirs.state_digest, *ours.ancestors, *theirs.ancestors),
        conflicts=conflicts,
    )


def _read(path: str) -> bytes:
    with open(path, "rb") as stream:
        return stream.read()


if __name__ == "__main__":
    sys.exit(main())
