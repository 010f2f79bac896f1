"""The one validator for protocol records: writes, seeds, files and stored rows.

Hooks re-validate every stored row before they trust it, so this module imports only
the standard library and ``ithaca.kernel``, and checks identifiers and command patterns
with string methods rather than ``re`` or ``shlex`` (which imports it). A record that
passes comes back normalised (defaults filled in, lists copied), and its hash is taken
over that normal form, so two spellings of the same record cannot carry two hashes.

Error codes follow the reference's validation table. A top-level field of the wrong JSON
type is ``INVALID_FIELD``; a field of the right type that breaks its own rule carries
that rule's code (``PRIORITY_OUT_OF_RANGE``, ``EMPTY_RULES``, ``INVALID_SELECTOR_VALUE``,
…). ``details.problem`` names the exact violation in UPPER_SNAKE.

Constraints are checked for shape only; what they match is the enforcement code's job.
"""

from __future__ import annotations

from ithaca.kernel import canon
from ithaca.kernel.call import TOOL_CLASSES
from ithaca.kernel.errors import InvalidInput, Refused
from ithaca.protocols.constraints import TURN_KINDS
from ithaca.protocols.seeds import BUILTIN_WORKFLOWS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SELECTOR_KEYS = (
    "connector",
    "messageKind",
    "userId",
    "clientId",
    "projectId",
    "workflow",
    "task",
)
CONNECTORS = (
    "claude-code",
    "codex",
    "opencode",
    "cli",
    "web-api",
    "scheduled-job",
    "test",
    "unknown",
)
MESSAGE_KINDS = ("chat.message", "command", "workflow.event")
CONSTRAINT_KINDS = (
    "deny_tool",
    "deny_command",
    "deny_path",
    "require_state",
    "require_approval",
    "require_verification",
)
EFFECTS = ("deny", "ask")
HASHED_FIELDS = (
    "id",
    "name",
    "description",
    "scope",
    "enabled",
    "priority",
    "selector",
    "rules",
    "constraints",
    "tags",
)

RESERVED_PREFIX = "ithaca."
MAX_ID = 100
MAX_NAME = 120
MAX_DESCRIPTION = 2000
MIN_PRIORITY, MAX_PRIORITY = -1000, 1000
MAX_RULES = 50
MAX_RULE = 2000
MAX_SELECTOR_VALUE = 128
MAX_CONSTRAINTS = 32
MAX_REASON = 300
MAX_TAGS = 16

# Ithaca's own tools are exempt from every protocol check, so naming their class in a
# constraint could never fire; it is refused rather than kept as a silent no-op.
CONSTRAINABLE_CLASSES = tuple(c for c in TOOL_CLASSES if c != "ithaca")

INPUT_FIELDS = (
    "id",
    "name",
    "description",
    "enabled",
    "priority",
    "selector",
    "rules",
    "constraints",
    "tags",
)
_REQUIRED = ("id", "name", "description", "priority", "selector", "rules")
_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_LOWER_DIGITS = _LOWER | frozenset("0123456789")
_ID_WORD = _LOWER_DIGITS | {"-"}
_TAG_CHARS = _LOWER_DIGITS | frozenset("._-")
_PATTERN_FIELDS = {
    "deny_tool": ("tools", "classes"),
    "deny_command": ("commands",),
    "deny_path": ("paths",),
    "require_state": (),
    "require_approval": ("commands", "paths", "tools"),
    "require_verification": ("commands",),
}
_STATE_FIELDS = ("state", "expect", "for")


