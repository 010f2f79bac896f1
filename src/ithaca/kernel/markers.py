"""Prompt markers: ``::workflow NAME`` and ``::task NAME`` lines at the start of a prompt.

Only lines at the very start count (leading blank lines are skipped) and parsing stops at
the first line that is not a marker. The ``::`` prefix is used because hosts keep ``/``
lines for their own commands. The dispatcher parses them once and hands gates both the
markers and the first real prompt line.
"""

from __future__ import annotations

from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
else:
    from ithaca.kernel.tuples import namedtuple

MARKER_KEYS = ("workflow", "task")


class Prompt(namedtuple("Prompt", "markers first_line", defaults=(None, ""))):
    """The markers of a prompt (``{"workflow": …, "task": …}``) and its first real line."""

    __slots__ = ()

    def __new__(cls, markers: dict[str, str] | None = None, first_line: str = "") -> Prompt:
        return super().__new__(cls, markers if markers is not None else {}, first_line)


def is_name(value: str) -> bool:
    """Whether ``value`` is a workflow or task name as a marker spells it."""
    return (
        0 < len(value) <= 64
        and value[0].isascii()
        and value[0].islower()
        and all(c.isascii() and (c.islower() or c.isdigit() or c in "._-") for c in value)
    )


def parse(text: str) -> Prompt:
    """Split the marker block off a prompt; ``MALFORMED_MARKER`` for a bad ``::`` line."""
    markers: dict[str, str] = {}
    lines = text.split("\n")
    index = 0
    while index < len(lines) and not lines[index].strip():
        index += 1
    while index < len(lines) and lines[index].startswith("::"):
        found = _marker(lines[index].rstrip("\r"))
        if found is None:
            raise InvalidInput(
                "MALFORMED_MARKER",
                f"line {index + 1} is not a valid marker: use '::workflow NAME' or '::task NAME'",
                {"line": index + 1},
            )
        key, value = found
        if key in markers:
            raise InvalidInput(
                "MALFORMED_MARKER", f"'::{key}' is given twice", {"line": index + 1, "key": key}
            )
        markers[key] = value
        index += 1
    first = next((line.strip() for line in lines[index:] if line.strip()), "")
    return Prompt(markers=markers, first_line=first)


def _marker(line: str) -> tuple[str, str] | None:
    """``(key, name)`` when ``line`` is ``::(workflow|task) +NAME *`` (string methods, not
    ``re``: hooks parse every prompt)."""
    for key in MARKER_KEYS:
        head = f"::{key} "
        if line.startswith(head):
            name = line[len(head) :].strip(" ")
            return (key, name) if is_name(name) else None
    return None
