"""Lint: findings about the rules the user can change (docs/protocols.md, "Writing a team
protocol").

It asks "do my rules do what I meant?": rules repeated across records that can apply to
one event, constraints another one already covers, priority ties, records that matched
no recent event, constraints that never fired, overrides whose base changed, records with
rules but nothing enforcing them. It speaks only about records the user can change: base
records are Ithaca's, and a warning nobody can act on would only teach people to ignore
lint. Nothing is written to the store or the journal.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ithaca.kernel import clock, journal
from ithaca.kernel.errors import InvalidInput
from ithaca.protocols import events, matcher, reconcile, records, seeds
from ithaca.protocols.checked_rows import stored_rows
from ithaca.protocols.overlap import co_match, covers_constraint, covers_selector

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService

_DAY_MS = 86_400_000
_SHOWN_RULE = 80


def lint_protocols(service: ProtocolsService, since_days: int = 30) -> list[dict[str, Any]]:
    """Findings about the user's records, most severe kinds first.

    Beyond the findings about the rules themselves, a corrupt row (``STORE_CORRUPT``) and a
    broken protocol file (``PROTOCOL_FILE_INVALID`` or ``PROTOCOL_FILE_CONFLICT``) are
    ``error`` findings: every lookup fails on them, so lint must not pass.
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
            if not co_match(first.record["selector"], second.record["selector"]):
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
        if not covers_selector(other.record["selector"], record.record["selector"]):
            continue
        for other_index, candidate in enumerate(other.constraints):
            if other is record and other_index == index:
                continue
            if not covers_constraint(candidate, constraint):
                continue
            mutual = covers_selector(
                record.record["selector"], other.record["selector"]
            ) and covers_constraint(constraint, candidate)
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