def validate_record(
    raw: object,
    *,
    workflows: frozenset[str],
    known_states: frozenset[str],
    allow_reserved: bool = False,
) -> dict[str, Any]:
    """Check a protocol record and return its normal form.

    ``workflows`` are the project's extra workflows (the built-ins are always known);
    ``known_states`` are the registered state predicate names. ``allow_reserved`` is for
    trusted callers (seeds, overrides of a base id, stored rows): it admits ``ithaca.*``
    ids and a ``scope`` field, which a caller's own write never sets.
    """
    if not isinstance(raw, dict):
        raise _invalid("INVALID_FIELD", "", "WRONG_TYPE", "a protocol record must be an object")
    accepted = INPUT_FIELDS + ("scope",) if allow_reserved else INPUT_FIELDS
    for key in raw:
        if key not in accepted:
            raise _invalid(
                "UNKNOWN_FIELD",
                f"/{_pointer_token(key)}",
                "UNKNOWN_FIELD",
                f"unknown field {key!r}",
            )
    for key in _REQUIRED:
        if key not in raw:
            raise _invalid("INVALID_FIELD", f"/{key}", "MISSING", "is required")

    record: dict[str, Any] = {
        "id": _check_id(raw["id"], allow_reserved),
        "name": _check_text(raw["name"], "/name", MAX_NAME),
        "description": _check_text(raw["description"], "/description", MAX_DESCRIPTION),
    }
    if "scope" in raw:
        if raw["scope"] not in ("base", "user"):
            raise _invalid("INVALID_FIELD", "/scope", "NOT_IN_ENUM", "must be 'base' or 'user'")
        record["scope"] = raw["scope"]
    enabled = raw.get("enabled", True)
    if not isinstance(enabled, bool):
        raise _invalid("INVALID_FIELD", "/enabled", "WRONG_TYPE", "must be a boolean")
    record["enabled"] = enabled
    record["priority"] = _check_priority(raw["priority"])
    record["selector"] = _check_selector(raw["selector"], frozenset(BUILTIN_WORKFLOWS) | workflows)
    record["rules"] = _check_rules(raw["rules"])
    record["constraints"] = _check_constraints(raw.get("constraints", []), known_states)
    record["tags"] = _check_tags(raw.get("tags", []))
    return record


def record_hash(record: dict[str, Any]) -> str:
    """The content hash of a full record (scope included, source excluded)."""
    return canon.digest({key: record[key] for key in HASHED_FIELDS})


def _invalid(code: str, pointer: str, problem: str, message: str) -> InvalidInput:
    return InvalidInput(
        code, f"{pointer or '/'}: {message}", {"pointer": pointer, "problem": problem}
    )


def _pointer_token(key: object) -> str:
    return str(key).replace("~", "~0").replace("/", "~1")


def _check_id(value: object, allow_reserved: bool) -> str:
    if not isinstance(value, str):
        raise _invalid("INVALID_FIELD", "/id", "WRONG_TYPE", "must be a string")
    if len(value) > MAX_ID:
        raise _invalid("INVALID_PROTOCOL_ID", "/id", "TOO_LONG", f"at most {MAX_ID} characters")
    if not _is_dotted_id(value):
        raise _invalid(
            "INVALID_PROTOCOL_ID",
            "/id",
            "PATTERN",
            "must be dotted lowercase words such as 'team.review-first'",
        )
    if value.startswith(RESERVED_PREFIX) and not allow_reserved:
        raise Refused(
            "RESERVED_NAMESPACE",
            f"{value}: the 'ithaca.' namespace is reserved for base protocols",
            {"pointer": "/id", "id": value},
        )
    return value


def _is_dotted_id(value: str) -> bool:
    """``[a-z][a-z0-9-]*(\\.[a-z0-9][a-z0-9-]*)+``: two or more dotted lowercase words."""
    first, *rest = value.split(".")
    return (
        bool(rest)
        and first[:1] in _LOWER
        and all(word[:1] in _LOWER_DIGITS for word in rest)
        and all(char in _ID_WORD for word in (first, *rest) for char in word)
    )


def _is_tag(value: str) -> bool:
    """``[a-z0-9][a-z0-9._-]{0,31}``."""
    return (
        0 < len(value) <= 32
        and value[0] in _LOWER_DIGITS
        and all(char in _TAG_CHARS for char in value)
    )


def _has_control_character(value: str) -> bool:
    """A C0 or C1 control character or DEL (U+0000-U+001F, U+007F-U+009F)."""
    return any(char < " " or "\x7f" <= char <= "\x9f" for char in value)


