"""Protocol fixtures: cases of events and tool calls, run in memory against the store.

A fixture says which protocols an event must (or must not) match, in what order, and
what the hook would decide on given tool calls. Cases run against the current store,
through the same compiled index, call classifier and constraint evaluation as the
PreToolUse hook, with the kernel guard's denials (read without a store, so without write
allowances), so a passing fixture says what the hook would decide on the protocols' side
(strict-mode load checks are not part of a fixture). Nothing is written to the store or
the journal. A malformed fixtures document is ``INVALID_FIXTURES`` with a pointer to the
offending field.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

from ithaca.kernel import guard, states
from ithaca.kernel.errors import InvalidInput
from ithaca.kernel.gates import GateContext
from ithaca.protocols import bundle, constraints, enforcement, events, matcher, validate

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService

HOSTS = ("claude", "codex", "opencode")
EXPECTATIONS = ("allow", "ask", "deny")  # from the mildest vote to the strictest


def parse_fixtures(text: str) -> Any:
    """The JSON of a fixtures file; ``INVALID_FIXTURES`` when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _bad_fixture("", "INVALID_JSON", f"not JSON: {exc}") from exc


def run_fixtures(service: ProtocolsService, fixtures: Any) -> dict[str, Any]:
    """Run fixture cases in memory against the current store."""
    cases = _check_fixtures(fixtures, service)
    compiled = service.bundles.compiled(service.store.connection(), service.workflows)
    results = [_run_case(case, compiled, service) for case in cases]
    failed = sum(1 for result in results if not result["passed"])
    return {"passed": failed == 0, "total": len(results), "failed": failed, "cases": results}


def _run_case(
    case: dict[str, Any], compiled: bundle.Compiled, service: ProtocolsService
) -> dict[str, Any]:
    protocols, _ = compiled.index.match(matcher.selector_values(case["event"]))
    matched = [protocol["id"] for protocol in protocols]
    failures = [f"expected {pid} to match" for pid in case["mustMatch"] if pid not in matched]
    failures += [f"expected {pid} not to match" for pid in case["mustNotMatch"] if pid in matched]
    order = case.get("order")
    if order is not None:
        seen = [pid for pid in matched if pid in order]
        if seen != order:
            failures.append(f"expected the order {order}, got {seen}")
    actions = []
    for action in case["actions"]:
        outcome = _run_action(action, protocols, service)
        if not outcome["passed"]:
            failures.append(
                f"{outcome['tool']}: expected {outcome['expect']}, got {outcome['effect']}"
            )
        actions.append(outcome)
    return {
        "name": case["name"],
        "passed": not failures,
        "matched": matched,
        "failures": failures,
        "actions": actions,
    }


def _run_action(
    action: dict[str, Any], protocols: list[dict[str, Any]], service: ProtocolsService
) -> dict[str, Any]:
    from ithaca.kernel.classify import classify_call

    settings = service.config["protocols"]
    call = classify_call(
        action["host"],
        action["tool"],
        action["input"],
        action["cwd"],
        project_root=service.project.root,
        read_only_tools=tuple(settings["read_only_tools"]),
        server_name=settings["mcp_server_name"],
    )
    fired: list[constraints.Fired] = []
    guarded = guard.decide(call, _guard_context(service, action["host"]))
    if call.tool_class != "ithaca":
        items = [
            (protocol["id"], index, constraint)
            for protocol in protocols
            for index, constraint in enumerate(protocol["constraints"])
        ]
        given = action["states"]
        fired = constraints.evaluate(
            items, call, state=lambda name: given.get(name, False), approved=action["approved"]
        )
    votes = [
        enforcement.constraint_vote(item.effect, approved=action["approved"], host=action["host"])[
            1
        ]
        for item in fired
    ]
    guard_votes = ["deny"] if guarded.effect == "deny" else []
    effect = max([*votes, *guard_votes], key=EXPECTATIONS.index, default="allow")
    return {
        "tool": action["tool"],
        "host": action["host"],
        "expect": action["expect"],
        "effect": effect,
        "passed": effect == action["expect"],
        "guard": guarded.code,
        "fired": [
            {
                "protocolId": item.protocol_id,
                "index": item.index,
                "kind": item.kind,
                "effect": vote,
                "reasonCode": item.reason_code,
                "reason": item.reason,
            }
            for item, vote in zip(fired, votes, strict=True)
        ],
    }


