"""What the critic captures at a turn's first mutating call (``verification.turn``).

The content digest of the project, every runner's configuration files (``configs``;
each file's bytes kept as a blob, so a later run can lay them back), the last run before
the turn (whose passing tests the turn must keep) and the journal's head (a configuration
the user accepts after it counts). The runner itself is found later, at Stop or by
``ithaca verify``: finding it reads the project's files with ``re`` and ``tomllib``,
more than a tool call's hook may spend. Standard library and light modules only.
"""

from __future__ import annotations

import os
from time import monotonic

from ithaca.kernel import journal
from ithaca.verification import records, turn
from ithaca.verification.configs import CAPTURED

# Left of the hook's time for the rest of the call once the digest is taken.
CAPTURE_MARGIN_S = 1.0

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Mapping
    from typing import Any

    from ithaca.kernel.project import Project


def capture(
    project: Project, conn: sqlite3.Connection, settings: Mapping[str, Any]
) -> tuple[dict[str, Any], Callable[[sqlite3.Connection, dict[str, Any]], None]]:
    """The turn's start as critic state, and what to keep once the call is allowed."""
    from ithaca.kernel import deadline
    from ithaca.verification.digest import Unfinished

    left = deadline.remaining()
    until = None if left is None else monotonic() + left - CAPTURE_MARGIN_S
    baseline = records.latest(conn)
    head = journal.head(conn)
    began: dict[str, Any] = {
        "baseline_run": None if baseline is None else baseline["id"],
        "turn_seq": head[0] if head else 0,
    }
    try:
        tree = turn.current_tree(project, settings, until)
    except (Unfinished, OSError):
        # A first digest of a large project, or a project that cannot be read: the turn's
        # start is unknown, so the turn counts as changed and its Stop says so.
        began.update(turn_digest=None, turn_config=None, start_unknown=True)
        return began, lambda _conn, _payload: None
    config = turn.configuration(tree.files, CAPTURED)
    began.update(turn_digest=tree.digest, turn_config=config)

    def keep(_conn: sqlite3.Connection, _payload: dict[str, Any]) -> None:
        if config:
            _keep_blobs(project, config)

    return began, keep


def _keep_blobs(project: Project, config: Mapping[str, str]) -> None:
    """Keep each configuration file's bytes as a blob, when they still match the digest."""
    from ithaca.kernel.blobs import BlobStore
    from ithaca.kernel.canon import digest_bytes

    blobs = BlobStore(project.blobs_dir)
    for path, entry in config.items():
        wanted = entry.lstrip("x")
        if len(wanted) != 64 or blobs.exists(wanted):
            continue
        try:
            with open(os.path.join(project.root, path), "rb") as handle:
                data = handle.read()
        except OSError:
            continue
        if digest_bytes(data) == wanted:
            blobs.put(data)
