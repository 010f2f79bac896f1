"""The lesson record ``ithaca.lesson/1`` and its Markdown file (docs/ulysses.md, "Lessons").

A lesson is what a closed Ulysses session leaves for the next one: the problem, its
constraints, the summary and, per occurrence, the hypotheses, steps, forbidden moves,
checkpoints and validator evidence. Two sessions that state the same problem, constraints
and summary (normalised as forbidden moves are) share one lesson: its ``key`` is the SHA-256 of
that normalised triple, and each session adds an occurrence.

A hypothesis's ``outcome`` is read from the structure, never claimed: ``held`` when the
session was resolved while it was the latest, ``superseded`` when a later ``reflect``
replaced it, else ``open``. Its ``steps`` are the 1-based numbers of the occurrence's
steps planned while it was the latest hypothesis (as the Markdown shows them).

The file is ``<yyyy-mm-dd>-<slug>.md``. Line 1 carries the canonical record in an HTML
comment, so the file renders as a document and still parses back exactly; the body after
it is for people (and for full-text search).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput
from ithaca.ulysses.session import TERMINAL_STATES
from ithaca.ulysses.session import forbidden_key as normalise

SCHEMA = "ithaca.lesson/1"
TITLE_MAX = 80
SLUG_MAX = 60
FIRST_LINE_PREFIX = "<!-- ithaca:lesson "
FIRST_LINE_SUFFIX = " -->"

_NOT_ALNUM = re.compile(r"[^a-z0-9]+")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class LessonFileInvalid(ValueError):
    """A lesson file whose first line does not hold a valid ``ithaca.lesson/1`` record."""


# --- identity -----------------------------------------------------------------------------


def lesson_key(problem: str, constraints: list[str], summary: str) -> str:
    """The duplicate key: SHA-256 of the canonical ``{problem, constraints, summary}``, each
    string normalised as forbidden moves are."""
    return canon.digest(
        {
            "problem": normalise(problem),
            "constraints": [normalise(item) for item in constraints],
            "summary": normalise(summary),
        }
    )


def title_of(problem: str) -> str:
    """The problem's first non-blank line, at most 80 characters."""
    line = next((line.strip() for line in problem.splitlines() if line.strip()), "")
    if len(line) <= TITLE_MAX:
        return line
    return line[: TITLE_MAX - 1].rstrip() + "…"


def slug_of(problem: str) -> str:
    """Lowercase ASCII words joined by ``-``, cut at a word boundary within 60 characters."""
    ascii_text = (
        unicodedata.normalize("NFKD", problem).encode("ascii", "ignore").decode("ascii").lower()
    )
    slug = _NOT_ALNUM.sub("-", ascii_text).strip("-")
    if len(slug) > SLUG_MAX:
        cut = slug[: SLUG_MAX + 1]
        boundary = cut.rfind("-")
        slug = cut[:boundary] if boundary > 0 else slug[:SLUG_MAX]
    return slug or "lesson"


def file_names(date: str, problem: str) -> Iterator[str]:
    """Candidate file names in order: ``<date>-<slug>.md``, then ``-2``, ``-3``…"""
    stem = f"{date}-{slug_of(problem)}"
    yield f"{stem}.md"
    number = 2
    while True:
        yield f"{stem}-{number}.md"
        number += 1


def date_of(completed_at: str) -> str:
    """The UTC date of an RFC 3339 UTC timestamp (``YYYY-MM-DD``)."""
    date = completed_at[:10]
    if _DATE.fullmatch(date) is None:
        raise LessonFileInvalid(f"{completed_at!r} does not start with a date")
    return date


def record_date(record: dict[str, Any]) -> str:
    """When the lesson was first learned: the date of its first occurrence."""
    return date_of(record["occurrences"][0]["completed_at"])


# --- record -------------------------------------------------------------------------------


def new_record(lesson_id: str, key: str, closed: dict[str, Any]) -> dict[str, Any]:
    """The record of a lesson first learned by the closed session ``closed``."""
    record: dict[str, Any] = {
        "schema": SCHEMA,
        "id": lesson_id,
        "key": key,
        "title": title_of(closed["problem"]),
        "problem": closed["problem"],
        "constraints": list(closed["constraints"]),
        "terminalState": closed["terminalState"],
        "summary": closed["summary"],
        "occurrences": [occurrence(closed)],
    }
    if closed.get("missing"):
        record["missing"] = list(closed["missing"])
    return record


