"""The hook path's glob matcher answers exactly as ``fnmatch.fnmatchcase``."""

from __future__ import annotations

import subprocess
import sys
from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import globmatch

# A small alphabet, so that names and patterns share characters and often match.
names = st.text(alphabet="ab./\n-é", max_size=8)
patterns = st.text(alphabet="ab./\n-é**?[]!", max_size=8)
star_patterns = st.text(alphabet="ab./\n-é***", max_size=8)


@given(names, patterns)
def test_any_pattern_matches_as_fnmatch_does(name, pattern):
    assert globmatch.fnmatchcase(name, pattern) == fnmatchcase(name, pattern)


@given(names, star_patterns)
def test_literal_and_star_patterns_match_as_fnmatch_does(name, pattern):
    assert globmatch.fnmatchcase(name, pattern) == fnmatchcase(name, pattern)


@pytest.mark.parametrize(
    ("name", "pattern", "expected"),
    [
        ("Bash", "Bash", True),
        ("bash", "Bash", False),
        ("mcp__github__create_issue", "mcp__github__*", True),
        ("secrets/a.key", "*.key", True),
        ("a.key.bak", "*.key", False),
        ("aba", "a*ba", True),  # the head and the tail must not overlap
        ("ab", "ab*b", False),
        ("a/b/c", "a*c", True),  # a star crosses slashes, as in fnmatch
        ("", "*", True),
        ("abc", "a**c", True),
        ("x1", "x?", True),
        ("xy", "x[!y]", False),
    ],
)
def test_examples(name, pattern, expected):
    assert globmatch.fnmatchcase(name, pattern) is expected


def test_literal_and_star_patterns_do_not_import_re():
    probe = (
        "import sys\n"
        "from ithaca.kernel.globmatch import fnmatchcase\n"
        "assert fnmatchcase('src/app.py', '*.py') and not fnmatchcase('Bash', 'Edit')\n"
        "print('re' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}\n{probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "False"
