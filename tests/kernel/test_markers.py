"""Prompt markers at the start of a prompt."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import markers
from ithaca.kernel.errors import InvalidInput


def test_markers_at_the_start_are_read_and_the_first_real_line_kept():
    prompt = markers.parse("\n\n::workflow debugging\n::task release-2\nFix the flaky test\nmore")
    assert prompt.markers == {"workflow": "debugging", "task": "release-2"}
    assert prompt.first_line == "Fix the flaky test"


def test_markers_after_the_first_real_line_are_ignored():
    prompt = markers.parse("Fix it\n::workflow debugging")
    assert prompt.markers == {}
    assert prompt.first_line == "Fix it"


def test_default_is_a_marker_value():
    assert markers.parse("::workflow default\nhi").markers == {"workflow": "default"}


@pytest.mark.parametrize(
    "text",
    [
        "::workflow\nhi",
        "::workflow Coding\nhi",
        "::flow coding\nhi",
        "::workflow a b\nhi",
        "::workflow coding\n::workflow chat\nhi",
    ],
)
def test_a_malformed_or_repeated_marker_is_refused(text):
    with pytest.raises(InvalidInput) as raised:
        markers.parse(text)
    assert raised.value.code == "MALFORMED_MARKER"


MARKER_PATTERN = r"::(workflow|task) +([a-z][a-z0-9._-]{0,63}) *"
marker_lines = st.lists(
    st.sampled_from(["workflow", "task", "tasks", " ", "  ", "a", "Z", "0", ".", "_", "\t", "é"]),
    max_size=6,
).map(lambda pieces: "::" + "".join(pieces))


@given(
    marker_lines
    | st.text(st.characters(blacklist_characters="\r\n"), max_size=8).map(lambda text: "::" + text)
)
def test_a_marker_line_is_read_exactly_as_its_pattern_says(line):
    expected = re.fullmatch(MARKER_PATTERN, line)
    try:
        prompt = markers.parse(line + "\nthe prompt")
    except InvalidInput as error:
        assert error.code == "MALFORMED_MARKER"
        assert expected is None
    else:
        assert expected is not None
        key, value = expected.groups()
        assert prompt.markers == {key: value}
