"""What ``record`` takes, for a person writing an entry: each kind's actions with their
fields, read from the very schemas the entries are checked against, and one valid
example of each entry's data.

``ithaca record --help`` lists the fields and ``ithaca record --example KIND ACTION``
prints the example; tests/delivery/records/test_catalogue.py runs every example through
a real project, so an example that stops being valid fails there, not at a user.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.schemas.dialect import Schema
from ithaca.delivery.schemas.record import DATA_SCHEMAS, KINDS, actions_of
from ithaca.delivery.sessions.outcome import DATA_SCHEMAS as OUTCOME_SCHEMAS
from ithaca.kernel.errors import InvalidInput

SCHEMAS: dict[tuple[str, str], Schema] = {**DATA_SCHEMAS, **OUTCOME_SCHEMAS}

_SCOPE_OF_CHANGE = {"change_id": "add-login"}
EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("baseline", "initialize"): {"project_name": "shop", "mode": "brownfield"},
    ("baseline", "start"): {},
    ("baseline", "observe"): {
        "specs": [{"path": "docs/spec.md"}],
        "gaps": [{"id": "G1", "category": "tests", "blocking": False, "note": "no e2e tests"}],
    },
    ("baseline", "revise"): {"patch": {"unknowns": ["who owns billing"]}},
    ("baseline", "accept"): {"approved_by": "maria", "approval_note": "matches the repo"},
    ("change_contract", "open"): {
        "id": "add-login",
        "kind": "standard",
        "title": "Add a login page",
        "intent": "Users sign in with their email and a password.\n",
        "contract": {
            "outcome": "A user with an account can sign in and out.",
            "acceptance": [{"id": "A1", "criterion": "a wrong password is refused"}],
        },
    },
    ("change_contract", "revise"): {"id": "add-login", "patch": {"title": "Add sign-in"}},
    ("change_contract", "cancel"): {"id": "add-login", "reason": "folded into add-accounts"},
    ("decision", "accept"): {
        "scope": _SCOPE_OF_CHANGE,
        "question": "Where are sessions kept?",
        "recommendation": "A signed cookie",
        "selection": {"choice": "signed cookie", "rationale": "no server-side store needed"},
        "owner": "maria",
    },
    ("decision", "defer"): {
        "scope": {"baseline": True},
        "question": "Do we need single sign-on?",
        "recommendation": "Not before the first customer asks",
        "owner": "maria",
        "consequence": "accounts are local to this app for now",
    },
    ("task_contract", "define"): {
        "id": "T-1",
        "change_id": "add-login",
        "title": "Login form and handler",
        "verification": {"argv": ["pytest", "-q", "tests/test_login.py"]},
        "files_modified": ["src/app/login.py", "tests/test_login.py"],
        "acceptance": [{"id": "A1", "criterion": "a wrong password is refused"}],
    },
    ("task_contract", "revise"): {"id": "T-1", "patch": {"priority": "high"}},
    ("task_contract", "remove"): {"id": "T-1", "reason": "split into T-2 and T-3"},
    ("task_outcome", "start"): {"task_id": "T-1"},
    ("task_outcome", "complete"): {
        "task_id": "T-1",
        "session_id": "ses_01JD0000000000000000000000",
        "packet_digest": "0" * 64,
    },
    ("task_outcome", "block"): {"task_id": "T-1", "reason": "the staging database is down"},
    ("task_outcome", "reopen"): {"task_id": "T-1", "reason": "the form forgets the email"},
    ("artifact", "bind"): {
        "kind": "research",
        "scope": _SCOPE_OF_CHANGE,
        "path": "research/session-storage.md",
        "content": "# Session storage\n\nSigned cookies, rotated daily.\n",
    },
    ("event", "append"): {"type": "note", "payload": {"text": "paired with Ana on the form"}},
}


def example(kind: str, action: str) -> dict[str, Any]:
    """A valid ``data`` for ``kind action``; ``RECORD_UNKNOWN`` names what exists."""
    found = EXAMPLES.get((kind, action))
    if found is None:
        known = ", ".join(f"{k} {a}" for k, a in EXAMPLES)
        raise InvalidInput(
            "RECORD_UNKNOWN",
            f"there is no record {kind} {action}; the entries are: {known}",
            {"kind": kind, "action": action},
        )
    return found


def fields_text() -> str:
    """Every kind, its actions and their fields (``*`` marks a required one)."""
    lines = []
    for kind in KINDS:
        lines.append(f"{kind}:")
        for action in actions_of(kind):
            schema = SCHEMAS[(kind, action)]
            required = set(schema.get("required", ()))
            shown = [
                f"{name}{'*' if name in required else ''}={_summary(field)}"
                for name, field in schema.get("properties", {}).items()
            ]
            lines.append(f"  {action}: {' '.join(shown) or '(no fields)'}")
    return "\n".join(lines)


def _summary(schema: Schema) -> str:
    """A field's shape in a few characters: ``text``, ``a|b``, ``[text]``, ``{x*,y}``."""
    if "oneOf" in schema:
        return " or ".join(_summary(option) for option in schema["oneOf"])
    if "const" in schema:
        return str(schema["const"]).lower()
    if "enum" in schema:
        return "|".join(str(option) for option in schema["enum"])
    kind = schema.get("type")
    if kind == "array":
        items = schema.get("items")
        return f"[{_summary(items) if items else 'any'}]"
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        names = [f"{name}{'*' if name in required else ''}" for name in schema["properties"]]
        return "{" + ",".join(names) + "}"
    if kind == "object":
        return "{...}"
    if kind == "string":
        return "id" if "pattern" in schema else "text"
    if isinstance(kind, list):
        return "|".join(kind)
    return str(kind or "any")
