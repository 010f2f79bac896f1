"""What keeps a passing run from verifying a turn: the turn's changes to the runner's
configuration, and the tests it began with that no longer pass.

``turn`` captures what the turn began with; a run (``records``) says what passed now.
Both the critic at Stop and ``ithaca verify`` ask this module, so an agent learns from
its own call what the Stop would say. Standard library and light modules only.
"""

from __future__ import annotations

from ithaca.verification import records, turn

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Mapping
    from typing import Any

    from ithaca.kernel.blobs import BlobStore


def problems(
    conn: sqlite3.Connection,
    blobs: BlobStore,
    state: Mapping[str, Any] | None,
    run: Mapping[str, Any],
    then_config: Mapping[str, str] | None,
    now_config: Mapping[str, str],
    root: str,
) -> dict[str, list[str]]:
    """``{"config": files changed and not accepted, "tests": tests lost}`` for a run on
    the turn whose critic state is ``state`` and whose runner's configuration began as
    ``then_config`` (empty lists when no turn is open); ``root`` is the project's."""
    found: dict[str, list[str]] = {"config": [], "tests": []}
    if state is None or then_config is None:
        return found
    from ithaca.verification.digest import changed

    moved = [
        path
        for path in changed(then_config, now_config)
        if not _only_elsewhere(path, then_config, blobs, root)
    ]
    if moved and not records.accepted_after(
        conn, turn.configuration_digest(now_config), int(state.get("turn_seq") or 0)
    ):
        found["config"] = moved
    baseline = records.by_id(conn, state["baseline_run"]) if state.get("baseline_run") else None
    if baseline is not None and baseline["runner"] == run["runner"]:
        found["tests"] = turn.lost_tests(
            records.tests(blobs, baseline), records.tests(blobs, dict(run))
        )
    return found


def _only_elsewhere(path: str, then_config: Mapping[str, str], blobs: BlobStore, root: str) -> bool:
    """Whether a shared file (``configs.SHARED``) changed only outside the sections a
    runner reads."""
    import os

    from ithaca.verification.configs import SHARED

    prefixes = SHARED.get(path)
    old = then_config.get(path, "").lstrip("x")
    if prefixes is None or len(old) != 64 or not blobs.exists(old):
        return False
    try:
        with open(os.path.join(root, path), "rb") as handle:
            new = handle.read()
    except OSError:
        return False
    return turn.runner_sections(blobs.get(old), prefixes) == turn.runner_sections(new, prefixes)


def describe(found: Mapping[str, list[str]], limit: int = 20) -> str:
    """The problems as the sentences a user and the agent read."""
    parts = []
    if found["config"]:
        parts.append(
            "the turn changed the test runner's configuration ("
            + ", ".join(found["config"][:limit])
            + "); the user accepts a change with `ithaca verify accept-config`"
        )
    if found["tests"]:
        shown = found["tests"][:limit]
        more = len(found["tests"]) - len(shown)
        parts.append(
            "tests that passed when the turn began no longer pass: "
            + ", ".join(shown)
            + (f" and {more} more" if more else "")
        )
    return "; ".join(parts)