def _check_text(value: object, pointer: str, limit: int) -> str:
    if not isinstance(value, str):
        raise _invalid("INVALID_FIELD", pointer, "WRONG_TYPE", "must be a string")
    if not value.strip():
        raise _invalid("INVALID_FIELD", pointer, "EMPTY", "must not be empty")
    if len(value) > limit:
        raise _invalid("INVALID_FIELD", pointer, "TOO_LONG", f"at most {limit} characters")
    return value


def _check_priority(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid("INVALID_FIELD", "/priority", "WRONG_TYPE", "must be an integer")
    if not isinstance(value, int):
        raise _invalid("PRIORITY_OUT_OF_RANGE", "/priority", "NOT_AN_INTEGER", "must be an integer")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise _invalid(
            "PRIORITY_OUT_OF_RANGE",
            "/priority",
            "OUT_OF_RANGE",
            f"must be between {MIN_PRIORITY} and {MAX_PRIORITY}",
        )
    return value


def _check_selector(value: object, workflows: frozenset[str]) -> dict[str, str | list[str]]:
    if not isinstance(value, dict):
        raise _invalid("INVALID_FIELD", "/selector", "WRONG_TYPE", "must be an object")
    selector: dict[str, str | list[str]] = {}
    for key, expected in value.items():
        pointer = f"/selector/{_pointer_token(key)}"
        if key not in SELECTOR_KEYS:
            raise _invalid(
                "UNKNOWN_SELECTOR_KEY",
                pointer,
                "UNKNOWN_KEY",
                f"unknown selector key {key!r}; use one of {', '.join(SELECTOR_KEYS)}",
            )
        if isinstance(expected, str):
            _check_selector_string(key, expected, pointer, workflows)
            selector[key] = expected
        elif isinstance(expected, list):
            if not expected:
                raise _invalid(
                    "INVALID_SELECTOR_VALUE", pointer, "EMPTY", "an any-of list must not be empty"
                )
            seen: set[str] = set()
            for index, item in enumerate(expected):
                item_pointer = f"{pointer}/{index}"
                if not isinstance(item, str):
                    raise _invalid(
                        "INVALID_SELECTOR_VALUE", item_pointer, "WRONG_TYPE", "must be a string"
                    )
                _check_selector_string(key, item, item_pointer, workflows)
                if item in seen:
                    raise _invalid(
                        "INVALID_SELECTOR_VALUE", item_pointer, "DUPLICATE", f"{item!r} repeats"
                    )
                seen.add(item)
            selector[key] = list(expected)
        else:
            raise _invalid(
                "INVALID_SELECTOR_VALUE",
                pointer,
                "WRONG_TYPE",
                "must be a string or a list of strings",
            )
    return selector


def _check_selector_string(key: str, value: str, pointer: str, workflows: frozenset[str]) -> None:
    if not value:
        raise _invalid("INVALID_SELECTOR_VALUE", pointer, "EMPTY", "must not be empty")
    if len(value) > MAX_SELECTOR_VALUE:
        raise _invalid(
            "INVALID_SELECTOR_VALUE",
            pointer,
            "TOO_LONG",
            f"at most {MAX_SELECTOR_VALUE} characters",
        )
    if _has_control_character(value):
        raise _invalid(
            "INVALID_SELECTOR_VALUE", pointer, "CONTROL_CHARACTER", "holds a control character"
        )
    allowed: tuple[str, ...] | frozenset[str] | None = None
    if key == "connector":
        allowed = CONNECTORS
    elif key == "messageKind":
        allowed = MESSAGE_KINDS
    elif key == "workflow":
        allowed = workflows
    if allowed is not None and value not in allowed:
        raise _invalid(
            "INVALID_SELECTOR_VALUE",
            pointer,
            "UNKNOWN_WORKFLOW" if key == "workflow" else "NOT_IN_ENUM",
            f"{value!r} is not a known {key}; known: {', '.join(sorted(allowed))}",
        )


def _check_rules(value: object) -> list[str]:
    if not isinstance(value, list):
        raise _invalid("INVALID_FIELD", "/rules", "WRONG_TYPE", "must be a list of strings")
    if not value:
        raise _invalid("EMPTY_RULES", "/rules", "EMPTY", "a protocol needs at least one rule")
    if len(value) > MAX_RULES:
        raise _invalid("EMPTY_RULES", "/rules", "TOO_MANY", f"at most {MAX_RULES} rules")
    for index, rule in enumerate(value):
        pointer = f"/rules/{index}"
        if not isinstance(rule, str):
            raise _invalid("EMPTY_RULES", pointer, "WRONG_TYPE", "must be a string")
        if not rule.strip():
            raise _invalid("EMPTY_RULES", pointer, "EMPTY", "must not be empty")
        if len(rule) > MAX_RULE:
            raise _invalid("EMPTY_RULES", pointer, "TOO_LONG", f"at most {MAX_RULE} characters")
    return list(value)


def _check_tags(value: object) -> list[str]:
    if not isinstance(value, list):
        raise _invalid("INVALID_FIELD", "/tags", "WRONG_TYPE", "must be a list of strings")
    if len(value) > MAX_TAGS:
        raise _invalid("INVALID_FIELD", "/tags", "TOO_MANY", f"at most {MAX_TAGS} tags")
    for index, tag in enumerate(value):
        pointer = f"/tags/{index}"
        if not isinstance(tag, str) or not _is_tag(tag):
            raise _invalid(
                "INVALID_FIELD",
                pointer,
                "PATTERN",
                "tags are lowercase letters, digits, '.', '_' or '-', at most 32 characters",
            )
        if tag in value[:index]:
            raise _invalid("INVALID_FIELD", pointer, "DUPLICATE", f"{tag!r} repeats")
    return list(value)


def _check_constraints(value: object, known_states: frozenset[str]) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _invalid("INVALID_FIELD", "/constraints", "WRONG_TYPE", "must be a list")
    if len(value) > MAX_CONSTRAINTS:
        raise _invalid(
            "INVALID_CONSTRAINT",
            "/constraints",
            "TOO_MANY",
            f"at most {MAX_CONSTRAINTS} constraints",
        )
    return [
        _check_constraint(item, f"/constraints/{index}", known_states)
        for index, item in enumerate(value)
    ]


def _check_constraint(value: object, pointer: str, known_states: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _invalid("INVALID_CONSTRAINT", pointer, "WRONG_TYPE", "must be an object")
    if "kind" not in value:
        raise _invalid("INVALID_CONSTRAINT", f"{pointer}/kind", "MISSING", "is required")
    kind = value["kind"]
    if kind not in CONSTRAINT_KINDS:
        raise _invalid(
            "UNKNOWN_CONSTRAINT_KIND",
            f"{pointer}/kind",
            "UNKNOWN_KIND",
            f"{kind!r} is not a constraint kind; use one of {', '.join(CONSTRAINT_KINDS)}",
        )
    # A turn kind (``critic``) takes no effect, and its patterns are optional.
    takes_effect = kind not in ("require_approval", *TURN_KINDS)
    allowed = ("kind", "reason") + (("effect",) if takes_effect else ())
    allowed += _PATTERN_FIELDS[kind] + (_STATE_FIELDS if kind == "require_state" else ())
    for key in value:
        if key not in allowed:
            raise _invalid(
                "INVALID_CONSTRAINT",
                f"{pointer}/{_pointer_token(key)}",
                "UNKNOWN_FIELD",
                f"{kind} takes no field {key!r}",
            )

    constraint: dict[str, Any] = {"kind": kind}
    patterns = _PATTERN_FIELDS[kind]
    if patterns and kind not in TURN_KINDS and not any(key in value for key in patterns):
        raise _invalid(
            "INVALID_CONSTRAINT",
            pointer,
            "NO_PATTERNS",
            f"{kind} needs at least one of {', '.join(patterns)}",
        )
    for key in patterns:
        if key in value:
            constraint[key] = _check_patterns(key, value[key], f"{pointer}/{key}")
    if kind == "require_state":
        constraint.update(_check_state_fields(value, pointer, known_states))
    if takes_effect:
        effect = value.get("effect", "deny")
        if effect not in EFFECTS:
            raise _invalid(
                "INVALID_CONSTRAINT", f"{pointer}/effect", "NOT_IN_ENUM", "must be 'deny' or 'ask'"
            )
        constraint["effect"] = effect
    if "reason" in value:
        constraint["reason"] = _check_reason(value["reason"], f"{pointer}/reason")
    return constraint


def _check_patterns(key: str, value: object, pointer: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise _invalid("INVALID_CONSTRAINT", pointer, "EMPTY", "must be a non-empty list")
    for index, pattern in enumerate(value):
        item_pointer = f"{pointer}/{index}"
        if not isinstance(pattern, str) or not pattern.strip():
            raise _invalid(
                "INVALID_CONSTRAINT", item_pointer, "EMPTY", "must be a non-empty string"
            )
        if key == "classes" and pattern not in CONSTRAINABLE_CLASSES:
            raise _invalid(
                "INVALID_CONSTRAINT",
                item_pointer,
                "NOT_IN_ENUM",
                f"{pattern!r} is not a tool class; use one of {', '.join(CONSTRAINABLE_CLASSES)}",
            )
        if key == "commands":
            _check_command_pattern(pattern, item_pointer)
    return list(value)


def _check_command_pattern(pattern: str, pointer: str) -> None:
    from ithaca.kernel.shellwords import split

    try:
        tokens = split(pattern)
    except ValueError as exc:
        raise _invalid(
            "INVALID_CONSTRAINT", pointer, "UNSPLITTABLE", f"cannot be split like a shell: {exc}"
        ) from exc
    if not all(tokens):
        raise _invalid("INVALID_CONSTRAINT", pointer, "EMPTY", "holds an empty word")


def _check_state_fields(
    value: dict[str, Any], pointer: str, known_states: frozenset[str]
) -> dict[str, Any]:
    if "state" not in value:
        raise _invalid("INVALID_CONSTRAINT", f"{pointer}/state", "MISSING", "is required")
    state = value["state"]
    if not isinstance(state, str):
        raise _invalid("INVALID_CONSTRAINT", f"{pointer}/state", "WRONG_TYPE", "must be a string")
    if state not in known_states:
        raise _invalid(
            "UNKNOWN_STATE",
            f"{pointer}/state",
            "UNKNOWN_STATE",
            f"{state!r} is not a registered state; known: {', '.join(sorted(known_states))}",
        )
    expect = value.get("expect", True)
    if not isinstance(expect, bool):
        raise _invalid("INVALID_CONSTRAINT", f"{pointer}/expect", "WRONG_TYPE", "must be a boolean")
    scope = value.get("for", "mutating")
    if isinstance(scope, list):
        if not scope:
            raise _invalid(
                "INVALID_CONSTRAINT", f"{pointer}/for", "EMPTY", "a class list must not be empty"
            )
        for index, tool_class in enumerate(scope):
            if tool_class not in CONSTRAINABLE_CLASSES or tool_class in scope[:index]:
                raise _invalid(
                    "INVALID_CONSTRAINT",
                    f"{pointer}/for/{index}",
                    "NOT_IN_ENUM",
                    f"use distinct tool classes from {', '.join(CONSTRAINABLE_CLASSES)}",
                )
        scope = list(scope)
    elif scope not in ("mutating", "any"):
        raise _invalid(
            "INVALID_CONSTRAINT",
            f"{pointer}/for",
            "NOT_IN_ENUM",
            "must be 'mutating', 'any' or a list of tool classes",
        )
    return {"state": state, "expect": expect, "for": scope}


def _check_reason(value: object, pointer: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _invalid("INVALID_CONSTRAINT", pointer, "EMPTY", "must be a non-empty string")
    if len(value) > MAX_REASON:
        raise _invalid(
            "INVALID_CONSTRAINT", pointer, "TOO_LONG", f"at most {MAX_REASON} characters"
        )
    return value
