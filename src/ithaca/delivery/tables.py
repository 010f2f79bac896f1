"""The delivery part's tables, migration 6 (docs/architecture.md, "Store").

Rows hold what queries and constraints need; the rest is canonical JSON under
``CHECK(json_valid(..))``. The partial unique indexes carry the rules that must hold
whatever process writes: one accepted and one open baseline, one current artifact per
path, one draft and one accepted checkpoint per (stage, scope), a decision superseded at
most once. Scope ids are NULL for the baseline (and the project); indexes that must treat
those as equal use ``ifnull(scope_id, '')``.

Foreign keys are ``DEFERRABLE INITIALLY DEFERRED`` so a rebuild or a ledger import can
load records in any order inside one transaction. Kinds of registered files and host
names are data, never CHECK values, so later parts add kinds without a migration.
"""

DELIVERY_V1 = """
CREATE TABLE delivery_idempotency (
  key TEXT PRIMARY KEY,
  tool TEXT NOT NULL,
  request_digest TEXT NOT NULL,
  result TEXT NOT NULL CHECK (json_valid(result)),
  journal_seq INTEGER,
  created_at TEXT NOT NULL
);

CREATE TABLE delivery_baselines (
  id TEXT PRIMARY KEY,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  mode TEXT NOT NULL CHECK (mode IN ('greenfield','brownfield')),
  status TEXT NOT NULL CHECK (status IN ('draft','adopting','accepted','superseded')),
  project_name TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (json_valid(scope)),
  classification TEXT NOT NULL CHECK (json_valid(classification)),
  specs TEXT NOT NULL CHECK (json_valid(specs)),
  evidence TEXT NOT NULL CHECK (json_valid(evidence)),
  gaps TEXT NOT NULL CHECK (json_valid(gaps)),
  unknowns TEXT NOT NULL CHECK (json_valid(unknowns)),
  approval TEXT CHECK (approval IS NULL OR json_valid(approval)),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX delivery_baselines_one_accepted
  ON delivery_baselines((1)) WHERE status = 'accepted';
CREATE UNIQUE INDEX delivery_baselines_one_open
  ON delivery_baselines((1)) WHERE status IN ('draft','adopting');

CREATE TABLE delivery_changes (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('quick','standard','major','incident')),
  status TEXT NOT NULL
    CHECK (status IN ('active','blocked','ready','cancelled','archived')),
  title TEXT NOT NULL,
  contract TEXT NOT NULL CHECK (json_valid(contract)),
  classification TEXT NOT NULL CHECK (json_valid(classification)),
  research_disposition TEXT
    CHECK (research_disposition IS NULL OR research_disposition IN ('none','bounded','required')),
  diagnosis TEXT CHECK (diagnosis IS NULL OR json_valid(diagnosis)),
  debug_session_id TEXT,
  path TEXT NOT NULL UNIQUE,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  cancel_reason TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX delivery_changes_status ON delivery_changes(status, created_at);

CREATE TABLE delivery_decisions (
  id TEXT PRIMARY KEY,
  scope_type TEXT NOT NULL CHECK (scope_type IN ('baseline','change')),
  scope_id TEXT REFERENCES delivery_changes(id) DEFERRABLE INITIALLY DEFERRED,
  path TEXT NOT NULL UNIQUE,
  digest TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('accepted','deferred')),
  supersedes_id TEXT UNIQUE
    REFERENCES delivery_decisions(id) DEFERRABLE INITIALLY DEFERRED,
  question TEXT NOT NULL,
  created_at TEXT NOT NULL,
  CHECK ((scope_type = 'baseline') = (scope_id IS NULL))
);
CREATE INDEX delivery_decisions_scope ON delivery_decisions(scope_type, scope_id);

CREATE TABLE delivery_tasks (
  id TEXT PRIMARY KEY,
  change_id TEXT REFERENCES delivery_changes(id) DEFERRABLE INITIALLY DEFERRED,
  parent_id TEXT REFERENCES delivery_tasks(id) DEFERRABLE INITIALLY DEFERRED,
  status TEXT NOT NULL CHECK (status IN
    ('pending','in_progress','blocked','expanded','completed','removed')),
  published_status TEXT CHECK (published_status IS NULL OR published_status IN
    ('pending','blocked','expanded','completed')),
  contract TEXT NOT NULL CHECK (json_valid(contract)),
  contract_digest TEXT NOT NULL,
  outcome TEXT CHECK (outcome IS NULL OR json_valid(outcome)),
  completion_commit TEXT,
  removed_reason TEXT,
  revision INTEGER NOT NULL CHECK (revision >= 1),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX delivery_tasks_change ON delivery_tasks(change_id, status);
CREATE INDEX delivery_tasks_parent ON delivery_tasks(parent_id);

CREATE TABLE delivery_circuits (
  task_id TEXT PRIMARY KEY REFERENCES delivery_tasks(id) DEFERRABLE INITIALLY DEFERRED,
  consecutive_failures INTEGER NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
  open INTEGER NOT NULL DEFAULT 0 CHECK (open IN (0, 1)),
  updated_at TEXT NOT NULL
);

CREATE TABLE delivery_artifacts (
  id TEXT PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('research','delta','context','test_report',
    'review_report','documentation','delivery_note','spec','evidence','task_outcome')),
  scope_type TEXT NOT NULL CHECK (scope_type IN ('baseline','change','task')),
  scope_id TEXT,
  path TEXT NOT NULL,
  digest TEXT NOT NULL,
  bytes INTEGER NOT NULL CHECK (bytes >= 0),
  mode TEXT NOT NULL CHECK (mode IN ('copy','reference')),
  status TEXT NOT NULL CHECK (status IN ('current','superseded')),
  role TEXT,
  superseded_by TEXT,
  created_at TEXT NOT NULL,
  CHECK ((scope_type = 'baseline') = (scope_id IS NULL))
);
CREATE UNIQUE INDEX delivery_artifacts_current_path
  ON delivery_artifacts(mode, path) WHERE status = 'current';
CREATE INDEX delivery_artifacts_scope ON delivery_artifacts(scope_type, scope_id, status);

CREATE TABLE delivery_checkpoints (
  id TEXT PRIMARY KEY,
  stage TEXT NOT NULL
    CHECK (stage IN ('research','plan','dev','test','review','deliver')),
  scope_type TEXT NOT NULL CHECK (scope_type IN ('project','baseline','change','task')),
  scope_id TEXT,
  revision INTEGER CHECK (revision IS NULL OR revision >= 1),
  status TEXT NOT NULL CHECK (status IN ('draft','accepted','superseded','abandoned')),
  payload TEXT NOT NULL CHECK (json_valid(payload)),
  evidence TEXT NOT NULL CHECK (json_valid(evidence)),
  diagnostics TEXT NOT NULL CHECK (json_valid(diagnostics)),
  envelope_digest TEXT,
  supersedes_id TEXT REFERENCES delivery_checkpoints(id) DEFERRABLE INITIALLY DEFERRED,
  digest TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX delivery_checkpoints_one_draft
  ON delivery_checkpoints(stage, scope_type, ifnull(scope_id, '')) WHERE status = 'draft';
CREATE UNIQUE INDEX delivery_checkpoints_one_accepted
  ON delivery_checkpoints(stage, scope_type, ifnull(scope_id, '')) WHERE status = 'accepted';

CREATE TABLE delivery_fs_intents (
  id TEXT PRIMARY KEY,
  op TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','committed','done','rolled_back')),
  owner_pid INTEGER NOT NULL,
  owner_start TEXT,
  steps TEXT NOT NULL CHECK (json_valid(steps)),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX delivery_fs_intents_status ON delivery_fs_intents(status);

CREATE TABLE delivery_reconciliations (
  change_id TEXT PRIMARY KEY REFERENCES delivery_changes(id) DEFERRABLE INITIALLY DEFERRED,
  updates TEXT NOT NULL CHECK (json_valid(updates)),
  reason TEXT,
  status TEXT NOT NULL CHECK (status IN ('reconciled','unreconciled')),
  baseline_revision INTEGER,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE delivery_files (
  path TEXT PRIMARY KEY,
  digest TEXT NOT NULL,
  kind TEXT NOT NULL,
  scope_type TEXT NOT NULL CHECK (scope_type IN ('project','baseline','change','task')),
  scope_id TEXT,
  updated_at TEXT NOT NULL
);
CREATE INDEX delivery_files_scope ON delivery_files(scope_type, scope_id);
"""