def _guard_context(service: ProtocolsService, host: str) -> GateContext:
    """What the kernel guard reads, for a fixture call (no store: no write allowances)."""
    return GateContext(
        host=host,
        event="PreToolUse",
        payload={},
        project=service.project,
        config=service.config,
        conn=None,
        session_id=None,
    )


def _check_fixtures(fixtures: Any, service: ProtocolsService) -> list[dict[str, Any]]:
    """The cases of a fixtures document with every default filled in."""
    top = _object(fixtures, "", {"version", "cases"}, required=("version", "cases"))
    if top["version"] != 1 or isinstance(top["version"], bool):
        raise _bad_fixture("/version", "UNSUPPORTED_VERSION", "version must be 1")
    if not isinstance(top["cases"], list):
        raise _bad_fixture("/cases", "WRONG_TYPE", "cases must be a list")
    return [
        _check_case(case, f"/cases/{index}", service) for index, case in enumerate(top["cases"])
    ]


def _check_case(raw: Any, pointer: str, service: ProtocolsService) -> dict[str, Any]:
    fields = {"name", "event", "mustMatch", "mustNotMatch", "order", "actions"}
    case = _object(raw, pointer, fields, required=("name",))
    if not isinstance(case["name"], str) or not case["name"].strip():
        raise _bad_fixture(f"{pointer}/name", "WRONG_TYPE", "name must be a non-empty string")
    checked: dict[str, Any] = {
        "name": case["name"],
        "event": _check_event(case.get("event", {}), f"{pointer}/event", service),
        "mustMatch": _strings(case.get("mustMatch", []), f"{pointer}/mustMatch"),
        "mustNotMatch": _strings(case.get("mustNotMatch", []), f"{pointer}/mustNotMatch"),
        "actions": [],
    }
    if "order" in case:
        checked["order"] = _strings(case["order"], f"{pointer}/order")
    actions = case.get("actions", [])
    if not isinstance(actions, list):
        raise _bad_fixture(f"{pointer}/actions", "WRONG_TYPE", "actions must be a list")
    checked["actions"] = [
        _check_action(action, f"{pointer}/actions/{index}", service)
        for index, action in enumerate(actions)
    ]
    return checked


def _check_event(raw: Any, pointer: str, service: ProtocolsService) -> dict[str, Any]:
    """A fixture event; omitted fields default as a hook admission would set them."""
    event = _object(raw, pointer, {"connector", "kind", "actor", "context"})
    settings = service.config["protocols"]
    connector = event.get("connector", "claude-code")
    if connector not in validate.CONNECTORS:
        raise _bad_fixture(
            f"{pointer}/connector", "NOT_IN_ENUM", f"unknown connector {connector!r}"
        )
    kind = event.get("kind", "chat.message")
    if kind not in validate.MESSAGE_KINDS:
        raise _bad_fixture(f"{pointer}/kind", "NOT_IN_ENUM", f"unknown kind {kind!r}")
    actor = _object(event.get("actor", {}), f"{pointer}/actor", {"id", "kind"})
    actor_id = actor.get("id", events.actor_id(service.config))
    _value(actor_id, f"{pointer}/actor/id", nullable=False)
    actor_kind = actor.get("kind", "user")
    if actor_kind not in ("user", "system", "test"):
        raise _bad_fixture(
            f"{pointer}/actor/kind", "NOT_IN_ENUM", "actor kind is user, system or test"
        )
    context = _object(
        event.get("context", {}),
        f"{pointer}/context",
        {"clientId", "projectId", "workflow", "task"},
    )
    defaults = {
        "clientId": settings["client_id"],
        "projectId": settings["project_id"],
        "workflow": settings["default_workflow"] or "coding",
        "task": settings["default_task"],
    }
    resolved = {}
    for key, default in defaults.items():
        resolved[key] = context.get(key, default)
        _value(resolved[key], f"{pointer}/context/{key}", nullable=key != "workflow")
    if resolved["workflow"] not in service.workflows:
        raise _bad_fixture(
            f"{pointer}/context/workflow",
            "UNKNOWN_WORKFLOW",
            f"unknown workflow {resolved['workflow']!r}",
        )
    return {
        "connector": connector,
        "kind": kind,
        "actor": {"id": actor_id, "kind": actor_kind},
        "context": resolved,
    }


