"""Strict input for the ``ultragoal`` operations, the same for MCP and the CLI.

Arguments arrive as ``{operation, session?, …}`` with the CLI's flag names spelled with
``_`` and lists as JSON arrays. Each operation declares its fields; an unknown field, a
wrong type or a missing required field is ``INVALID_INPUT`` with a JSON pointer, before
anything is read. Blank text is not refused here where the reference gives it a code of
its own (``STEERING_REASON_REQUIRED``, ``BLOCKED_REASON_REQUIRED``, …): the operation
raises that code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import invalid_field
from ithaca.ultragoal.authority import HOOK_OPERATIONS, USER_OPERATIONS

Checker = Callable[[Any, str], Any]
TEXT_LIMIT = 20_000
JSON_LIMIT_BYTES = 1024 * 1024
MAX_BUDGET = 100_000


def _text(value: Any, pointer: str) -> str:
    if not isinstance(value, str):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a string")
    if len(value) > TEXT_LIMIT:
        raise invalid_field(pointer, "TOO_LONG", f"{pointer[1:]} is over {TEXT_LIMIT} characters")
    return value


def _count(value: Any, pointer: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a whole number")
    if not 1 <= value <= MAX_BUDGET:
        raise invalid_field(pointer, "OUT_OF_RANGE", f"{pointer[1:]} must be 1 to {MAX_BUDGET}")
    return value


def _texts(value: Any, pointer: str) -> list[str]:
    if not isinstance(value, list):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be a list of strings")
    return [_text(item, f"{pointer}/{index}") for index, item in enumerate(value)]


def _flag(value: Any, pointer: str) -> bool:
    if not isinstance(value, bool):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be true or false")
    return value


def _json(value: Any, pointer: str) -> Any:
    size = len(canon.canonical(value))
    if size > JSON_LIMIT_BYTES:
        raise invalid_field(pointer, "TOO_LARGE", f"{pointer[1:]} is {size} bytes as JSON")
    return value


def _snapshot(value: Any, pointer: str) -> Any:
    if not isinstance(value, dict | str):
        raise invalid_field(pointer, "WRONG_TYPE", f"{pointer[1:]} must be an object or a string")
    return _json(value, pointer)


REQUIRED, OPTIONAL = True, False
_STEERING = {"evidence": (_text, OPTIONAL), "rationale": (_text, OPTIONAL)}

# operation -> field -> (checker, required)
OPERATIONS: dict[str, dict[str, tuple[Checker, bool]]] = {
    "get": {},
    "status": {},
    "get_review_result": {},
    "serialize_review_context": {},
    "serialize_requirements": {},
    "list_others": {},
    "set": {
        "phase": (_text, REQUIRED),
        "outcome": (_text, OPTIONAL),
        "verification_surface": (_text, OPTIONAL),
        "constraints": (_text, OPTIONAL),
        "boundaries": (_text, OPTIONAL),
        "non_goals": (_text, OPTIONAL),
        "max_iterations": (_count, OPTIONAL),
        "blocked_stop": (_text, OPTIONAL),
        "plan_path": (_text, OPTIONAL),
        "resume_summary": (_text, OPTIONAL),
        "completion_evidence": (_texts, OPTIONAL),
        "codex_goal_objective": (_text, OPTIONAL),
        "max_wall_minutes": (_count, OPTIONAL),
    },
    "set_stories": {"stories": (_json, OPTIONAL), "single": (_flag, OPTIONAL)},
    "reorder_stories": {"order": (_texts, REQUIRED)},
    "confirm_story": {"id": (_text, REQUIRED)},
    "confirm_all_stories": {},
    "add_story": {"story": (_json, REQUIRED), **_STEERING},
    "revise_story": {"id": (_text, REQUIRED), "patch": (_json, REQUIRED), **_STEERING},
    "retire_story": {"id": (_text, REQUIRED), **_STEERING},
    "split_story": {"id": (_text, REQUIRED), "replacements": (_json, REQUIRED), **_STEERING},
    "run_story_validator": {"id": (_text, REQUIRED), "observed": (_json, OPTIONAL)},
    "record_story_verdict": {
        "id": (_text, REQUIRED),
        "verdict": (_text, REQUIRED),
        "evidence_refs": (_texts, OPTIONAL),
        "verifier": (_text, REQUIRED),
    },
    "record_comment_resolution": {
        "artifact_sha256": (_text, REQUIRED),
        "evidence": (_texts, REQUIRED),
    },
    "set_verdict": {"verdict": (_text, REQUIRED)},
    "request_complete": {"codex_goal_json": (_snapshot, OPTIONAL)},
    "set_blocked": {"reason": (_text, OPTIONAL)},
    "adopt": {"src": (_text, REQUIRED)},
    "review_ticket": {},
    "submit_review": {"nonce": (_text, OPTIONAL), "artifact": (_json, REQUIRED)},
    "claim_review_dispatch": {},
    "approve_review_dispatch_renewal": {},
    "dismiss_review_finding": {
        "ref": (_text, REQUIRED),
        "class": (_text, REQUIRED),
        "rationale": (_text, REQUIRED),
    },
    "resume_pursuit": {
        "max_iterations": (_count, OPTIONAL),
        "max_wall_minutes": (_count, OPTIONAL),
    },
    "set_budget_limited": {},
}
AGENT_OPERATIONS = tuple(
    name for name in OPERATIONS if name not in USER_OPERATIONS | HOOK_OPERATIONS
)
DEFAULTS: dict[str, dict[str, Any]] = {"record_story_verdict": {"evidence_refs": []}}


def parse(arguments: Any) -> tuple[str, str | None, dict[str, Any]]:
    """``(operation, session, fields)`` from raw arguments, or ``INVALID_INPUT``."""
    if not isinstance(arguments, dict):
        raise invalid_field("", "WRONG_TYPE", "the arguments must be a JSON object")
    operation = arguments.get("operation")
    if operation not in OPERATIONS:
        raise invalid_field(
            "/operation", "NOT_ALLOWED", f"operation must be one of {', '.join(OPERATIONS)}"
        )
    session = arguments.get("session")
    if session is not None and not isinstance(session, str):
        raise invalid_field("/session", "WRONG_TYPE", "session must be a string")
    spec = OPERATIONS[operation]
    fields: dict[str, Any] = dict(DEFAULTS.get(operation, {}))
    for name, value in arguments.items():
        if name in ("operation", "session"):
            continue
        pointer = "/" + name.replace("~", "~0").replace("/", "~1")
        if name not in spec:
            raise invalid_field(pointer, "UNKNOWN_FIELD", f"{operation} takes no field {name!r}")
        fields[name] = spec[name][0](value, pointer)
    for name, (_, required) in spec.items():
        if required and name not in fields:
            raise invalid_field(f"/{name}", "REQUIRED", f"{operation} needs {name}")
    return operation, session, fields
