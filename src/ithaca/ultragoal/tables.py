"""The ultragoal part's tables.

One row per host session in ``ultragoal_pursuit``; every other table hangs off that
session id, so a fresh pursuit, a reap or an adoption deletes or re-keys a session's rows
as a whole. JSON-valued columns hold canonical JSON (RFC 8785) and are checked with
``json_valid`` so a hand edit that breaks them fails at the database, not in a gate.
``version`` counts the session's journaled transitions: operations that read files before
their transaction compare it to learn whether what they read is still current.
"""

# The commit a pursuit's review is checked against (``review_diff``): NULL until it first
# enters pursuing, '' in a repository that had no commit then.
ULTRAGOAL_REVIEW_BASE = "ALTER TABLE ultragoal_pursuit ADD COLUMN review_base TEXT;"

# The hook's submission passes: one for each review submission the PreToolUse hook saw
# coming from the reviewer subagent (the host's agent identity in the payload), bound to
# the open dispatch and the exact artifact. ``submit-review`` spends one per attempt.
ULTRAGOAL_REVIEW_PASS = """
CREATE TABLE ultragoal_review_pass (
  session_id TEXT NOT NULL,
  pass_no INTEGER NOT NULL CHECK (pass_no >= 1),
  dispatch_no INTEGER NOT NULL,
  artifact_sha256 TEXT NOT NULL CHECK (length(artifact_sha256) = 64),
  host TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  agent_type TEXT NOT NULL,
  minted_at TEXT NOT NULL,
  spent_at TEXT,
  PRIMARY KEY (session_id, pass_no),
  FOREIGN KEY (session_id, dispatch_no) REFERENCES ultragoal_review_dispatch(session_id,
    dispatch_no) ON DELETE CASCADE ON UPDATE CASCADE
);
"""

