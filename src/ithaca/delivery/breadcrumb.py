"""The SessionStart breadcrumb: where delivery stands, in four short lines
(docs/delivery.md, "Hooks").

An agent that starts fresh, or comes back from a compaction, has lost track of which
change and task it was on. The breadcrumb tells it in a few lines and points to the full
`context` envelope; it never carries bodies. Rendering is kept apart from reading so the
hook gate and the `context` service produce the same text from the same summary, and it
uses the standard library only because hooks import it on every session start.

A summary is a plain mapping::

    {"change": {"id", "kind", "status"} | None,
     "task": {"id", "title", "status"} | None,
     "session": {"id", "lease_minutes"} | None,
     "checkpoints": [{"stage", "revision", "status"}, ...],
     "decisions": {"accepted": int, "deferred": int},
     "attention": [code, ...]}
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

MAX_BYTES = 2048
TITLE_CHARS = 80
ATTENTION_CODES = 12
HEADER = "[Ithaca delivery]"
POINTER = "Full context: tool `context` with detail=full, or `ithaca context --full`."
SEPARATOR = " · "


def render(summary: Mapping[str, Any], *, note: str | None = None) -> str:
    """The breadcrumb text for ``summary``, at most ``MAX_BYTES`` UTF-8 bytes.

    ``note`` is an extra line placed just before the pointer (a fallback's explanation).
    """
    lines = [_head(summary.get("change"), summary.get("task"))]
    progress = _progress(summary.get("session"), summary.get("checkpoints") or ())
    if progress:
        lines.append(progress)
    standing = _standing(summary)
    if standing:
        lines.append(standing)
    if note:
        lines.append(note)
    return fit(lines)


def fit(lines: list[str], limit: int = MAX_BYTES) -> str:
    """``lines`` followed by the pointer line, dropping whole lines from the end (never
    the pointer) until the text is at most ``limit`` UTF-8 bytes."""
    budget = limit - len(POINTER.encode("utf-8"))
    kept: list[str] = []
    for line in lines:
        cost = len(line.encode("utf-8")) + 1  # the newline that ends it
        if cost > budget:
            break
        kept.append(line)
        budget -= cost
    return "\n".join([*kept, POINTER])


def with_note(text: str, note: str) -> str:
    """An already rendered breadcrumb with ``note`` added before its pointer line."""
    lines = [line for line in text.splitlines() if line and line != POINTER]
    return fit([*lines, note])


def _head(change: Mapping[str, Any] | None, task: Mapping[str, Any] | None) -> str:
    if change is None:
        return f"{HEADER} no open change"
    line = f"{HEADER} change {change['id']} ({change['kind']}, {change['status']})"
    if task is not None:
        line += f"{SEPARATOR}task {task['id']} {_quoted(task.get('title'))} {task['status']}"
    return line


def _progress(session: Mapping[str, Any] | None, checkpoints: Any) -> str:
    parts = []
    if session is not None:
        parts.append(f"Session {session['id']} lease {session['lease_minutes']}m")
    parts.extend(
        f"{checkpoint['stage']} r{checkpoint['revision']} {checkpoint['status']}"
        for checkpoint in checkpoints
    )
    return SEPARATOR.join(parts)


def _standing(summary: Mapping[str, Any]) -> str:
    parts = []
    decisions = summary.get("decisions") or {}
    accepted, deferred = decisions.get("accepted", 0), decisions.get("deferred", 0)
    if summary.get("change") is not None or accepted or deferred:
        parts.append(f"Decisions: {accepted} accepted, {deferred} deferred")
    codes = list(summary.get("attention") or ())
    if codes:
        shown = ", ".join(codes[:ATTENTION_CODES])
        more = len(codes) - ATTENTION_CODES
        parts.append(f"Attention: {shown}" + (f" (+{more} more)" if more > 0 else ""))
    return SEPARATOR.join(parts)


def _quoted(title: object) -> str:
    """A title on one line, cut to ``TITLE_CHARS`` characters, in double quotes."""
    text = " ".join(str(title or "").split())
    if len(text) > TITLE_CHARS:
        text = text[: TITLE_CHARS - 1] + "…"
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