def merged_record(record: dict[str, Any], closed: dict[str, Any]) -> dict[str, Any]:
    """``record`` with one more occurrence; the latest session's terminal state and
    ``missing`` become the lesson's. Problem, constraints and summary keep their first
    wording (they normalise to the same key)."""
    merged = {name: value for name, value in record.items() if name != "missing"}
    merged["occurrences"] = [*record["occurrences"], occurrence(closed)]
    merged["terminalState"] = closed["terminalState"]
    if closed.get("missing"):
        merged["missing"] = list(closed["missing"])
    return merged


def occurrence(closed: dict[str, Any]) -> dict[str, Any]:
    """One session's contribution: what it tried, what it ruled out, where it stood."""
    steps = list(closed.get("steps") or [])
    number_of = {step["step_id"]: index for index, step in enumerate(steps, start=1)}
    hypotheses = sorted(closed.get("hypotheses") or [], key=lambda item: item["seq"])
    latest_seq = hypotheses[-1]["seq"] if hypotheses else None
    resolved = closed["terminalState"] == "resolved"
    entry: dict[str, Any] = {
        "session_id": closed["session_id"],
        "completed_at": closed["completed_at"],
        "terminalState": closed["terminalState"],
        "hypotheses": [
            {
                "hypothesis": item["hypothesis"],
                "falsification": item["falsification"],
                "outcome": _outcome(item["seq"], latest_seq, resolved),
                "steps": [
                    number_of[step["step_id"]]
                    for step in steps
                    if step.get("hypothesis_seq") == item["seq"]
                ],
            }
            for item in hypotheses
        ],
        "steps": [
            {
                "primary": step["primary"],
                "recovery": step["recovery"],
                "irreversible": bool(step.get("irreversible")),
                "result": step.get("result"),
            }
            for step in steps
        ],
        "forbidden_moves": [
            {
                "text": move["text"],
                "reason": move.get("reason"),
                "step": number_of.get(move.get("step_id")),
            }
            for move in closed.get("forbidden_moves") or []
        ],
        "checkpoints": [
            {
                "label": point.get("label"),
                "git_head": point.get("git_head"),
                "worktree_digest": point.get("worktree_digest"),
            }
            for point in closed.get("checkpoints") or []
        ],
        "evidence": [
            {
                "role": item.get("role"),
                "snapshotHash": item.get("snapshotHash"),
                "evidenceDigest": item.get("evidenceDigest"),
                "pass": item.get("pass"),
            }
            for item in closed.get("evidence") or []
        ],
    }
    if closed.get("missing"):
        entry["missing"] = list(closed["missing"])
    return entry


def _outcome(seq: int, latest_seq: int | None, resolved: bool) -> str:
    if seq != latest_seq:
        return "superseded"
    return "held" if resolved else "open"


# --- file ---------------------------------------------------------------------------------


def render_file(record: dict[str, Any]) -> str:
    """The whole file: the record on line 1, then the Markdown body."""
    return first_line(record) + "\n" + render_body(record)


def first_line(record: dict[str, Any]) -> str:
    return FIRST_LINE_PREFIX + canon.canonical_text(record) + FIRST_LINE_SUFFIX


def parse_file(text: str) -> tuple[dict[str, Any], str]:
    """``(record, body)`` of a lesson file; raises ``LessonFileInvalid``."""
    line, _, body = text.partition("\n")
    line = line.rstrip("\r")
    if not (line.startswith(FIRST_LINE_PREFIX) and line.endswith(FIRST_LINE_SUFFIX)):
        raise LessonFileInvalid("line 1 is not an ithaca:lesson comment")
    try:
        record = json.loads(line[len(FIRST_LINE_PREFIX) : -len(FIRST_LINE_SUFFIX)])
    except ValueError as exc:
        raise LessonFileInvalid(f"line 1 does not hold JSON: {exc}") from exc
    check_record(record)
    try:
        canon.canonical(record)
    except InvalidInput as exc:
        raise LessonFileInvalid(f"the record has no canonical form: {exc.message}") from exc
    return record, body


def check_record(record: Any) -> None:
    """Refuse (``LessonFileInvalid``) a value that is not an ``ithaca.lesson/1`` record."""
    if not isinstance(record, dict) or record.get("schema") != SCHEMA:
        raise LessonFileInvalid(f"the record is not {SCHEMA}")
    for name in ("id", "problem", "summary"):
        if not _is_text(record.get(name)):
            raise LessonFileInvalid(f"{name} must be a non-blank string")
    if not isinstance(record.get("title"), str):
        raise LessonFileInvalid("title must be a string")
    if record.get("terminalState") not in TERMINAL_STATES:
        raise LessonFileInvalid(f"terminalState must be one of {', '.join(TERMINAL_STATES)}")
    for name in ("constraints", "missing"):
        value = record.get(name, [])
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise LessonFileInvalid(f"{name} must be a list of strings")
    occurrences = record.get("occurrences")
    if not isinstance(occurrences, list) or not occurrences:
        raise LessonFileInvalid("occurrences must be a non-empty list")
    for item in occurrences:
        if not isinstance(item, dict) or not isinstance(item.get("completed_at"), str):
            raise LessonFileInvalid("each occurrence needs completed_at")
        date_of(item["completed_at"])


