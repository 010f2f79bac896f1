"""The hook path's word splitter gives ``shlex.split``'s words and errors."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import shellwords

lines = st.text(alphabet=" \t\r\n'\"\\ab$#é", max_size=14)


def outcome(function, text):
    try:
        return ("words", function(text))
    except ValueError as exc:
        return ("error", str(exc))


@given(lines)
def test_any_line_splits_as_shlex_splits_it(text):
    assert outcome(shellwords.split, text) == outcome(shlex.split, text)


@pytest.mark.parametrize(
    "text",
    [
        "git push --force",
        "npm  publish\t--tag 'next one'",
        "''",
        "a '' b",
        '"a\\"b" c\\ d',
        "\"\\x\" '\\x'",
        "a\\\nb",
        "'unclosed",
        "ends with \\",
        "",
    ],
)
def test_examples_split_as_shlex_splits_them(text):
    assert outcome(shellwords.split, text) == outcome(shlex.split, text)


def test_splitting_imports_neither_shlex_nor_re():
    probe = (
        "import sys\n"
        "from ithaca.kernel.shellwords import split\n"
        "assert split(\"git push '--force'\") == ['git', 'push', '--force']\n"
        "print(sorted({'re', 'shlex'} & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}\n{probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
