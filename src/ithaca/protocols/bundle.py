"""Bundles: the protocols that apply to one admitted event, in order, with a digest.

Matching runs on a compiled index (see ``matcher.BundleIndex``) that is rebuilt only when
the store's ``revision`` moves. A long-lived process keeps it in a ``BundleCache``, which
asks SQLite whether anything was committed at all before reading the revision, so a
warm lookup costs one pragma and the index match. Compiling re-verifies every row; any
corrupt row or broken protocol file fails every lookup instead of silently dropping or
widening a rule.
"""

from __future__ import annotations

from ithaca.kernel import states
from ithaca.protocols import matcher, reconcile, records

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections import namedtuple
    from typing import Any
else:
    from ithaca.kernel.tuples import namedtuple


class Compiled(namedtuple("Compiled", "revision index")):
    """The matcher index of the enabled protocols at one store revision."""

    __slots__ = ()


class BundleCache:
    """The compiled index of one store, reused while nothing was committed.

    ``PRAGMA data_version`` moves when another connection commits and a connection's
    ``total_changes`` when it writes itself; while both stay put, the store is as it was.
    Connections are told apart by identity, so the cache must not outlive its store's
    connections (a service owns both).
    """

    def __init__(self) -> None:
        self._compiled: Compiled | None = None
        self._markers: dict[int, tuple[int, int]] = {}

    def compiled(self, conn: sqlite3.Connection, workflows: frozenset[str]) -> Compiled:
        marker = (conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes)
        if self._compiled is not None and self._markers.get(id(conn)) == marker:
            return self._compiled
        self._compiled = compile_store(conn, workflows, self._compiled)
        self._markers[id(conn)] = marker
        return self._compiled


def revision(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT revision FROM protocol_state").fetchone()[0])


def compile_store(
    conn: sqlite3.Connection, workflows: frozenset[str], previous: Compiled | None = None
) -> Compiled:
    """The verified index of the enabled protocols (``previous`` if the revision held)."""
    error = reconcile.file_error(conn)
    if error is not None:
        raise error
    current = revision(conn)
    if previous is not None and previous.revision == current:
        return previous
    seeds = records.seed_records(conn)
    shaped = []
    for record in records.read_all(conn):
        records.verify(record, workflows=workflows, states=states.KNOWN_STATES)
        if record["enabled"]:
            shaped.append(records.bundle_shape(record, seeds))
    return Compiled(current, matcher.BundleIndex(shaped))


def compute_after_files(
    conn: sqlite3.Connection,
    event: dict[str, Any],
    workflows: frozenset[str],
    folder: str,
    project_root: str,
) -> dict[str, Any]:
    """The bundle as it will be once the changed protocol files are reconciled.

    Hooks use it to decide on current team rules without writing outside their commit
    step; it builds a one-off index instead of the cached one.
    """
    wanted, _ = reconcile.read_files(conn, folder, project_root, workflows)
    seeds = records.seed_records(conn)
    shaped = []
    for record in records.read_all(conn):
        if record["id"] in wanted:
            continue
        if record["source"] == "file":
            if record["id"] not in seeds:
                continue
            record = dict(seeds[record["id"]], source="seed", overridesBase=False)
        else:
            records.verify(record, workflows=workflows, states=states.KNOWN_STATES)
        if record["enabled"]:
            shaped.append(records.bundle_shape(record, seeds))
    for protocol_id, (record, _path) in wanted.items():
        as_file = dict(record, scope="user", source="file", overridesBase=protocol_id in seeds)
        if as_file["enabled"]:
            shaped.append(records.bundle_shape(as_file, seeds))
    values = matcher.selector_values(event)
    protocols, digest = matcher.BundleIndex(shaped).match(values)
    return {
        "eventId": event["id"],
        "protocols": protocols,
        "revision": revision(conn),
        "digest": digest,
        "selectorValues": values,
    }


def compute(
    conn: sqlite3.Connection,
    event: dict[str, Any],
    workflows: frozenset[str],
    cache: BundleCache | None = None,
) -> dict[str, Any]:
    """The bundle of an event (without ``loadedAt``); writes nothing."""
    compiled = cache.compiled(conn, workflows) if cache else compile_store(conn, workflows)
    values = matcher.selector_values(event)
    protocols, digest = compiled.index.match(values)
    return {
        "eventId": event["id"],
        "protocols": protocols,
        "revision": compiled.revision,
        "digest": digest,
        "selectorValues": values,
    }
