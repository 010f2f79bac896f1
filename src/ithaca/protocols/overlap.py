"""When two protocol records can apply to one event, and when one constraint covers another.

Lint reports rules repeated across records and constraints that never change a decision,
so it must know which selectors can match the same event (every shared key has a common
value), which selector matches every event another one matches, and which constraint
fires, at least as strictly, on every call another one fires on. Command patterns cover
token by token, path patterns segment by segment (``**`` spanning any number), and tool
patterns as globs.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from ithaca.protocols import constraints

_SEVERITY = {"allow": 0, "ask": 1, "approval": 2, "deny": 3}


def _values(expected: str | list[str]) -> set[str]:
    return {expected} if isinstance(expected, str) else set(expected)


def co_match(first: dict[str, Any], second: dict[str, Any]) -> bool:
    """Two selectors co-match when every key they share has intersecting values."""
    return all(_values(first[key]) & _values(second[key]) for key in first.keys() & second.keys())


def covers_selector(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
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


def covers_constraint(outer: dict[str, Any], inner: dict[str, Any]) -> bool:
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
