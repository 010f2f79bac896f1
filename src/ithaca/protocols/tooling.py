"""Operator tooling: explain an event's bundle, test fixtures, lint the rules, report seeds.

These answer "why did this prompt get these rules?" and "do my rules do what I meant?"
and change nothing: no function here writes to the store or the journal.

``explain`` reads the rows one by one and marks a corrupt row instead of failing,
because it is the tool a person reaches for when a lookup fails with ``STORE_CORRUPT``.
Fixtures run in memory against the current store, through the same compiled index,
call classifier and constraint evaluation as the PreToolUse hook, so a passing fixture
says what the hook would decide on the protocols' side (strict-mode load checks and the
kernel guard are not part of a fixture). ``lint`` speaks only about records the user can
change: base records are Ithaca's, and a warning nobody can act on would only teach
people to ignore lint.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from ithaca.kernel import clock, guard, journal, states
from ithaca.kernel.errors import Corrupt, InvalidInput, IthacaError
from ithaca.kernel.gates import GateContext
from ithaca.protocols import (
    bundle,
    constraints,
    enforcement,
    events,
    matcher,
    reconcile,
    records,
    seeds,
    validate,
)

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService

HOSTS = ("claude", "codex", "opencode")
EXPECTATIONS = ("allow", "ask", "deny")
_DAY_MS = 86_400_000
_SEVERITY = {"allow": 0, "ask": 1, "approval": 2, "deny": 3}
_SHOWN_RULE = 80


# --- reading rows without trusting them ----------------------------------------------


@dataclass(frozen=True)
class StoredRow:
    """One protocol row: the record when it is intact, else what is wrong with it."""

    protocol_id: str
    priority: int
    record: dict[str, Any] | None
    problem: str | None = None
    detail: str | None = None


def stored_rows(service: ProtocolsService) -> list[StoredRow]:
    """Every protocol row in bundle order, each verified on its own."""
    rows = records.read_rows(service.store.connection())
    return [_checked_row(row, service.workflows) for row in rows]


def _checked_row(row: tuple[Any, ...], workflows: frozenset[str]) -> StoredRow:
    protocol_id, priority = row[0], row[5]
    try:
        record = records.row_to_record(row)
    except (ValueError, TypeError) as exc:
        return StoredRow(protocol_id, priority, None, "INVALID_JSON", str(exc))
    try:
        records.verify(record, workflows=workflows, states=states.KNOWN_STATES)
    except Corrupt as exc:
        cause = exc.__cause__
        detail = cause.message if isinstance(cause, IthacaError) else exc.message
        return StoredRow(protocol_id, priority, None, exc.details.get("problem"), detail)
    return StoredRow(protocol_id, priority, record)


# --- explain -------------------------------------------------------------------------


def explain(service: ProtocolsService, event_id: str) -> dict[str, Any]:
    """Why an event gets the bundle it gets, record by record (reference §10)."""
    event = service.get_event(event_id)
    conn = service.store.connection()
    values = matcher.selector_values(event)
    seed_rows = records.seed_records(conn)
    entries = []
    effective = []
    for stored in stored_rows(service):
        entry: dict[str, Any] = {"id": stored.protocol_id, "priority": stored.priority}
        record = stored.record
        if record is None:
            entry.update(status="corrupt", problem=stored.problem, detail=stored.detail)
        else:
            entry.update(scope=record["scope"], source=record["source"])
            if not record["enabled"]:
                entry["status"] = "disabled"
            elif matcher.matches(record["selector"], values):
                entry["status"] = "matched"
                effective += [
                    {"protocolId": record["id"], "index": index, "constraint": constraint}
                    for index, constraint in enumerate(
                        records.effective_constraints(record, seed_rows)
                    )
                ]
            else:
                entry["status"] = "no-match"
                entry["mismatches"] = matcher.mismatches(record["selector"], values)
        entries.append(entry)
    return {
        "eventId": event["id"],
        "selectorValues": values,
        "sources": _value_sources(conn, event["id"]),
        "records": entries,
        "effectiveConstraints": effective,
        "load": _would_load(conn, event, service.workflows),
    }


def _value_sources(conn: sqlite3.Connection, event_id: str) -> dict[str, str]:
    """Where each selector value came from. Context values carry their recorded source;
    connector, kind and user come from the admitting path (``hook``, ``user`` or
    ``system``)."""
    admitted_by = conn.execute(
        "SELECT admitted_by FROM protocol_events WHERE id = ?", (event_id,)
    ).fetchone()[0]
    context = events.context_sources(conn, event_id)
    return {key: context.get(key, admitted_by) for key in validate.SELECTOR_KEYS}


def _would_load(
    conn: sqlite3.Connection, event: dict[str, Any], workflows: frozenset[str]
) -> dict[str, Any]:
    try:
        computed = bundle.compute(conn, event, workflows)
    except IthacaError as exc:
        return {"ok": False, "error": exc.to_dict()}
    return {
        "ok": True,
        "protocolIds": [protocol["id"] for protocol in computed["protocols"]],
        "revision": computed["revision"],
        "digest": computed["digest"],
    }


# --- fixtures ------------------------------------------------------------------------


def parse_fixtures(text: str) -> Any:
    """The JSON of a fixtures file; ``INVALID_FIXTURES`` when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise _bad_fixture("", "INVALID_JSON", f"not JSON: {exc}") from exc


