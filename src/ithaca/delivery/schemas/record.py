"""The ``data`` schema of every ``record`` (kind, action) (docs/delivery.md, "The record tool").

Bodies that ``revise`` changes with a merge patch are declared once (``*_BODY``) and the
patch schema is derived from them, so a field added to a body is patchable at once and
the patched result is checked against the same declaration. Size caps that carry their
own error code (decision text, artifact bodies, event payloads) are left to the action,
so the caller gets that code rather than a generic ``TOO_LONG``.
"""

from __future__ import annotations

from ithaca.delivery.schemas import ids
from ithaca.delivery.schemas.dialect import (
    Schema,
    array,
    merge_patch_of,
    obj,
    string_set,
    text,
)

TITLE = text(200)
NOTE = text(2000)
MARKDOWN = text(65536, min_length=0)
PATH = text(1024)
REVISION: Schema = {"type": "integer", "minimum": 1}

SCOPE: Schema = {
    "oneOf": [
        obj({"baseline": {"const": True}}),
        obj({"change_id": ids.CHANGE_ID}),
    ]
}
ARTIFACT_SCOPE: Schema = {"oneOf": [*SCOPE["oneOf"], obj({"task_id": ids.TASK_ID})]}

REF = obj({"path": PATH}, {"digest": ids.DIGEST})
GAP = obj(
    {"id": text(64), "category": text(64), "blocking": {"type": "boolean"}},
    {"note": text(2000, min_length=0, default="")},
)

# --- baseline -------------------------------------------------------------------------

MODE: Schema = {"type": "string", "enum": ["greenfield", "brownfield"]}
BASELINE_SCOPE = obj(optional={"paths": {**string_set(PATH, 200), "default": []}})
BASELINE_BODY = obj(
    {"project_name": TITLE, "mode": MODE},
    {
        "scope": {**BASELINE_SCOPE, "default": {"paths": []}},
        "specs": array(REF, 500, default=[]),
        "evidence": array(REF, 500, default=[]),
        "gaps": array(GAP, 200, default=[]),
        "unknowns": array(text(1000), 200, default=[]),
    },
)

BASELINE_INITIALIZE = obj(optional={"project_name": TITLE, "mode": MODE, "scope": BASELINE_SCOPE})
BASELINE_START = obj()
BASELINE_OBSERVE = obj(
    optional={
        "specs": array(REF, 200),
        "evidence": array(REF, 200),
        "gaps": array(GAP, 100),
        "unknowns": array(text(1000), 100),
    },
    minProperties=1,
)
BASELINE_REVISE = obj(
    {"patch": merge_patch_of(BASELINE_BODY)},
    {"expected_revision": REVISION, "reconciles": string_set(ids.CHANGE_ID, 50)},
)
BASELINE_ACCEPT = obj(
    {"approved_by": TITLE, "approval_note": NOTE},
    {"expected_revision": REVISION, "known_red": obj({"rationale": NOTE})},
)

# --- change_contract --------------------------------------------------------------------

CHANGE_KIND: Schema = {"type": "string", "enum": ["quick", "standard", "major", "incident"]}
RESEARCH_DISPOSITION: Schema = {"type": "string", "enum": ["none", "bounded", "required"]}
CONTRACT = obj(
    optional={
        "outcome": text(4000, min_length=0),
        "acceptance": array(
            obj({"id": text(64), "criterion": text(2000)}, {"verification": text(2000)}), 100
        ),
        "non_goals": array(text(1000), 100),
        "public_seams": array(text(1000), 100),
        "recovery": obj(optional={"strategy": text(2000), "verification": text(2000)}),
    }
)
CLASSIFICATION = obj(optional={"rationale": text(4000), "risk_flags": string_set(text(64), 50)})
DIAGNOSIS_SECTION = text(16384, min_length=0)
DIAGNOSIS = obj(
    optional={
        "reproduction": DIAGNOSIS_SECTION,
        "hypotheses": DIAGNOSIS_SECTION,
        "root_cause": DIAGNOSIS_SECTION,
        "regression_test": DIAGNOSIS_SECTION,
        "recovery": DIAGNOSIS_SECTION,
    }
)
CHANGE_BODY = obj(
    {"kind": CHANGE_KIND, "title": TITLE},
    {
        "contract": CONTRACT,
        "classification": CLASSIFICATION,
        "research_disposition": RESEARCH_DISPOSITION,
        "debug_session_id": ids.DEBUG_SESSION_ID,
    },
)

CHANGE_OPEN = obj(
    {"kind": CHANGE_KIND, "title": TITLE, "intent": MARKDOWN},
    {
        "id": ids.CHANGE_ID,
        "contract": {**CONTRACT, "default": {}},
        "classification": {**CLASSIFICATION, "default": {}},
        "research_disposition": RESEARCH_DISPOSITION,
        "diagnosis": DIAGNOSIS,
        "debug_session_id": ids.DEBUG_SESSION_ID,
    },
)
CHANGE_REVISE = obj(
    {"id": ids.CHANGE_ID, "patch": merge_patch_of(CHANGE_BODY)},
    {
        "expected_revision": REVISION,
        "status": {"type": "string", "enum": ["active", "blocked", "ready"]},
        "intent": MARKDOWN,
        "diagnosis": DIAGNOSIS,
    },
)
CHANGE_CANCEL = obj({"id": ids.CHANGE_ID, "reason": NOTE})

# --- decision ---------------------------------------------------------------------------

