"""The lesson record and its Markdown file: names, keys, structural outcomes, parsing."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import canon
from ithaca.ulysses import lessons


def closed_session(**changes: Any) -> dict[str, Any]:
    """A closed session as the Ulysses service hands it over."""
    session: dict[str, Any] = {
        "session_id": "uly_01J9Z3V6Q2X8M4K7T1R5B0C9DE",
        "problem": "Flaky login test\nIt fails one run in five on CI.",
        "constraints": ["no sleeps", "keep the public API"],
        "terminalState": "resolved",
        "summary": "The token cache was shared between tests; scoping it per test fixed it.",
        "missing": None,
        "completed_at": "2025-03-04T23:59:58.123Z",
        "hypotheses": [
            {"seq": 1, "hypothesis": "clock skew", "falsification": "pin the clock", "at": "t1"},
            {"seq": 2, "hypothesis": "shared cache", "falsification": "scope it", "at": "t2"},
        ],
        "steps": [
            {
                "step_id": "stp_a",
                "primary": "retry the request",
                "recovery": "revert the retry",
                "irreversible": False,
                "result": "failed",
                "hypothesis_seq": None,
            },
            {
                "step_id": "stp_b",
                "primary": "freeze time",
                "recovery": "unfreeze",
                "irreversible": False,
                "result": "failed",
                "hypothesis_seq": 1,
            },
            {
                "step_id": "stp_c",
                "primary": "scope the cache",
                "recovery": "unscope it",
                "irreversible": True,
                "result": "passed_primary",
                "hypothesis_seq": 2,
            },
        ],
        "forbidden_moves": [
            {
                "text": "retry the request",
                "key": "retry the request",
                "step_id": "stp_a",
                "reason": "failed",
            },
        ],
        "checkpoints": [
            {
                "label": "initial",
                "at": "t0",
                "git_head": "a" * 40,
                "worktree_digest": "b" * 64,
                "snapshot_ref": None,
                "restorable": False,
            },
        ],
        "evidence": [
            {"role": "final", "snapshotHash": "c" * 64, "evidenceDigest": "d" * 64, "pass": True},
        ],
    }
    session.update(changes)
    return session


def test_title_is_the_first_line_of_the_problem_cut_to_80_characters() -> None:
    assert lessons.title_of("\n  Flaky login test  \nmore") == "Flaky login test"
    long = lessons.title_of("word " * 40)
    assert len(long) == 80
    assert long.endswith("…")


@pytest.mark.parametrize(
    ("problem", "slug"),
    [
        ("Flaky LOGIN test!", "flaky-login-test"),
        ("Café crème -- über   naïve", "cafe-creme-uber-naive"),
        ("  --  ", "lesson"),
        ("日本語だけ", "lesson"),
        ("a" * 70, "a" * 60),
        ("alpha " * 20, "-".join(["alpha"] * 10)),
    ],
)
def test_slug_is_lowercase_ascii_words_joined_by_dashes(problem: str, slug: str) -> None:
    assert lessons.slug_of(problem) == slug


@given(st.text())
def test_slug_is_always_a_short_safe_file_stem(problem: str) -> None:
    slug = lessons.slug_of(problem)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", slug)
    assert len(slug) <= 60


def test_file_names_use_the_utc_date_then_numbered_suffixes() -> None:
    names = lessons.file_names("2025-03-04", "Flaky login")
    assert [next(names) for _ in range(3)] == [
        "2025-03-04-flaky-login.md",
        "2025-03-04-flaky-login-2.md",
        "2025-03-04-flaky-login-3.md",
    ]


def test_key_ignores_case_whitespace_and_compatibility_forms() -> None:
    key = lessons.lesson_key("Flaky login", ["no sleeps"], "Scope the cache.")
    same = lessons.lesson_key("  FLAKY\tlogin ", ["No   Sleeps"], "scope the cache.")
    compat = lessons.lesson_key("\ufb02aky login", ["\uff4eo sleeps"], "Scope the cache.")
    assert key == same == compat
    assert key != lessons.lesson_key("Flaky login", ["no sleeps"], "Retry it.")
    assert key != lessons.lesson_key("Flaky login", [], "Scope the cache.")


def test_hypothesis_outcomes_are_structural() -> None:
    resolved = lessons.occurrence(closed_session())
    assert [(h["hypothesis"], h["outcome"], h["steps"]) for h in resolved["hypotheses"]] == [
        ("clock skew", "superseded", [2]),
        ("shared cache", "held", [3]),
    ]
    given_up = lessons.occurrence(
        closed_session(terminalState="insufficient_information", missing=["prod logs"])
    )
    assert [h["outcome"] for h in given_up["hypotheses"]] == ["superseded", "open"]


def test_record_carries_the_reference_fields() -> None:
    record = lessons.new_record("lsn_1", "k" * 64, closed_session())
    assert record["schema"] == "ithaca.lesson/1"
    assert record["title"] == "Flaky login test"
    assert "missing" not in record
    (entry,) = record["occurrences"]
    assert entry["steps"][2] == {
        "primary": "scope the cache",
        "recovery": "unscope it",
        "irreversible": True,
        "result": "passed_primary",
    }
    assert entry["forbidden_moves"] == [
        {"text": "retry the request", "reason": "failed", "step": 1}
    ]
    assert entry["checkpoints"] == [
        {"label": "initial", "git_head": "a" * 40, "worktree_digest": "b" * 64}
    ]
    assert entry["evidence"][0]["role"] == "final"
    assert lessons.record_date(record) == "2025-03-04"


def test_merging_adds_an_occurrence_and_takes_the_latest_terminal_state() -> None:
    record = lessons.new_record("lsn_1", "k" * 64, closed_session())
    later = closed_session(
        session_id="uly_2", terminalState="insufficient_information", missing=["prod logs"]
    )
    merged = lessons.merged_record(record, later)
    assert [o["session_id"] for o in merged["occurrences"]] == [
        "uly_01J9Z3V6Q2X8M4K7T1R5B0C9DE",
        "uly_2",
    ]
    assert merged["terminalState"] == "insufficient_information"
    assert merged["missing"] == ["prod logs"]
    assert merged["id"] == "lsn_1"


def test_file_round_trips_through_its_first_line() -> None:
    record = lessons.new_record("lsn_1", "k" * 64, closed_session(summary="ends with --> here"))
    text = lessons.render_file(record)
    first, _, _ = text.partition("\n")
    assert first == "<!-- ithaca:lesson " + canon.canonical_text(record) + " -->"
    parsed, body = lessons.parse_file(text)
    assert parsed == record
    headings = [line for line in body.splitlines() if line.startswith("## ")]
    assert headings == [
        "## Problem",
        "## Summary",
        "## Constraints",
        "## Hypotheses",
        "## Forbidden moves",
        "## Checkpoints",
        "## Validator evidence",
    ]
    assert "[held] shared cache" in body
    assert "step 3 (passed_primary, irreversible): scope the cache" in body


def test_file_with_several_occurrences_renders_each_session() -> None:
    record = lessons.new_record("lsn_1", "k" * 64, closed_session())
    record = lessons.merged_record(record, closed_session(session_id="uly_2"))
    body = lessons.render_body(record)
    assert body.count("### Session uly_2") == 4
    assert "sessions: 2" in body


@pytest.mark.parametrize(
    "text",
    [
        "# just markdown\n",
        "<!-- ithaca:lesson {not json} -->\n",
        "<!-- ithaca:lesson [] -->\n",
        '<!-- ithaca:lesson {"schema": "ithaca.lesson/1"} -->\n',
        "",
    ],
)
def test_parse_refuses_files_without_a_valid_record(text: str) -> None:
    with pytest.raises(lessons.LessonFileInvalid):
        lessons.parse_file(text)


@pytest.mark.parametrize(
    "change",
    [
        {"terminalState": "superseded"},
        {"summary": " "},
        {"occurrences": []},
        {"constraints": "no sleeps"},
        {"count": float("nan")},
        {"count": 2**60},
    ],
)
def test_parse_refuses_a_record_that_breaks_the_schema(change: dict[str, Any]) -> None:
    record = dict(lessons.new_record("lsn_1", "k" * 64, closed_session()), **change)
    with pytest.raises(lessons.LessonFileInvalid):
        lessons.parse_file("<!-- ithaca:lesson " + json.dumps(record) + " -->\n")
