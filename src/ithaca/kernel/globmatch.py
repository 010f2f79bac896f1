"""``fnmatch.fnmatchcase`` for hook processes, without ``re`` for the common patterns.

``fnmatch`` translates every pattern into a regular expression, so the first match in a
process imports ``re`` (with ``enum`` and the compiler), a large share of a hook's start.
Most patterns hooks see are literal (``src``, ``Bash``) or use only ``*`` (``*.key``,
``mcp__github__*``); those are matched here with string methods, with the same result.
A pattern with ``?`` or a ``[…]`` set goes to ``fnmatch`` itself.
"""

from __future__ import annotations


def fnmatchcase(name: str, pattern: str) -> bool:
    """Whether ``name`` matches the shell-style ``pattern`` (case-sensitive)."""
    if "?" in pattern or "[" in pattern:
        from fnmatch import fnmatchcase as with_regex

        return with_regex(name, pattern)
    if "*" not in pattern:
        return name == pattern
    head, *middle, tail = pattern.split("*")
    if len(name) < len(head) + len(tail) or not (name.startswith(head) and name.endswith(tail)):
        return False
    # ``*`` matches any run of characters, so the pieces between stars need only appear
    # in order; the leftmost place for each leaves the most room for the rest.
    position, end = len(head), len(name) - len(tail)
    for piece in middle:
        found = name.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True
