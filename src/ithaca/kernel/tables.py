"""The kernel's own tables: the journal, the host-session registry, gate state and
write allowances (DESIGN, Kernel contracts 3–5), and the doctor's journal seals."""

KERNEL_V1 = """
CREATE TABLE journal (
  seq INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  actor TEXT NOT NULL CHECK (actor IN ('agent','hook','user','system')),
  kind TEXT NOT NULL,
  subject TEXT,
  payload TEXT NOT NULL,
  prev_hash TEXT NOT NULL,
  hash TEXT NOT NULL
);
CREATE INDEX journal_kind ON journal(kind, seq);
CREATE INDEX journal_subject ON journal(subject, seq);

CREATE TABLE host_sessions (
  host TEXT NOT NULL,
  host_session_id TEXT NOT NULL,
  first_seen_at TEXT NOT NULL,
  last_seen_at TEXT NOT NULL,
  ended_at TEXT,
  PRIMARY KEY (host, host_session_id)
);

CREATE TABLE gate_state (
  part TEXT NOT NULL,
  scope_key TEXT NOT NULL,
  state_json TEXT NOT NULL CHECK (json_valid(state_json)),
  updated_seq INTEGER NOT NULL,
  PRIMARY KEY (part, scope_key)
);

CREATE TABLE write_allowances (
  path TEXT NOT NULL,
  owner TEXT NOT NULL,
  created_at TEXT NOT NULL,
  PRIMARY KEY (path, owner)
);
"""

# The doctor's seals over the journal's stored pages (``kernel.journal_check``): each row
# covers the journal rows ``first_seq..last_seq``, whose chain the doctor re-derived
# before sealing the leaf pages (and overflow pages) that hold them. ``leaves`` and
# ``overflow`` are page numbers, 4 bytes each, big-endian; ``mac`` is the digest's MAC
# under the user's seal key (``kernel.anchor``), NULL where it was sealed without one.
JOURNAL_SEALS = """
CREATE TABLE journal_seals (
  first_seq INTEGER PRIMARY KEY,
  last_seq INTEGER NOT NULL CHECK (last_seq >= first_seq),
  leaves BLOB NOT NULL,
  overflow BLOB NOT NULL,
  digest TEXT NOT NULL,
  mac TEXT
);
"""
