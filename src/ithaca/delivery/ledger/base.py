"""This checkout's sync base: the ledger as it last imported or published it
(docs/delivery.md, "The team ledger: `sync`").

The base is what makes the merge three-way: a record the database changed since the
base is a local edit to publish, one the file changed is an incoming edit to import,
one both changed is a conflict. As the base follows this checkout's own syncs, a branch
switch makes the database follow the checked-out ledger while keeping unpublished work.

Writes happen inside the caller's transaction; the file's (size, mtime_ns, inode) is a
cache refreshed after commit (``remember_stat``), only when the file on disk still holds
the base's bytes, so a stale stat can never hide a changed file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import NamedTuple

from ithaca.delivery.ledger.format import LEDGER_PATH, Key, Ledger, Stamp, document_digest
from ithaca.delivery.units import registry
from ithaca.kernel import clock
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.files import abandoned_temps, write_atomic
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3


class FileStat(NamedTuple):
    size: int
    mtime_ns: int
    inode: int


@dataclass(frozen=True)
class Base:
    project_id: str
    generation: int
    state_digest: str
    ancestors: tuple[str, ...]
    stamps: dict[Key, Stamp]
    document_digest: str
    file_stat: FileStat | None

    def digests(self) -> dict[Key, str]:
        return {key: stamp.digest for key, stamp in self.stamps.items()}


def load(conn: sqlite3.Connection) -> Base | None:
    row = conn.execute(
        "SELECT project_id, generation, state_digest, ancestors, stamps, document_digest,"
        " file_size, file_mtime_ns, file_inode FROM delivery_ledger_base WHERE id = 1"
    ).fetchone()
    if row is None:
        return None
    stat = None if row[6] is None else FileStat(row[6], row[7], row[8])
    return Base(
        project_id=row[0],
        generation=row[1],
        state_digest=row[2],
        ancestors=tuple(json.loads(row[3])),
        stamps={
            (kind, name): Stamp(digest, revision, parent)
            for kind, name, revision, parent, digest in json.loads(row[4])
        },
        document_digest=row[5],
        file_stat=stat,
    )


def save(conn: sqlite3.Connection, ledger: Ledger, document_digest: str) -> None:
    """Make ``ledger`` (whose file bytes digest to ``document_digest``) the base."""
    stamps = [
        [found.type, found.id, found.revision, found.parent_digest, found.digest]
        for found in ledger.records
    ]
    conn.execute(
        "INSERT INTO delivery_ledger_base (id, project_id, generation, state_digest, ancestors,"
        " stamps, document_digest, file_size, file_mtime_ns, file_inode, updated_at)"
        " VALUES (1, ?, ?, ?, ?, ?, ?, NULL, NULL, NULL, ?) ON CONFLICT (id) DO UPDATE SET"
        " project_id = excluded.project_id, generation = excluded.generation,"
        " state_digest = excluded.state_digest, ancestors = excluded.ancestors,"
        " stamps = excluded.stamps, document_digest = excluded.document_digest,"
        " file_size = NULL, file_mtime_ns = NULL, file_inode = NULL,"
        " updated_at = excluded.updated_at",
        (
            ledger.project_id,
            ledger.generation,
            ledger.state_digest,
            json.dumps(list(ledger.ancestors)),
            json.dumps(stamps, separators=(",", ":"), ensure_ascii=False),
            document_digest,
            clock.now(),
        ),
    )


def keep_document(project: Project, data: bytes, digest: str) -> None:
    """Store the base document as a blob (``BlobStore.put``'s layout, with the digest
    already taken by the faster hash a multi-megabyte ledger wants)."""
    blobs = BlobStore(project.blobs_dir)
    if blobs.exists(digest):
        return
    relative = blobs.path(digest).relative_to(blobs.root)
    write_atomic(blobs.root, relative, data, mode=0o444)
    # A publish killed inside this write left its temp here: no one holds it any more.
    abandoned_temps(blobs.root / relative.parent, remove=True)


def stat_of(state_root: str) -> FileStat | None:
    try:
        found = os.stat(os.path.join(state_root, LEDGER_PATH), follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return FileStat(found.st_size, found.st_mtime_ns, found.st_ino)


def unchanged_since_sync(base: Base | None, state_root: str) -> bool:
    """Whether the file is known to hold the base's bytes without reading it."""
    return base is not None and base.file_stat is not None and base.file_stat == stat_of(state_root)


def remember_stat(store: Store, state_root: str) -> None:
    """Cache the file's stat in the base when the file holds the base's bytes (stat first,
    bytes second: a file replaced in between no longer matches, and is not cached)."""
    stat = stat_of(state_root)
    data = registry.read_bytes(state_root, LEDGER_PATH)
    if stat is None or data is None:
        return
    with store.write() as conn:
        conn.execute(
            "UPDATE delivery_ledger_base SET file_size = ?, file_mtime_ns = ?, file_inode = ?"
            " WHERE id = 1 AND document_digest = ?",
            (stat.size, stat.mtime_ns, stat.inode, document_digest(data)),
        )
