"""The protocols part's tables. Only this part touches them."""

PROTOCOLS_V1 = """
CREATE TABLE protocol_events (
  seq INTEGER PRIMARY KEY,
  id TEXT NOT NULL UNIQUE,
  received_at TEXT NOT NULL,
  connector TEXT NOT NULL CHECK (connector IN ('claude-code','codex','opencode','cli',
            'web-api','scheduled-job','test','unknown')),
  kind TEXT NOT NULL CHECK (kind IN ('chat.message','command','workflow.event')),
  actor_id TEXT NOT NULL,
  actor_kind TEXT NOT NULL CHECK (actor_kind IN ('user','system','test')),
  host_session_id TEXT, host_turn_id TEXT,
  client_id TEXT, project_id TEXT, workflow TEXT, task TEXT,
  context_sources TEXT NOT NULL CHECK (json_valid(context_sources)),
  prompt_sha256 TEXT, prompt_length INTEGER,
  admitted_by TEXT NOT NULL CHECK (admitted_by IN ('hook','user','system')),
  record_hash TEXT NOT NULL
);
CREATE INDEX protocol_events_session ON protocol_events(host_session_id, seq);
CREATE TRIGGER protocol_events_no_update BEFORE UPDATE ON protocol_events
BEGIN SELECT RAISE(ABORT, 'protocol_events is insert-only'); END;
CREATE TRIGGER protocol_events_no_delete BEFORE DELETE ON protocol_events
BEGIN SELECT RAISE(ABORT, 'protocol_events is insert-only'); END;

CREATE TABLE protocols (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL,
  scope TEXT NOT NULL CHECK (scope IN ('base','user')),
  enabled INTEGER NOT NULL CHECK (enabled IN (0,1)),
  priority INTEGER NOT NULL CHECK (priority BETWEEN -1000 AND 1000),
  selector_json TEXT NOT NULL
    CHECK (json_valid(selector_json) AND json_type(selector_json)='object'),
  rules_json TEXT NOT NULL CHECK (json_valid(rules_json) AND json_type(rules_json)='array'),
  constraints_json TEXT NOT NULL
    CHECK (json_valid(constraints_json) AND json_type(constraints_json)='array'),
  source TEXT NOT NULL CHECK (source IN ('seed','sqlite','file')),
  tags_json TEXT NOT NULL CHECK (json_valid(tags_json) AND json_type(tags_json)='array'),
  overrides_base INTEGER NOT NULL DEFAULT 0 CHECK (overrides_base IN (0,1)),
  base_hash TEXT,
  file_path TEXT,
  content_hash TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
  CHECK (scope='user' OR (source='seed' AND enabled=1 AND overrides_base=0)),
  CHECK (scope='base' OR source<>'seed'),
  CHECK (overrides_base=0 OR (enabled=1 AND base_hash IS NOT NULL)),
  CHECK ((source='file') = (file_path IS NOT NULL))
);
CREATE INDEX protocols_enabled_priority ON protocols(enabled, priority DESC, id);

CREATE TABLE protocol_seeds (
  id TEXT PRIMARY KEY,
  record_json TEXT NOT NULL CHECK (json_valid(record_json)),
  content_hash TEXT NOT NULL,
  updated_at TEXT NOT NULL
);

CREATE TABLE protocol_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  revision INTEGER NOT NULL,
  seed_set_digest TEXT,
  files_digest TEXT,
  files_listing TEXT
);
INSERT INTO protocol_state (singleton, revision) VALUES (1, 0);

CREATE TRIGGER protocols_revision_insert AFTER INSERT ON protocols
BEGIN UPDATE protocol_state SET revision = revision + 1; END;
CREATE TRIGGER protocols_revision_update AFTER UPDATE ON protocols
BEGIN UPDATE protocol_state SET revision = revision + 1; END;
CREATE TRIGGER protocols_revision_delete AFTER DELETE ON protocols
BEGIN UPDATE protocol_state SET revision = revision + 1; END;
CREATE TRIGGER protocol_seeds_revision_insert AFTER INSERT ON protocol_seeds
BEGIN UPDATE protocol_state SET revision = revision + 1; END;
CREATE TRIGGER protocol_seeds_revision_update AFTER UPDATE ON protocol_seeds
BEGIN UPDATE protocol_state SET revision = revision + 1; END;
CREATE TRIGGER protocol_seeds_revision_delete AFTER DELETE ON protocol_seeds
BEGIN UPDATE protocol_state SET revision = revision + 1; END;

CREATE TABLE protocol_sessions (
  host_session_id TEXT PRIMARY KEY,
  connector TEXT NOT NULL,
  current_event_id TEXT REFERENCES protocol_events(id),
  workflow_override TEXT,
  task_override TEXT,
  bundle_revision INTEGER,
  bundle_digest TEXT,
  bundle_ids_json TEXT,
  loaded_digest TEXT,
  loaded_at TEXT,
  updated_at TEXT NOT NULL
);

CREATE TABLE protocol_approvals (
  id TEXT PRIMARY KEY,
  host_session_id TEXT NOT NULL,
  event_id TEXT REFERENCES protocol_events(id),
  action_digest TEXT NOT NULL,
  action_blob TEXT,
  protocol_ids_json TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','granted','consumed')),
  requested_at TEXT NOT NULL,
  granted_at TEXT,
  expires_at TEXT,
  consumed_at TEXT
);
CREATE INDEX protocol_approvals_action ON protocol_approvals(host_session_id, action_digest);
"""