def _is_text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def render_body(record: dict[str, Any]) -> str:
    """The Markdown a person reads: Summary, Constraints, Hypotheses, Forbidden moves,
    Checkpoints, Validator evidence, per occurrence where there are several."""
    occurrences = record["occurrences"]
    lines = [
        f"# {record['title'] or 'Lesson'}",
        "",
        f"Terminal state: {record['terminalState']} · first recorded {record_date(record)}"
        f" · sessions: {len(occurrences)}",
        "",
        "## Problem",
        "",
        record["problem"].strip(),
        "",
        "## Summary",
        "",
        record["summary"].strip(),
        "",
        "## Constraints",
        "",
        *_bullets(record["constraints"], empty="None."),
    ]
    if record.get("missing"):
        lines += ["", "## Missing information", "", *_bullets(record["missing"])]
    sections = (
        ("Hypotheses", _hypotheses),
        ("Forbidden moves", _forbidden_moves),
        ("Checkpoints", _checkpoints),
        ("Validator evidence", _evidence),
    )
    for heading, render in sections:
        lines += ["", f"## {heading}"]
        for item in occurrences:
            if len(occurrences) > 1:
                lines += ["", f"### Session {item.get('session_id')} ({item['completed_at']})"]
            lines += ["", *render(item)]
    return "\n".join(lines) + "\n"


def _bullets(items: list[str], *, empty: str = "None.") -> list[str]:
    if not items:
        return [empty]
    return [_item("- ", text) for text in items]


def _item(marker: str, text: str) -> str:
    """A list item whose continuation lines are indented under it."""
    indent = "\n" + " " * len(marker)
    return marker + indent.join(str(text).strip().splitlines())


def _hypotheses(item: dict[str, Any]) -> list[str]:
    steps = item.get("steps") or []
    attributed = {number for hypothesis in item["hypotheses"] for number in hypothesis["steps"]}
    lines = []
    unattributed = [n for n in range(1, len(steps) + 1) if n not in attributed]
    if unattributed:
        lines.append("Steps before any hypothesis:")
        lines += [_step_line(n, steps[n - 1]) for n in unattributed]
    for index, hypothesis in enumerate(item["hypotheses"], start=1):
        if lines:
            lines.append("")
        lines.append(_item(f"{index}. ", f"[{hypothesis['outcome']}] {hypothesis['hypothesis']}"))
        lines.append(_item("   ", f"Falsification: {hypothesis['falsification']}"))
        lines += [_step_line(n, steps[n - 1], indent="   ") for n in hypothesis["steps"]]
    return lines or ["None."]


def _step_line(number: int, step: dict[str, Any], *, indent: str = "") -> str:
    flag = ", irreversible" if step.get("irreversible") else ""
    text = f"step {number} ({step.get('result') or 'open'}{flag}): {step['primary']}"
    return _item(indent + "- ", f"{text}; recovery: {step['recovery']}")


def _forbidden_moves(item: dict[str, Any]) -> list[str]:
    lines = []
    for move in item["forbidden_moves"]:
        origin = f"step {move['step']}, " if move.get("step") else ""
        lines.append(_item("- ", f"{move['text']} ({origin}{move.get('reason')})"))
    return lines or ["None."]


def _checkpoints(item: dict[str, Any]) -> list[str]:
    lines = []
    for point in item["checkpoints"]:
        head = (point.get("git_head") or "no commit")[:12]
        digest = (point.get("worktree_digest") or "none")[:12]
        lines.append(f"- {point.get('label')}: HEAD {head}, worktree {digest}")
    return lines or ["None."]


def _evidence(item: dict[str, Any]) -> list[str]:
    lines = []
    for entry in item["evidence"]:
        verdict = "pass" if entry.get("pass") else "fail"
        lines.append(
            f"- {entry.get('role')}: {verdict}; snapshot {entry.get('snapshotHash')},"
            f" evidence {entry.get('evidenceDigest')}"
        )
    return lines or ["None."]
