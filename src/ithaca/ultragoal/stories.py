"""Story input: exactly the story keys, well-formed ids, never a confirmation
(docs/ultragoal.md, "Operations").

Stories are the unit the user approves, so what an agent sends is checked strictly
before it is stored: unknown keys, a bad id, blank acceptance criteria or a blank surface
are ``STORY_INVALID``. Provenance keys (steering evidence and rationale, split links) are
set by the operation that made the story, so any supplied value is stripped; a story may
arrive ``unconfirmed`` but never ``confirmed`` (``STORY_CONFIRMED_BY_MUTATION``): a
created or changed story always waits for approval again. Ids are restricted (the
original allowed any string) so that ``--order`` lists and finding references are
unambiguous.
"""

from __future__ import annotations

from ithaca.kernel.errors import InvalidInput, Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

STORY_KEYS = frozenset(
    {
        "id",
        "story",
        "acceptance_criteria",
        "verification_surface",
        "status",
        "steering_evidence",
        "steering_rationale",
        "split_from",
        "split_into",
        "validator",
    }
)
PROVENANCE_KEYS = frozenset({"steering_evidence", "steering_rationale", "split_from", "split_into"})
# A validator as ``get`` shows it carries its snapshot digest and language; both are
# recomputed at ingestion, so a copied story is accepted and they are ignored.
VALIDATOR_KEYS = frozenset({"notebookId", "cellId"})
VALIDATOR_SHOWN_KEYS = frozenset({"snapshot_sha256", "language"})
TEXT_LIMIT = 4000
CRITERIA_LIMIT = 50
MAX_STORIES = 200
_ID_FIRST = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
_ID_REST = _ID_FIRST | frozenset("._-")


def is_story_id(value: object) -> bool:
    """``^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$``."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 64
        and value[0] in _ID_FIRST
        and all(char in _ID_REST for char in value[1:])
    )


def parse_story(value: Any, pointer: str) -> dict[str, Any]:
    """A new story: ``{id, story, acceptance_criteria, verification_surface, validator}``
    with ``validator`` a ``{notebookId, cellId}`` reference or None."""
    fields = _fields(value, pointer)
    for key in ("id", "story", "acceptance_criteria", "verification_surface"):
        if key not in fields:
            raise invalid_story(f"{pointer}/{key}", "REQUIRED", f"a story needs {key}")
    return {
        "id": fields["id"],
        "story": fields["story"],
        "acceptance_criteria": fields["acceptance_criteria"],
        "verification_surface": fields["verification_surface"],
        "validator": fields.get("validator"),
    }


def parse_patch(value: Any, pointer: str) -> dict[str, Any]:
    """The keys a revision changes (``validator: null`` unbinds the validator)."""
    fields = _fields(value, pointer)
    fields.pop("status", None)
    if not fields:
        raise invalid_story(pointer, "EMPTY", "the patch changes nothing")
    return fields


def parse_list(value: Any, pointer: str, *, minimum: int = 1) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise invalid_story(pointer, "WRONG_TYPE", "stories must be a JSON array")
    if len(value) > MAX_STORIES:
        raise invalid_story(pointer, "TOO_MANY", f"at most {MAX_STORIES} stories")
    parsed = [parse_story(item, f"{pointer}/{index}") for index, item in enumerate(value)]
    seen: set[str] = set()
    for story in parsed:
        if story["id"] in seen:
            raise duplicate(story["id"])
        seen.add(story["id"])
    return parsed


def duplicate(story_id: str) -> Refused:
    return Refused("STORY_ID_DUPLICATE", f"story id {story_id!r} is already used", {"id": story_id})


def invalid_story(pointer: str, problem: str, message: str) -> InvalidInput:
    return InvalidInput(
        "STORY_INVALID", f"{pointer or '/'}: {message}", {"pointer": pointer, "problem": problem}
    )


def _fields(value: Any, pointer: str) -> dict[str, Any]:
    """The checked non-provenance keys of a story object."""
    if not isinstance(value, dict):
        raise invalid_story(pointer, "WRONG_TYPE", "a story must be a JSON object")
    fields: dict[str, Any] = {}
    for key, item in value.items():
        at = f"{pointer}/{key}"
        if key not in STORY_KEYS:
            raise invalid_story(at, "UNKNOWN_FIELD", f"{key!r} is not a story key")
        if key in PROVENANCE_KEYS:
            continue
        if key == "id":
            if not is_story_id(item):
                raise invalid_story(
                    at, "BAD_ID", "an id is a letter or digit, then up to 63 of [A-Za-z0-9._-]"
                )
            fields[key] = item
        elif key in ("story", "verification_surface"):
            fields[key] = _text(item, at)
        elif key == "acceptance_criteria":
            fields[key] = _criteria(item, at)
        elif key == "status":
            if item == "confirmed":
                raise Refused(
                    "STORY_CONFIRMED_BY_MUTATION",
                    "a created or changed story is unconfirmed until the user approves it",
                    {"pointer": at},
                )
            if item != "unconfirmed":
                raise invalid_story(at, "NOT_ALLOWED", "status may only be unconfirmed here")
            fields[key] = item
        else:
            fields[key] = None if item is None else _validator(item, at)
    return fields


def _text(value: Any, pointer: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise invalid_story(pointer, "EMPTY", "must be a non-blank string")
    if len(value) > TEXT_LIMIT:
        raise invalid_story(pointer, "TOO_LONG", f"longer than {TEXT_LIMIT} characters")
    return value


def _criteria(value: Any, pointer: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise invalid_story(pointer, "EMPTY", "needs at least one acceptance criterion")
    if len(value) > CRITERIA_LIMIT:
        raise invalid_story(pointer, "TOO_MANY", f"at most {CRITERIA_LIMIT} criteria")
    return [_text(item, f"{pointer}/{index}") for index, item in enumerate(value)]


def _validator(value: Any, pointer: str) -> dict[str, str]:
    if not isinstance(value, dict) or not set(value) >= VALIDATOR_KEYS:
        raise invalid_story(pointer, "WRONG_TYPE", "a validator is {notebookId, cellId}")
    extra = set(value) - VALIDATOR_KEYS - VALIDATOR_SHOWN_KEYS
    if extra:
        raise invalid_story(f"{pointer}/{sorted(extra)[0]}", "UNKNOWN_FIELD", "not a validator key")
    reference = {}
    for key in sorted(VALIDATOR_KEYS):
        item = value[key]
        if not isinstance(item, str) or not item.strip() or len(item) > 200:
            raise invalid_story(f"{pointer}/{key}", "EMPTY", "must be a non-blank id")
        reference[key] = item
    return reference
