"""The execution tables: sessions, Worker Packets, plan runs (docs/delivery.md,
"Execution: session and Worker Packets" and "ithaca run-plan").

A session row is the lease: ``lease_expires_at`` and ``heartbeat_at`` live here and
nowhere else, so a hook can renew it with one UPDATE. Each session keeps the TTL it was
acquired with (``lease_ttl_s``), so a hook renews it without reading configuration. The
partial unique index ``delivery_sessions_one_running`` is what makes two racing acquires
for one task end with one running session, whatever process wrote first.

``owner_pid``/``owner_start`` are set only for a process Ithaca launched (a run-plan
worker): an interactive session is owned by its host session and its lease, and the CLI
process that acquired it exits at once. ``plan_run_id`` marks sessions a run-plan owns,
which only the runner or the user may close.

A packet's ``digest`` is unique (it names its session, so it never repeats across
sessions), and a session has at most one ``assigned`` packet. Times are RFC 3339 UTC with
milliseconds, so comparing them as text compares them as times.
"""

DELIVERY_SESSIONS_V1 = """
CREATE TABLE delivery_sessions (
  id TEXT PRIMARY KEY,
  task_id TEXT NOT NULL REFERENCES delivery_tasks(id) DEFERRABLE INITIALLY DEFERRED,
  status TEXT NOT NULL CHECK (status IN
    ('running','completed','failed','abandoned','crashed','taken_over')),
  runtime TEXT NOT NULL,
  host_session_id TEXT,
  owner_pid INTEGER,
  owner_start TEXT,
  plan_run_id TEXT,
  worktree_path TEXT,
  branch TEXT,
  base_head TEXT,
  packet_id TEXT,
  lease_epoch INTEGER NOT NULL CHECK (lease_epoch >= 1),
  lease_ttl_s INTEGER NOT NULL CHECK (lease_ttl_s > 0),
  lease_expires_at TEXT NOT NULL,
  heartbeat_at TEXT NOT NULL,
  taken_over_from TEXT,
  close_reason TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL,
  closed_at TEXT
);
CREATE UNIQUE INDEX delivery_sessions_one_running
  ON delivery_sessions(task_id) WHERE status = 'running';
CREATE INDEX delivery_sessions_host
  ON delivery_sessions(host_session_id) WHERE status = 'running';

CREATE TABLE delivery_packets (
  id TEXT PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  session_id TEXT NOT NULL REFERENCES delivery_sessions(id) DEFERRABLE INITIALLY DEFERRED,
  task_id TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('pending','assigned','consumed','abandoned')),
  output_path TEXT NOT NULL,
  contract_digest TEXT NOT NULL,
  envelope_digest TEXT NOT NULL,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX delivery_packets_one_assigned
  ON delivery_packets(session_id) WHERE status = 'assigned';

CREATE TABLE delivery_plan_runs (
  id TEXT PRIMARY KEY,
  change_id TEXT NOT NULL REFERENCES delivery_changes(id) DEFERRABLE INITIALLY DEFERRED,
  checkpoint_id TEXT NOT NULL,
  plan_digest TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('running','paused','completed','superseded')),
  integration_branch TEXT NOT NULL,
  worktree_path TEXT NOT NULL,
  owner_pid INTEGER,
  owner_start TEXT,
  pause_reason TEXT,
  created_at TEXT NOT NULL,
  updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX delivery_plan_runs_one_open
  ON delivery_plan_runs(change_id) WHERE status IN ('running','paused');

CREATE TABLE delivery_plan_run_tasks (
  run_id TEXT NOT NULL REFERENCES delivery_plan_runs(id) DEFERRABLE INITIALLY DEFERRED,
  task_id TEXT NOT NULL,
  wave INTEGER NOT NULL CHECK (wave >= 1),
  status TEXT NOT NULL CHECK (status IN
    ('pending','running','integrated','paused','skipped')),
  session_id TEXT,
  reason TEXT,
  exit_code INTEGER,
  updated_at TEXT NOT NULL,
  PRIMARY KEY (run_id, task_id)
);
"""