def run_fixtures(service: ProtocolsService, fixtures: Any) -> dict[str, Any]:
    """Run fixture cases in memory against the current store (reference §10)."""
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
    from ithaca.kernel.classify import classify

    settings = service.config["protocols"]
    call = classify(
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
    effect = max([*votes, *guard_votes], key=_SEVERITY.__getitem__, default="allow")
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


# --- lint ----------------------------------------------------------------------------


def lint(service: ProtocolsService, since_days: int = 30) -> list[dict[str, Any]]:
    """Findings about the user's records (reference §10), most severe kinds first.

    Beyond the reference's table, a corrupt row (``STORE_CORRUPT``) and a broken protocol
    file (``PROTOCOL_FILE_INVALID`` or ``PROTOCOL_FILE_CONFLICT``) are ``error`` findings:
    every lookup fails on them, so lint must not pass.
    """
    if isinstance(since_days, bool) or not isinstance(since_days, int) or since_days < 0:
        raise InvalidInput(
            "INVALID_INPUT",
            "since must be a whole number of days",
            {"pointer": "/since", "problem": "WRONG_TYPE"},
        )
    conn = service.store.connection()
    seed_rows = records.seed_records(conn)
    cutoff = clock.format_ms(time.time_ns() // 1_000_000 - since_days * _DAY_MS)
    rows = stored_rows(service)
    active = [
        _Linted(position, row.record, records.effective_constraints(row.record, seed_rows))
        for position, row in enumerate(rows)
        if row.record is not None and row.record["enabled"]
    ]
    findings = [
        _finding(
            "STORE_CORRUPT",
            "error",
            f"{row.protocol_id} is corrupt ({row.problem}): {row.detail}; run `ithaca doctor`",
            row.protocol_id,
        )
        for row in rows
        if row.record is None
    ]
    broken_file = reconcile.file_error(conn)
    if broken_file is not None:
        subject = str(broken_file.details.get("path", ""))
        findings.append(_finding(broken_file.code, "error", broken_file.message, subject))
    findings += _duplicate_rules(active)
    findings += _shadowed_constraints(active)
    findings += _priority_ties(active)
    findings += _never_matched(conn, active, cutoff)
    findings += _override_drift(active, seed_rows)
    findings += _never_fired(conn, active, cutoff)
    findings += _advisory_only(active)
    return findings


@dataclass(frozen=True)
class _Linted:
    position: int
    record: dict[str, Any]
    constraints: list[dict[str, Any]]  # effective: a base's first, for an override

    @property
    def id(self) -> str:
        return str(self.record["id"])

    @property
    def is_user(self) -> bool:
        return bool(self.record["scope"] == "user")

    @property
    def own_from(self) -> int:
        """The effective index where the record's own constraints start."""
        return len(self.constraints) - len(self.record["constraints"])


def _finding(code: str, level: str, message: str, subject: str) -> dict[str, Any]:
    return {"code": code, "level": level, "message": message, "subject": subject}


def _user_pairs(active: list[_Linted]) -> Iterator[tuple[_Linted, _Linted]]:
    """Pairs that can apply to one event, at least one of them the user's; the user's
    record (the later one when both are) comes second, as the finding's subject."""
    for i, first in enumerate(active):
        for second in active[i + 1 :]:
            if not (first.is_user or second.is_user):
                continue
            if not _co_match(first.record["selector"], second.record["selector"]):
                continue
            yield (first, second) if second.is_user else (second, first)


def _duplicate_rules(active: list[_Linted]) -> list[dict[str, Any]]:
    found = []
    for other, subject in _user_pairs(active):
        theirs = {" ".join(rule.split()) for rule in other.record["rules"]}
        for rule in dict.fromkeys(" ".join(rule.split()) for rule in subject.record["rules"]):
            if rule in theirs:
                shown = rule if len(rule) <= _SHOWN_RULE else rule[: _SHOWN_RULE - 1] + "…"
                found.append(
                    _finding(
                        "DUPLICATE_RULE",
                        "warning",
                        f'{subject.id} repeats the rule "{shown}" of {other.id}, and both can apply'
                        " to the same event",
                        subject.id,
                    )
                )
    return found


def _priority_ties(active: list[_Linted]) -> list[dict[str, Any]]:
    return [
        _finding(
            "PRIORITY_TIE",
            "warning",
            f"{subject.id} and {other.id} can apply to the same event with the same priority"
            f" ({subject.record['priority']}); their order falls back to the id",
            subject.id,
        )
        for other, subject in _user_pairs(active)
        if other.record["priority"] == subject.record["priority"]
    ]


def _shadowed_constraints(active: list[_Linted]) -> list[dict[str, Any]]:
    found = []
    for record in active:
        if not record.is_user:
            continue
        for index in range(record.own_from, len(record.constraints)):
            shadow = _shadow_of(record, index, active)
            if shadow is not None:
                found.append(
                    _finding(
                        "SHADOWED_CONSTRAINT",
                        "warning",
                        f"constraint {index} of {record.id} never changes a decision:"
                        f" constraint {shadow[1]} of {shadow[0].id} covers the same calls, at"
                        " least as strictly, on every event this record applies to",
                        f"{record.id}/constraints/{index}",
                    )
                )
    return found


def _shadow_of(record: _Linted, index: int, active: list[_Linted]) -> tuple[_Linted, int] | None:
    """A constraint elsewhere that makes ``record``'s constraint ``index`` redundant.

    When two constraints make each other redundant, the one that comes later is reported,
    or the user's one when the other belongs to a base record.
    """
    constraint = record.constraints[index]
    for other in active:
        if not _covers_selector(other.record["selector"], record.record["selector"]):
            continue
        for other_index, candidate in enumerate(other.constraints):
            if other is record and other_index == index:
                continue
            if not _covers_constraint(candidate, constraint):
                continue
            mutual = _covers_selector(
                record.record["selector"], other.record["selector"]
            ) and _covers_constraint(constraint, candidate)
            earlier = (other.position, other_index) < (record.position, index)
            if not mutual or earlier or not other.is_user:
                return other, other_index
    return None


def _never_matched(
    conn: sqlite3.Connection, active: list[_Linted], cutoff: str
) -> list[dict[str, Any]]:
    seen = {
        tuple(matcher.selector_values(events.row_to_event(row)).items())
        for row in conn.execute(
            f"SELECT {events.COLUMNS} FROM protocol_events WHERE received_at >= ?", (cutoff,)
        )
    }
    return [
        _finding(
            "NEVER_MATCHED",
            "warning",
            f"{record.id} matched no event admitted since {cutoff}",
            record.id,
        )
        for record in active
        if record.is_user
        and not any(matcher.matches(record.record["selector"], dict(values)) for values in seen)
    ]


def _override_drift(
    active: list[_Linted], seed_rows: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    return [
        _finding(
            "OVERRIDE_DRIFT",
            "warning",
            f"the base protocol {record.id} changed after this override was written; compare it"
            " with the new base and update the override",
            record.id,
        )
        for record in active
        if record.record["overridesBase"]
        and record.id in seed_rows
        and record.record["baseHash"] != seeds.seed_hash(seed_rows[record.id])
    ]


def _never_fired(
    conn: sqlite3.Connection,
    active: list[_Linted],
    cutoff: str,
) -> list[dict[str, Any]]:
    fired = {
        (item.get("protocolId"), item.get("index"))
        for entry in journal.query(conn, kind="protocols.decision")
        if entry["at"] >= cutoff
        for item in entry["payload"].get("constraints") or []
    }
    return [
        _finding(
            "NEVER_FIRED",
            "info",
            f"constraint {index} ({record.constraints[index]['kind']}) of {record.id} fired in"
            f" no decision since {cutoff}",
            f"{record.id}/constraints/{index}",
        )
        for record in active
        if record.is_user
        for index in range(record.own_from, len(record.constraints))
        if (record.id, index) not in fired
    ]


def _advisory_only(active: list[_Linted]) -> list[dict[str, Any]]:
    return [
        _finding(
            "ADVISORY_ONLY",
            "info",
            f"{record.id} has rules but no constraints: nothing enforces it before a tool call",
            record.id,
        )
        for record in active
        if record.is_user and not record.constraints
    ]


# --- selector and constraint relations -------------------------------------------------


def _values(expected: str | list[str]) -> set[str]:
    return {expected} if isinstance(expected, str) else set(expected)


def _co_match(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Two selectors co-match when every key they share has intersecting values."""
    return all(_values(first[key]) & _values(second[key]) for key in first.keys() & second.keys())


def _covers_selector(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    """Whether ``outer`` matches every event ``inner`` matches."""
    return all(key in inner and _values(inner[key]) <= _values(outer[key]) for key in outer)


def _strength(constraint: dict[str, Any]) -> int:
    if constraint["kind"] == "require_approval":
        return _SEVERITY["approval"]
    return _SEVERITY[constraint.get("effect", "deny")]


_FAMILIES = {
    "deny_tool": ("tools", "classes"),
    "deny_command": ("commands",),
    "deny_path": ("paths",),
    "require_approval": ("commands", "paths", "tools"),
}


def _covers_constraint(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
    """Whether ``outer`` fires, at least as strictly, on every call ``inner`` fires on."""
    if inner["kind"] in constraints.TURN_KINDS or outer["kind"] in constraints.TURN_KINDS:
        return False  # judged once a turn ends, never on a call: nothing to shadow
    if _strength(outer) < _strength(inner):
        return False
    if inner["kind"] == "require_state" or outer["kind"] == "require_state":
        return (
            inner["kind"] == outer["kind"]
            and inner["state"] == outer["state"]
            and inner.get("expect", True) == outer.get("expect", True)
            and _scope_covers(outer.get("for", "mutating"), inner.get("for", "mutating"))
        )
    for family in _FAMILIES[inner["kind"]]:
        patterns = inner.get(family, [])
        if not patterns:
            continue
        wider = outer.get(family, []) if family in _FAMILIES[outer["kind"]] else []
        covers = _PATTERN_COVERS[family]
        if not all(any(covers(w, pattern) for w in wider) for pattern in patterns):
            return False
    return True


def _scope_covers(outer: str | list[str], inner: str | list[str]) -> bool:
    if outer == "any":
        return True
    if outer == "mutating":
        return inner != "any"
    return isinstance(inner, list) and set(inner) <= set(outer)


def _command_covers(wider: str, pattern: str) -> bool:
    """``git push*`` covers ``git push --force``: each of its tokens globs over the other's."""
    wide_positional, wide_options = constraints.parse_command_pattern(wider)
    positional, options = constraints.parse_command_pattern(pattern)
    if len(wide_positional) > len(positional):
        return False
    if not all(fnmatchcase(t, w) for t, w in zip(positional, wide_positional, strict=False)):
        return False
    return all(any(fnmatchcase(t, w) for t in options) for w in wide_options)


def _path_segments(pattern: str) -> tuple[bool, list[str]]:
    if "/" not in pattern:
        return False, ["**", pattern]
    segments = [part for part in pattern.split("/") if part not in ("", ".")]
    if pattern.endswith("/"):
        segments.append("**")
    return pattern.startswith("/"), segments


def _path_covers(wider: str, pattern: str) -> bool:
    """``secrets/**`` covers ``secrets/*.key``; ``*.key`` covers ``config/*.key``."""
    wide_absolute, wide = _path_segments(wider)
    absolute, narrow = _path_segments(pattern)
    if "/" in wider and wide_absolute != absolute:
        return False
    return _segments_cover(wide, narrow)


def _segments_cover(wide: list[str], narrow: list[str]) -> bool:
    if not wide:
        return not narrow
    if wide[0] == "**":
        return any(_segments_cover(wide[1:], narrow[skip:]) for skip in range(len(narrow) + 1))
    if not narrow or narrow[0] == "**":
        return False
    return fnmatchcase(narrow[0], wide[0]) and _segments_cover(wide[1:], narrow[1:])


_PATTERN_COVERS: dict[str, Callable[[str, str], bool]] = {
    "commands": _command_covers,
    "paths": _path_covers,
    "tools": lambda wider, pattern: fnmatchcase(pattern, wider),
    "classes": lambda wider, pattern: wider == pattern,
}


# --- seeds ---------------------------------------------------------------------------


def seed_status(service: ProtocolsService) -> dict[str, Any]:
    """Each shipped base record and what the store holds for it (reference §10 ``seeds``).

    States: ``in-sync``; ``overridden`` (a user or file record replaces it, written
    against this seed); ``overridden+drift`` (written against an older seed);
    ``missing`` (no row for the id); ``stale`` (a base row from another seed version,
    which reconciliation on the next open replaces).
    """
    conn = service.store.connection()
    stored_digest = conn.execute("SELECT seed_set_digest FROM protocol_state").fetchone()[0]
    report = []
    for seed in sorted(seeds.BASE_PROTOCOLS, key=lambda s: (-s["priority"], s["id"])):
        seed_hash = seeds.seed_hash(seed)
        row = conn.execute(
            "SELECT scope, overrides_base, base_hash, content_hash, source FROM protocols"
            " WHERE id = ?",
            (seed["id"],),
        ).fetchone()
        entry: dict[str, Any] = {
            "id": seed["id"],
            "priority": seed["priority"],
            "seedHash": seed_hash,
        }
        if row is None or (row[0] == "user" and not row[1]):
            entry["state"] = "missing"
        elif row[0] == "base":
            entry["state"] = "in-sync" if row[3] == seed_hash else "stale"
        else:
            entry["state"] = "overridden" if row[2] == seed_hash else "overridden+drift"
            entry["overrideSource"] = row[4]
        report.append(entry)
    return {
        "seedSetDigest": {"code": seeds.seed_set_digest(), "store": stored_digest},
        "inSync": stored_digest == seeds.seed_set_digest(),
        "seeds": report,
    }