# Length caps with their own code (DECISION_TOO_LARGE) are applied by the action.
_FREE_TEXT: Schema = {"type": "string", "minLength": 1}
PROVENANCE = obj(
    {"source": {"type": "string", "enum": ["owner", "delegated", "agent"]}},
    {"evidence_refs": array(text(1000), 50, default=[])},
)
DECISION_ACCEPT = obj(
    {
        "scope": SCOPE,
        "question": _FREE_TEXT,
        "recommendation": _FREE_TEXT,
        "selection": obj({"choice": text(1000), "rationale": text(4000)}),
        "owner": TITLE,
    },
    {
        "id": ids.DECISION_ID,
        "effects": array(_FREE_TEXT, 50, default=[]),
        "non_goals": array(_FREE_TEXT, 50, default=[]),
        "provenance": {**PROVENANCE, "default": {"source": "agent", "evidence_refs": []}},
        "applied_refs": array(text(1000), 50, default=[]),
        "supersedes": ids.DECISION_ID,
    },
)
DECISION_DEFER = obj(
    {
        "scope": SCOPE,
        "question": _FREE_TEXT,
        "recommendation": _FREE_TEXT,
        "owner": TITLE,
        "consequence": text(4000),
    },
    {
        "id": ids.DECISION_ID,
        "provenance": {**PROVENANCE, "default": {"source": "agent", "evidence_refs": []}},
    },
)

# --- task_contract ----------------------------------------------------------------------

VERIFICATION = obj(
    {"argv": array(text(4096), 256, minItems=1)},
    {"cwd": PATH, "timeout_s": {"type": "integer", "minimum": 1, "maximum": 86400}},
)
TASK_BODY = obj(
    {"title": TITLE, "verification": VERIFICATION},
    {
        "description": text(8000, min_length=0),
        "deps": string_set(ids.TASK_ID, 1000),
        "files_modified": string_set(PATH, 500),
        "acceptance": array(obj({"id": text(64), "criterion": text(2000)}), 100),
        "type": text(40),
        "priority": text(32),
    },
)
TASK_DEFINE = obj(
    {"id": ids.TASK_ID, "title": TITLE, "verification": VERIFICATION},
    {
        "change_id": ids.CHANGE_ID,
        "parent_id": ids.TASK_ID,
        "description": TASK_BODY["properties"]["description"],
        "deps": {**TASK_BODY["properties"]["deps"], "default": []},
        "files_modified": {**TASK_BODY["properties"]["files_modified"], "default": []},
        "acceptance": {**TASK_BODY["properties"]["acceptance"], "default": []},
        "type": TASK_BODY["properties"]["type"],
        "priority": TASK_BODY["properties"]["priority"],
    },
)
TASK_REVISE = obj(
    {"id": ids.TASK_ID, "patch": merge_patch_of(TASK_BODY)},
    {"expected_revision": REVISION},
)
TASK_REMOVE = obj({"id": ids.TASK_ID, "reason": NOTE})

# --- task_outcome (checked so a typo is still a typo; the actions need sessions) ---------

TASK_OUTCOME_ACTIONS = ("start", "complete", "block", "reopen")

# --- artifact and event -----------------------------------------------------------------

ARTIFACT_KINDS = (
    "research",
    "delta",
    "context",
    "test_report",
    "review_report",
    "documentation",
    "delivery_note",
    "spec",
    "evidence",
)
ARTIFACT_BIND = obj(
    {
        "kind": {"type": "string", "enum": list(ARTIFACT_KINDS)},
        "scope": ARTIFACT_SCOPE,
        "path": PATH,
    },
    {
        "content": {"type": "string"},
        "source": PATH,
        "digest": ids.DIGEST,
        "role": text(64),
    },
    **{"x-exclusive": [["content", "source"]]},
)
EVENT_APPEND = obj(
    {
        "type": {"type": "string", "pattern": r"^[a-z][a-z0-9_]{0,63}$"},
        "payload": {"type": "object"},
    },
    {"subject": text(200)},
)

DATA_SCHEMAS: dict[tuple[str, str], Schema] = {
    ("baseline", "initialize"): BASELINE_INITIALIZE,
    ("baseline", "start"): BASELINE_START,
    ("baseline", "observe"): BASELINE_OBSERVE,
    ("baseline", "revise"): BASELINE_REVISE,
    ("baseline", "accept"): BASELINE_ACCEPT,
    ("change_contract", "open"): CHANGE_OPEN,
    ("change_contract", "revise"): CHANGE_REVISE,
    ("change_contract", "cancel"): CHANGE_CANCEL,
    ("decision", "accept"): DECISION_ACCEPT,
    ("decision", "defer"): DECISION_DEFER,
    ("task_contract", "define"): TASK_DEFINE,
    ("task_contract", "revise"): TASK_REVISE,
    ("task_contract", "remove"): TASK_REMOVE,
    ("artifact", "bind"): ARTIFACT_BIND,
    ("event", "append"): EVENT_APPEND,
}

KINDS = (
    "baseline",
    "change_contract",
    "decision",
    "task_contract",
    "task_outcome",
    "artifact",
    "event",
)


def actions_of(kind: str) -> tuple[str, ...]:
    """The actions ``record`` knows for ``kind`` (``task_outcome``'s included)."""
    if kind == "task_outcome":
        return TASK_OUTCOME_ACTIONS
    return tuple(action for known, action in DATA_SCHEMAS if known == kind)