def _check_action(raw: Any, pointer: str, service: ProtocolsService) -> dict[str, Any]:
    fields = {"tool", "input", "cwd", "states", "approved", "host", "expect"}
    action = _object(raw, pointer, fields, required=("tool", "expect"))
    if not isinstance(action["tool"], str) or not action["tool"]:
        raise _bad_fixture(f"{pointer}/tool", "WRONG_TYPE", "tool must be a non-empty string")
    tool_input = action.get("input", {})
    if not isinstance(tool_input, dict):
        raise _bad_fixture(f"{pointer}/input", "WRONG_TYPE", "input must be an object")
    cwd = action.get("cwd", ".")
    if not isinstance(cwd, str) or not cwd:
        raise _bad_fixture(f"{pointer}/cwd", "WRONG_TYPE", "cwd must be a non-empty string")
    given_states = action.get("states", {})
    if not isinstance(given_states, dict):
        raise _bad_fixture(f"{pointer}/states", "WRONG_TYPE", "states must be an object")
    for name, value in given_states.items():
        if name not in states.KNOWN_STATES:
            raise _bad_fixture(
                f"{pointer}/states/{name}", "UNKNOWN_STATE", f"unknown state {name!r}"
            )
        if not isinstance(value, bool):
            raise _bad_fixture(f"{pointer}/states/{name}", "WRONG_TYPE", "a state is true or false")
    approved = action.get("approved", False)
    if not isinstance(approved, bool):
        raise _bad_fixture(f"{pointer}/approved", "WRONG_TYPE", "approved must be a boolean")
    host = action.get("host", "claude")
    if host not in HOSTS:
        raise _bad_fixture(f"{pointer}/host", "NOT_IN_ENUM", f"host is one of {', '.join(HOSTS)}")
    if action["expect"] not in EXPECTATIONS:
        raise _bad_fixture(f"{pointer}/expect", "NOT_IN_ENUM", "expect is allow, ask or deny")
    return {
        "tool": action["tool"],
        "input": tool_input,
        "cwd": os.path.join(service.project.root, cwd),
        "states": given_states,
        "approved": approved,
        "host": host,
        "expect": action["expect"],
    }


def _object(
    raw: Any, pointer: str, fields: set[str], *, required: tuple[str, ...] = ()
) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise _bad_fixture(pointer, "WRONG_TYPE", f"{pointer or 'the document'} must be an object")
    for key in raw:
        if key not in fields:
            raise _bad_fixture(f"{pointer}/{key}", "UNKNOWN_FIELD", f"unknown field {key!r}")
    for key in required:
        if key not in raw:
            raise _bad_fixture(f"{pointer}/{key}", "MISSING", f"{key} is required")
    return raw


def _strings(raw: Any, pointer: str) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise _bad_fixture(pointer, "WRONG_TYPE", "must be a list of protocol ids")
    return raw


def _value(raw: Any, pointer: str, *, nullable: bool) -> None:
    if raw is None and nullable:
        return
    if not isinstance(raw, str) or not raw or len(raw) > 128 or not raw.isprintable():
        raise _bad_fixture(pointer, "WRONG_TYPE", "must be a non-empty printable string")


def _bad_fixture(pointer: str, problem: str, message: str) -> InvalidInput:
    return InvalidInput(
        "INVALID_FIXTURES", f"{pointer or '/'}: {message}", {"pointer": pointer, "problem": problem}
    )
