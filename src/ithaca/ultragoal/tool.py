"""The ``ultragoal`` MCP tool's published schema and description (agent operations only).

The MCP server hands the raw arguments to ``UltragoalService.dispatch``, which checks
them per operation (``inputs``); this schema describes every field so a client can show
them. User-only levers and the hook's dispatch claim are deliberately absent: over MCP
they are refused with the command to present to the user.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import SESSION_PROPERTY, ToolSpec
from ithaca.ultragoal.inputs import AGENT_OPERATIONS

ULTRAGOAL_TITLE = "Ultragoal objective pursuit"

ULTRAGOAL_DESCRIPTION = (
    "Pursue one falsifiable objective to a completion that structure, not your word, "
    "decides. get / status read this session's pursuit (get returns {state}; refuse to "
    "start a second pursuit when state.active and not state.pristine). Planning: "
    "set {phase: planning, outcome, verification_surface, constraints, boundaries, "
    "non_goals ('- <non-goal> | decider: <who>' lines), max_iterations, blocked_stop, "
    "plan_path, resume_summary}; set_stories {stories: [{id, story, acceptance_criteria, "
    "verification_surface, validator?: {notebookId, cellId}}]} or {single: true}; "
    "reorder_stories {order}; confirm_all_stories / confirm_story {id} relay the user's "
    "bulk approval (planning only). Arm the loop with set {phase: pursuing, "
    "completion_evidence: [paths], codex_goal_objective?} before dispatching story 1. "
    "Steering (planning or pursuing, with evidence and rationale): add_story {story}, "
    "revise_story {id, patch}, retire_story {id}, split_story {id, replacements}; "
    "approved stories are fenced while pursuing. run_story_validator {id, observed?} runs "
    "a story's bound validator. record_story_verdict {id, verdict: APPROVE | "
    "REQUEST_CHANGES, evidence_refs, verifier} judges the current story (evidence files "
    "are hashed; a later edit invalidates them). Review lane: the hook claims a dispatch "
    "when you start the reviewer and briefs it with its nonce; the reviewer calls "
    "submit_review {nonce, artifact} (files_read citing what it read); read "
    "get_review_result; serialize_review_context is "
    "what the reviewer receives; record_comment_resolution {artifact_sha256, evidence} "
    "closes MEDIUM repairs. Finish with set_verdict {verdict: APPROVE}, then "
    "request_complete {codex_goal_json?}: the only path to complete, refused with every "
    "failed gate listed. set_blocked {reason} reports a real blocker. list_others and "
    "adopt {src} continue another session's pursuit on the user's explicit choice. "
    "Resuming a budget-limited pursuit, renewing the review budget and dismissing a "
    "finding are the user's: present `ithaca ultragoal <command>` for them to run."
)

_TEXT = {"type": "string"}
_TEXTS = {"type": "array", "items": {"type": "string"}}
_COUNT = {"type": "integer", "minimum": 1}
_STORY = {
    "type": "object",
    "description": "{id, story, acceptance_criteria[], verification_surface, validator?}",
}

ULTRAGOAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {"type": "string", "enum": list(AGENT_OPERATIONS)},
        "session": SESSION_PROPERTY,
        "phase": {"type": "string", "enum": ["planning", "pursuing"], "description": "(set)"},
        "outcome": {**_TEXT, "description": "What done looks like (set, planning)."},
        "verification_surface": {**_TEXT, "description": "What a machine checks (set)."},
        "constraints": {**_TEXT, "description": "Limits the work respects (set)."},
        "boundaries": {**_TEXT, "description": "Where the work may reach (set)."},
        "non_goals": {**_TEXT, "description": "'- <non-goal> | decider: <who>' lines (set)."},
        "max_iterations": {**_COUNT, "description": "Stop turns without progress (set)."},
        "max_wall_minutes": {**_COUNT, "description": "Wall-clock budget (set)."},
        "blocked_stop": {**_TEXT, "description": "When to report blocked (set)."},
        "plan_path": {**_TEXT, "description": "The plan file (set)."},
        "resume_summary": {**_TEXT, "description": "Where the work stands (set)."},
        "completion_evidence": {**_TEXTS, "description": "Evidence paths (set, pursuing)."},
        "codex_goal_objective": {**_TEXT, "description": "The create_goal objective (set)."},
        "stories": {"type": "array", "items": _STORY, "description": "(set_stories)"},
        "single": {"type": "boolean", "description": "Derive one story (set_stories)."},
        "order": {**_TEXTS, "description": "Every story id, in order (reorder_stories)."},
        "id": {**_TEXT, "description": "A story id."},
        "story": {**_STORY, "description": "The new story (add_story)."},
        "patch": {"type": "object", "description": "Story keys to change (revise_story)."},
        "replacements": {"type": "array", "items": _STORY, "description": "(split_story)"},
        "evidence": {
            "description": "Steering evidence text (story operations) or evidence paths"
            " (record_comment_resolution)."
        },
        "rationale": {**_TEXT, "description": "Why the story set changes (story operations)."},
        "observed": {"description": "Data the validator judges (run_story_validator)."},
        "verdict": {
            "type": "string",
            "enum": ["APPROVE", "REQUEST_CHANGES", "COMMENT", "absent"],
            "description": "record_story_verdict: APPROVE or REQUEST_CHANGES; set_verdict.",
        },
        "evidence_refs": {**_TEXTS, "description": "Evidence paths (record_story_verdict)."},
        "verifier": {**_TEXT, "description": "Who judged (record_story_verdict)."},
        "artifact_sha256": {**_TEXT, "description": "(record_comment_resolution)"},
        "codex_goal_json": {"description": "A get_goal snapshot (request_complete)."},
        "reason": {**_TEXT, "description": "The blocker (set_blocked)."},
        "src": {**_TEXT, "description": "The session to adopt (adopt)."},
        "nonce": {**_TEXT, "description": "The review dispatch nonce (submit_review)."},
        "artifact": {"type": "object", "description": "The review artifact (submit_review)."},
    },
    "required": ["operation"],
    "additionalProperties": False,
}

TOOLS = (
    ToolSpec(
        "ultragoal",
        ULTRAGOAL_TITLE,
        ULTRAGOAL_DESCRIPTION,
        ULTRAGOAL_SCHEMA,
        read_only=False,
        service="ultragoal",
        method="dispatch",
    ),
)
