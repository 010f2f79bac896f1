"""What a ``checkpoint`` request may say: its schema, and its payload checked per stage.

The MCP tool publishes ``CHECKPOINT_SCHEMA``; ``parse`` checks a request against it and
adds what a schema cannot say: a baseline scope names nothing else, ``abandon`` takes no
payload and ``draft`` needs one, a summary and a stage's ``data`` stay within their byte
limits (``data`` checked against the stage's own schema where it has one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery.checkpoints.evidence import ROLES
from ithaca.delivery.contract import check_request_size, validation_error
from ithaca.delivery.schemas import ids
from ithaca.delivery.schemas.dialect import Schema, array, check, obj, string_set, text
from ithaca.kernel import canon

STAGES = ("research", "plan", "dev", "test", "review", "deliver")
OPERATIONS = ("draft", "accept", "abandon")
SUMMARY_BYTES = 4 * 1024
DATA_BYTES = 32 * 1024
MAX_EVIDENCE = 100

CHECKPOINT_DESCRIPTION = (
    "Declare a stage done for a scope {change_id, task_id?} or {baseline: true}: operation "
    "draft|accept|abandon, payload {summary, evidence[{artifact_id|path, digest?}]} "
    "re-hashed from disk. plan writes plan.json waves."
)
CHECKPOINT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "stage": {"type": "string", "enum": list(STAGES)},
        "scope": {
            "type": "object",
            "properties": {
                "change_id": ids.CHANGE_ID,
                "task_id": ids.TASK_ID,
                "baseline": {"const": True},
            },
            "additionalProperties": False,
            "default": {},
        },
        "operation": {"type": "string", "enum": list(OPERATIONS), "default": "accept"},
        "payload": {"type": "object"},
        "idempotency_key": ids.IDEMPOTENCY_KEY,
    },
    "required": ["stage", "idempotency_key"],
    "additionalProperties": False,
}

_EVIDENCE_EXTRA: dict[str, Schema] = {
    "digest": ids.DIGEST,
    "role": {"type": "string", "enum": list(ROLES)},
    "note": text(2000),
}
EVIDENCE_ITEM: Schema = {
    "oneOf": [
        obj({"artifact_id": text(64)}, _EVIDENCE_EXTRA),
        obj({"path": text(1024)}, _EVIDENCE_EXTRA),
    ]
}
PAYLOAD = obj(
    {"summary": text(SUMMARY_BYTES)},
    {
        "evidence": array(EVIDENCE_ITEM, MAX_EVIDENCE, default=[]),
        "decisions": string_set(ids.DECISION_ID, 100),
        "data": {"type": "object"},
    },
)
_FINDINGS = array({"type": ["string", "object"]}, 200)
_COUNT: Schema = {"type": "integer", "minimum": 0}
STAGE_DATA: dict[str, Schema] = {
    "test": obj(
        optional={
            "result": {"type": "string", "enum": ["pass", "fail", "partial"]},
            "command": text(4000),
            "counts": obj(
                optional={"passed": _COUNT, "failed": _COUNT, "skipped": _COUNT, "errors": _COUNT}
            ),
        }
    ),
    "review": obj(
        optional={
            "verdict": {"type": "string", "enum": ["approve", "changes_requested", "comment"]},
            "findings": _FINDINGS,
        }
    ),
    "research": obj(
        optional={
            "findings": _FINDINGS,
            "disposition": {"type": "string", "enum": ["none", "bounded", "required"]},
        }
    ),
}


@dataclass(frozen=True)
class Request:
    """A checked ``checkpoint`` request."""

    stage: str
    scope: dict[str, Any]
    operation: str
    payload: dict[str, Any] | None
    key: str

    def normalised(self) -> dict[str, Any]:
        """What the idempotency digest is taken over (the key left out)."""
        found: dict[str, Any] = {"stage": self.stage, "scope": self.scope}
        if self.payload is not None:
            found["payload"] = self.payload
        return found


def parse(arguments: Any) -> Request:
    """A ``checkpoint`` request, checked and normalised (payload and stage data too)."""
    if not isinstance(arguments, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object with stage")
    check_request_size(arguments)
    request = check(CHECKPOINT_SCHEMA, arguments)
    scope = request["scope"]
    if scope.get("baseline") and len(scope) > 1:
        raise validation_error(
            "/scope/baseline", "CONFLICTING_FIELDS", "the baseline scope names no change or task"
        )
    payload = request.get("payload")
    if request["operation"] == "abandon" and payload is not None:
        raise validation_error("/payload", "NOT_ALLOWED", "abandon takes no payload")
    if request["operation"] == "draft" and payload is None:
        raise validation_error("/payload", "MISSING_FIELD", "a draft needs a payload")
    if payload is not None:
        payload = _checked_payload(request["stage"], payload)
    return Request(
        request["stage"], scope, request["operation"], payload, request["idempotency_key"]
    )


def _checked_payload(stage: str, payload: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = check(PAYLOAD, payload, "/payload")
    size = len(found["summary"].encode("utf-8"))
    if size > SUMMARY_BYTES:
        raise validation_error(
            "/payload/summary", "TOO_LARGE", f"{size} bytes; at most {SUMMARY_BYTES}"
        )
    if "data" in found:
        if stage in STAGE_DATA:
            found["data"] = check(STAGE_DATA[stage], found["data"], "/payload/data")
        size = len(canon.canonical(found["data"]))
        if size > DATA_BYTES:
            raise validation_error(
                "/payload/data", "TOO_LARGE", f"{size} canonical bytes; at most {DATA_BYTES}"
            )
    return found
