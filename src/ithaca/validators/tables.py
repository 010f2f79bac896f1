"""The validator engine's tables: notebooks, cell versions, bindings and runs.

A cell version is never rewritten or deleted (triggers refuse both), so every version an
agent wrote stays readable and a binding can name the exact version it snapshotted. A
binding's trusted digest is the one in the journal event that named it; the row only
points at that event (``journal_seq``) and at the content-addressed blob. Runs are kept
under their ``evidenceDigest`` so an owner's event can cite the evidence it acted on.
"""

VALIDATORS_V1 = """
CREATE TABLE notebooks (
  notebook_id TEXT PRIMARY KEY,
  title TEXT NOT NULL CHECK (length(title) BETWEEN 1 AND 200),
  language TEXT NOT NULL CHECK (language IN ('python','javascript','typescript','shell')),
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE INDEX notebooks_updated ON notebooks(updated_at, notebook_id);

CREATE TABLE notebook_cells (
  cell_id TEXT PRIMARY KEY,
  notebook_id TEXT NOT NULL REFERENCES notebooks(notebook_id),
  position INTEGER NOT NULL CHECK (position >= 1),
  created_at TEXT NOT NULL,
  UNIQUE (notebook_id, position)
);

CREATE TABLE notebook_cell_versions (
  cell_id TEXT NOT NULL REFERENCES notebook_cells(cell_id),
  version INTEGER NOT NULL CHECK (version >= 1),
  role TEXT NOT NULL CHECK (role IN ('markdown','manifest','validator')),
  language TEXT CHECK (language IN ('python','javascript','typescript','shell')),
  filename TEXT CHECK (filename IS NULL OR length(filename) BETWEEN 1 AND 64),
  mode TEXT CHECK (mode IN ('judge','probe')),
  timeout_s NUMERIC CHECK (timeout_s IS NULL OR timeout_s > 0),
  source TEXT NOT NULL CHECK (length(CAST(source AS BLOB)) <= 262144),
  source_sha256 TEXT NOT NULL CHECK (length(source_sha256) = 64),
  created_at TEXT NOT NULL,
  PRIMARY KEY (cell_id, version),
  CHECK ((role = 'markdown') = (language IS NULL AND filename IS NULL)),
  CHECK ((role = 'validator') = (mode IS NOT NULL)),
  CHECK (role = 'validator' OR timeout_s IS NULL)
);

CREATE TRIGGER notebook_cell_versions_immutable BEFORE UPDATE ON notebook_cell_versions
BEGIN
  SELECT RAISE(ABORT, 'notebook cell versions are immutable');
END;

CREATE TRIGGER notebook_cell_versions_kept BEFORE DELETE ON notebook_cell_versions
BEGIN
  SELECT RAISE(ABORT, 'notebook cell versions are kept');
END;

CREATE TABLE validator_bindings (
  binding_id TEXT PRIMARY KEY,
  owner_kind TEXT NOT NULL CHECK (length(owner_kind) > 0),
  owner_id TEXT NOT NULL CHECK (length(owner_id) > 0),
  role TEXT NOT NULL CHECK (length(role) > 0),
  notebook_id TEXT NOT NULL REFERENCES notebooks(notebook_id),
  cell_id TEXT NOT NULL,
  cell_version INTEGER NOT NULL CHECK (cell_version >= 1),
  language TEXT NOT NULL CHECK (language IN ('python','javascript','typescript','shell')),
  mode TEXT NOT NULL CHECK (mode IN ('judge','probe')),
  snapshot_digest TEXT NOT NULL CHECK (length(snapshot_digest) = 64),
  journal_seq INTEGER CHECK (journal_seq IS NULL OR journal_seq >= 1),
  bound_at TEXT NOT NULL,
  FOREIGN KEY (cell_id, cell_version) REFERENCES notebook_cell_versions(cell_id, version)
);
CREATE INDEX validator_bindings_owner ON validator_bindings(owner_kind, owner_id, role);
CREATE INDEX validator_bindings_snapshot ON validator_bindings(snapshot_digest);

CREATE TABLE validator_runs (
  evidence_digest TEXT NOT NULL CHECK (length(evidence_digest) = 64),
  binding_id TEXT NOT NULL REFERENCES validator_bindings(binding_id),
  pass INTEGER NOT NULL CHECK (pass IN (0, 1)),
  result_json TEXT NOT NULL CHECK (json_valid(result_json)),
  at TEXT NOT NULL,
  PRIMARY KEY (evidence_digest, binding_id)
);
CREATE INDEX validator_runs_binding ON validator_runs(binding_id, at);
"""
