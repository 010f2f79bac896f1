"""The ledger's sync base table (``ledger_base``), a migration of its own.

The base is this checkout's last import or publish: the three-way merge compares the
database and the file against it, so it must survive restarts and live in the store. It
is a singleton row: the project's identity, the document's header (generation, state
digest, ancestors), every record's stamp (revision, parent digest, digest) so a merge
needs no parse of the old document, the digest of the document's bytes (kept as a blob)
and the file's (size, mtime_ns, inode) when it last matched, which lets the check before
every mutating call skip hashing an unchanged file.
"""

LEDGER_V1 = """
CREATE TABLE delivery_ledger_base (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  project_id TEXT NOT NULL,
  generation INTEGER NOT NULL CHECK (generation >= 0),
  state_digest TEXT NOT NULL,
  ancestors TEXT NOT NULL CHECK (json_valid(ancestors)),
  stamps TEXT NOT NULL CHECK (json_valid(stamps)),
  document_digest TEXT NOT NULL,
  file_size INTEGER,
  file_mtime_ns INTEGER,
  file_inode INTEGER,
  updated_at TEXT NOT NULL
);
"""
