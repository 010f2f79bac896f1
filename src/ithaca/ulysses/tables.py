"""The Ulysses protocol's tables: sessions and their notes.

A session row keeps the whole machine state as canonical JSON beside the columns that
queries and constraints need: its status (the partial unique index allows one active
session per project, whatever process asks) and its ``version`` (an operation that ran a
validator outside the transaction compares it before committing). Notes live in their
own table because they can be many and large, and ``note`` changes no version.
"""

ULYSSES_V1 = """
CREATE TABLE ulysses_sessions (
  session_id TEXT PRIMARY KEY,
  status TEXT NOT NULL CHECK (status IN
    ('active','resolved','insufficient_information','environment_compromised','superseded')),
  version INTEGER NOT NULL CHECK (version >= 1),
  state_json TEXT NOT NULL CHECK (json_valid(state_json)),
  created_at TEXT NOT NULL,
  completed_at TEXT,
  CHECK ((status = 'active') = (completed_at IS NULL))
);
CREATE UNIQUE INDEX ulysses_one_active ON ulysses_sessions(status) WHERE status = 'active';
CREATE INDEX ulysses_sessions_completed ON ulysses_sessions(completed_at);

CREATE TABLE ulysses_notes (
  session_id TEXT NOT NULL REFERENCES ulysses_sessions(session_id),
  note_seq INTEGER NOT NULL CHECK (note_seq >= 1),
  kind TEXT NOT NULL CHECK (kind IN ('context','observation','evidence','decision','question')),
  thought TEXT NOT NULL,
  data_json TEXT CHECK (data_json IS NULL OR json_valid(data_json)),
  at TEXT NOT NULL,
  journal_seq INTEGER NOT NULL,
  PRIMARY KEY (session_id, note_seq)
);
"""
