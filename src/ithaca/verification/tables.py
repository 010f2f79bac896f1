"""The verification part's tables.

``verification_runs`` keeps every run Ithaca made of the project's tests: the content
digest of the tree it ran on (``verification.digest``), the runner and its command, the
exit status and the counts read from the runner's report, and the per-test outcomes as a
blob. Rows are never changed: a later run is a new row. ``verification_accepted`` holds
the runner configurations the user accepted (``ithaca verify accept-config``), by digest.
"""

VERIFICATION_V1 = """
CREATE TABLE verification_runs (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  session_id TEXT,
  actor TEXT NOT NULL CHECK (actor IN ('agent','hook','user','system')),
  runner TEXT NOT NULL,
  command_json TEXT NOT NULL CHECK (json_valid(command_json)),
  tree_digest TEXT NOT NULL,
  config_digest TEXT NOT NULL,
  status TEXT NOT NULL
    CHECK (status IN ('passed','failed','no_tests','timeout','error','changed')),
  exit_code INTEGER,
  collected INTEGER, passed INTEGER, failed INTEGER, errors INTEGER, skipped INTEGER,
  duration_ms INTEGER NOT NULL CHECK (duration_ms >= 0),
  tests_blob TEXT,
  reason TEXT NOT NULL
);
CREATE INDEX verification_runs_tree ON verification_runs(tree_digest, seq);
CREATE TRIGGER verification_runs_no_update BEFORE UPDATE ON verification_runs
BEGIN SELECT RAISE(ABORT, 'verification_runs is insert-only'); END;

CREATE TABLE verification_accepted (
  seq INTEGER PRIMARY KEY,
  at TEXT NOT NULL,
  config_digest TEXT NOT NULL,
  files_json TEXT NOT NULL CHECK (json_valid(files_json))
);
CREATE INDEX verification_accepted_digest ON verification_accepted(config_digest);
"""
