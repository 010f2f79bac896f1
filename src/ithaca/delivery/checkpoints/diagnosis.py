"""An incident's ``diagnosis.md``: five sections in a fixed order, plus Ulysses blocks.

The sections are Reproduction, Hypotheses, Root cause, Regression test and Recovery, from
``diagnosis.{reproduction, hypotheses, root_cause, regression_test, recovery}``. A
section under three characters is a gap (``DIAGNOSIS_SECTION_MISSING:<key>``), reported
at open, revise, every checkpoint and archive, never refused: an incident is diagnosed
while it is handled.

With a linked Ulysses session Ithaca owns one block between ``<!-- ithaca:ulysses:begin
-->`` and ``<!-- ithaca:ulysses:end -->`` at the end of Reproduction (checkpoints and
step results), Hypotheses (each hypothesis with its falsification) and Root cause (the
session's status). The caller's text is stored with the change and the file is rendered
from it, so refreshing the blocks never touches the caller's words; the markers are
therefore refused inside caller text.
"""

from __future__ import annotations

import re
from typing import Any

from ithaca.delivery.contract import Diagnostic, diagnostic, validation_error

SECTIONS = (
    ("reproduction", "Reproduction"),
    ("hypotheses", "Hypotheses"),
    ("root_cause", "Root cause"),
    ("regression_test", "Regression test"),
    ("recovery", "Recovery"),
)
BEGIN = "<!-- ithaca:ulysses:begin -->"
END = "<!-- ithaca:ulysses:end -->"
MIN_SECTION_CHARS = 3

_SPACES = re.compile(r"\s+")


def check_caller_text(sections: dict[str, str], pointer: str) -> None:
    """Refuse caller text that holds Ithaca's block markers."""
    for key, _ in SECTIONS:
        body = sections.get(key, "")
        if "ithaca:ulysses:" in body:
            raise validation_error(
                f"{pointer}/{key}", "RESERVED_MARKER", "holds Ithaca's ulysses block marker"
            )


def missing_sections(sections: dict[str, str], subject: str) -> list[Diagnostic]:
    """``DIAGNOSIS_SECTION_MISSING:<key>`` for every section under three characters."""
    return [
        diagnostic(
            f"DIAGNOSIS_SECTION_MISSING:{key}",
            "warning",
            f"the incident diagnosis has no {title} section yet",
            subject,
        )
        for key, title in SECTIONS
        if len(sections.get(key, "").strip()) < MIN_SECTION_CHARS
    ]


def render(change_id: str, sections: dict[str, str], session: dict[str, Any] | None) -> str:
    """The whole file, the caller's sections verbatim, blocks from ``session`` if linked."""
    blocks = _blocks(session) if session is not None else {}
    lines = [f"# Diagnosis: {change_id}", ""]
    for key, title in SECTIONS:
        lines += [f"## {title}", ""]
        body = sections.get(key, "").strip("\n")
        if body:
            lines += [body, ""]
        if key in blocks:
            lines += [BEGIN, *blocks[key], END, ""]
    return "\n".join(lines)


def _blocks(session: dict[str, Any]) -> dict[str, list[str]]:
    name = f"Ulysses session {session['session_id']}"
    reproduction = [f"{name}: checkpoints and steps."]
    for point in session["checkpoints"]:
        head = point["git_head"][:12] if point["git_head"] else "no commit"
        reproduction.append(f"- checkpoint `{point['label']}` at {head}")
    for step in session["steps"]:
        reproduction.append(
            f"- step {step['step_id']}: {_line(step['primary'])} → {step['result']}"
        )
    hypotheses = [f"{name}: hypotheses and how each would be falsified."]
    hypotheses += [
        f"- H{item['seq']}: {_line(item['hypothesis'])} (falsified if: "
        f"{_line(item['falsification'])})"
        for item in session["hypotheses"]
    ] or ["- none recorded yet"]
    root_cause = [f"{name}: {session['status']}."]
    if session.get("summary"):
        root_cause.append(f"Summary: {_line(session['summary'])}")
    return {"reproduction": reproduction, "hypotheses": hypotheses, "root_cause": root_cause}


def _line(text: str) -> str:
    """Text on one line, so a bullet stays a bullet."""
    return _SPACES.sub(" ", text).strip()