ULTRAGOAL_V1 = """
CREATE TABLE ultragoal_pursuit (
  session_id TEXT PRIMARY KEY CHECK (length(session_id) BETWEEN 1 AND 200),
  outcome TEXT NOT NULL DEFAULT '',
  verification_surface TEXT NOT NULL DEFAULT '',
  constraints TEXT NOT NULL DEFAULT '',
  boundaries TEXT NOT NULL DEFAULT '',
  non_goals TEXT NOT NULL DEFAULT '',
  max_iterations INTEGER NOT NULL CHECK (max_iterations >= 1),
  blocked_stop TEXT NOT NULL DEFAULT '',
  phase TEXT NOT NULL
    CHECK (phase IN ('planning','pursuing','budget_limited','blocked','complete')),
  iteration INTEGER NOT NULL DEFAULT 0 CHECK (iteration >= 0),
  started_at TEXT NOT NULL,
  active INTEGER NOT NULL CHECK (active IN (0, 1)),
  objective_verdict TEXT NOT NULL DEFAULT 'absent'
    CHECK (objective_verdict IN ('absent','APPROVE','REQUEST_CHANGES','COMMENT')),
  plan_path TEXT NOT NULL DEFAULT '',
  resume_summary TEXT NOT NULL DEFAULT '',
  budget_limit_notified INTEGER NOT NULL DEFAULT 0 CHECK (budget_limit_notified IN (0, 1)),
  blocked_reason TEXT NOT NULL DEFAULT '',
  completion_evidence TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(completion_evidence)),
  schema_version INTEGER NOT NULL DEFAULT 1,
  last_touched_at TEXT NOT NULL,
  progress_touched_at TEXT,
  review_dispatch_used INTEGER NOT NULL DEFAULT 0 CHECK (review_dispatch_used >= 0),
  review_dispatch_cap INTEGER NOT NULL DEFAULT 5 CHECK (review_dispatch_cap >= 0),
  approved_review_artifact_sha256 TEXT NOT NULL DEFAULT '',
  review_resolution TEXT CHECK (review_resolution IS NULL OR json_valid(review_resolution)),
  codex_goal_objective TEXT NOT NULL DEFAULT '',
  last_seen_head TEXT,
  last_seen_stories_digest TEXT,
  last_seen_evidence_count INTEGER,
  last_seen_validator_digest TEXT,
  max_wall_minutes INTEGER CHECK (max_wall_minutes IS NULL OR max_wall_minutes >= 1),
  wall_used_s REAL NOT NULL DEFAULT 0 CHECK (wall_used_s >= 0),
  turn_started_at TEXT,
  budget_kind TEXT CHECK (budget_kind IS NULL OR budget_kind IN ('iterations','wall_clock','user')),
  stop_blocks_consecutive INTEGER NOT NULL DEFAULT 0,
  background_waits INTEGER NOT NULL DEFAULT 0,
  host_capped INTEGER NOT NULL DEFAULT 0 CHECK (host_capped IN (0, 1)),
  pursued_once INTEGER NOT NULL DEFAULT 0 CHECK (pursued_once IN (0, 1)),
  fresh_start_authorised INTEGER NOT NULL DEFAULT 0 CHECK (fresh_start_authorised IN (0, 1)),
  completion TEXT CHECK (completion IS NULL OR json_valid(completion)),
  version INTEGER NOT NULL DEFAULT 0,
  CHECK (active = (phase IN ('planning','pursuing')))
);

CREATE TABLE ultragoal_story (
  session_id TEXT NOT NULL REFERENCES ultragoal_pursuit(session_id) ON DELETE CASCADE
    ON UPDATE CASCADE,
  id TEXT NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
  position INTEGER NOT NULL,
  story TEXT NOT NULL,
  acceptance_criteria TEXT NOT NULL CHECK (json_valid(acceptance_criteria)),
  verification_surface TEXT NOT NULL,
  status TEXT NOT NULL CHECK (status IN ('unconfirmed','confirmed','retired')),
  steering_evidence TEXT,
  steering_rationale TEXT,
  split_from TEXT,
  split_into TEXT CHECK (split_into IS NULL OR json_valid(split_into)),
  validator TEXT CHECK (validator IS NULL OR json_valid(validator)),
  changed_seq INTEGER NOT NULL,
  confirmed_relayed INTEGER NOT NULL DEFAULT 0 CHECK (confirmed_relayed IN (0, 1)),
  ever_confirmed INTEGER NOT NULL DEFAULT 0 CHECK (ever_confirmed IN (0, 1)),
  PRIMARY KEY (session_id, id)
);

CREATE TABLE ultragoal_story_verdict (
  session_id TEXT NOT NULL,
  story_id TEXT NOT NULL,
  verdict TEXT NOT NULL CHECK (verdict IN ('APPROVE','REQUEST_CHANGES')),
  evidence TEXT NOT NULL CHECK (json_valid(evidence)),
  verifier TEXT NOT NULL,
  validator_run_id TEXT,
  at TEXT NOT NULL,
  seq INTEGER NOT NULL,
  PRIMARY KEY (session_id, story_id),
  FOREIGN KEY (session_id, story_id) REFERENCES ultragoal_story(session_id, id)
    ON DELETE CASCADE ON UPDATE CASCADE
);

CREATE TABLE ultragoal_validator_run (
  run_id TEXT PRIMARY KEY,
  session_id TEXT NOT NULL REFERENCES ultragoal_pursuit(session_id) ON DELETE CASCADE
    ON UPDATE CASCADE,
  story_id TEXT NOT NULL,
  binding_id TEXT NOT NULL,
  evidence_digest TEXT NOT NULL,
  pass INTEGER NOT NULL CHECK (pass IN (0, 1)),
  reason TEXT NOT NULL,
  cause TEXT,
  snapshot_sha256 TEXT NOT NULL,
  observed_sha256 TEXT,
  at TEXT NOT NULL,
  seq INTEGER NOT NULL
);
CREATE INDEX ultragoal_validator_run_story ON ultragoal_validator_run(session_id, story_id, seq);

CREATE TABLE ultragoal_evidence (
  session_id TEXT NOT NULL REFERENCES ultragoal_pursuit(session_id) ON DELETE CASCADE
    ON UPDATE CASCADE,
  path TEXT NOT NULL,
  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),
  PRIMARY KEY (session_id, path, sha256)
);

CREATE TABLE ultragoal_review (
  session_id TEXT PRIMARY KEY REFERENCES ultragoal_pursuit(session_id) ON DELETE CASCADE
    ON UPDATE CASCADE,
  artifact TEXT NOT NULL CHECK (json_valid(artifact)),
  artifact_sha256 TEXT NOT NULL CHECK (length(artifact_sha256) = 64),
  dispatch_no INTEGER NOT NULL
);

CREATE TABLE ultragoal_review_dispatch (
  session_id TEXT NOT NULL REFERENCES ultragoal_pursuit(session_id) ON DELETE CASCADE
    ON UPDATE CASCADE,
  dispatch_no INTEGER NOT NULL CHECK (dispatch_no >= 1),
  nonce_sha256 TEXT NOT NULL UNIQUE CHECK (length(nonce_sha256) = 64),
  nonce TEXT,
  claimed_at TEXT NOT NULL,
  picked_up_at TEXT,
  consumed_at TEXT,
  void INTEGER NOT NULL DEFAULT 0 CHECK (void IN (0, 1)),
  PRIMARY KEY (session_id, dispatch_no)
);

CREATE TABLE ultragoal_dismissal (
  session_id TEXT NOT NULL REFERENCES ultragoal_pursuit(session_id) ON DELETE CASCADE
    ON UPDATE CASCADE,
  artifact_sha256 TEXT NOT NULL,
  ref TEXT NOT NULL,
  class TEXT NOT NULL,
  rationale TEXT NOT NULL,
  at TEXT NOT NULL,
  PRIMARY KEY (session_id, artifact_sha256, ref, class)
);

CREATE TABLE ultragoal_adoption (
  src_session_id TEXT PRIMARY KEY,
  dst_session_id TEXT NOT NULL,
  at TEXT NOT NULL
);
"""
