"""The hook path's JSON reader and writer agree with ``json`` on every input, good or bad."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import lightjson

keys = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=25,
)
# Pieces of JSON and of things that look like it, so that random documents are often
# nearly right: trailing data, bad numbers, unterminated strings, bare constants.
fragments = st.sampled_from(
    [
        "{", "}", "[", "]", ",", ":", " ", "\n", "\t", "\r", "\ufeff", "\x01", '"', '"a"',
        '"\\u00e9"', '"\\ud83d\\ude00"', '"\\ud800"', '"\\x"', "\\", "0", "-", "1", "01", "1.",
        ".5", "2.5e3", "1E+2", "-0", "true", "false", "null", "nul", "NaN", "Infinity",
        "-Infinity", "nan", "é", "😀",
    ]
)  # fmt: skip
documents = st.lists(fragments, max_size=12).map("".join) | st.text(max_size=20)


def outcome(function, *args, **kwargs):
    """A comparable account of a call: its result, or its error's type and message."""
    try:
        return ("value", _comparable(function(*args, **kwargs)))
    except Exception as exc:
        return ("error", type(exc), str(exc))


def _comparable(value):
    """``value`` with floats tagged by type and NaN made equal to itself."""
    if isinstance(value, float):
        return ("float", "nan" if math.isnan(value) else value)
    if isinstance(value, list):
        return [_comparable(item) for item in value]
    if isinstance(value, dict):
        return [(key, _comparable(item)) for key, item in value.items()]
    return (type(value).__name__, value)


@given(values, st.booleans(), st.sampled_from([None, (",", ":"), (", ", ": ")]), st.booleans())
def test_writing_gives_the_text_json_gives(value, ensure_ascii, separators, sort_keys):
    options = {"ensure_ascii": ensure_ascii, "separators": separators, "sort_keys": sort_keys}
    assert outcome(lightjson.dumps, value, **options) == outcome(json.dumps, value, **options)


@given(values)
def test_reading_what_json_wrote_gives_what_json_reads(value):
    text = json.dumps(value)
    assert outcome(lightjson.loads, text) == outcome(json.loads, text)
    assert outcome(lightjson.loads, f" \n{text}\t\r\n") == outcome(json.loads, f" \n{text}\t\r\n")


@given(documents)
def test_any_text_reads_as_json_reads_it_or_fails_as_json_fails(text):
    assert outcome(lightjson.loads, text) == outcome(json.loads, text)


@pytest.mark.parametrize(
    "text",
    [
        "1 2",  # trailing data
        "[1] x",
        "{} {}",
        "\ufeff{}",  # a byte-order mark
        "",
        "   ",
        '"a\x01b"',  # a control character inside a string (strict)
        "[1,]",
        '{"a": 1,}',
        "NaN",
        "[Infinity, -Infinity, NaN]",
        "-",
        "1e400",
        "123456789012345678901234567890",
        "[" * 100_000,  # deeper than the recursion limit
    ],
)
def test_edge_cases_match_json(text):
    assert outcome(lightjson.loads, text) == outcome(json.loads, text)


def test_input_that_is_not_text_is_read_or_refused_as_json_does():
    assert lightjson.loads(b'{"a": [1]}') == {"a": [1]}
    assert outcome(lightjson.loads, None) == outcome(json.loads, None)


def test_values_without_a_json_form_are_refused_as_json_refuses_them() -> None:
    looped: list[object] = []
    looped.append(looped)
    for value in (object(), {1, 2}, looped, {(1, 2): 3}, {"a": 1, 2: "b"}):
        for sort_keys in (False, True):
            assert outcome(lightjson.dumps, value, sort_keys=sort_keys) == outcome(
                json.dumps, value, sort_keys=sort_keys
            )
    assert lightjson.dumps([math.nan, math.inf, -math.inf]) == "[NaN, Infinity, -Infinity]"


def test_reading_and_writing_import_neither_json_nor_re():
    probe = (
        "import sys\n"
        "from ithaca.kernel import lightjson\n"
        "text = lightjson.dumps({'a': [1, 2.5, None, True, 'é']}, ensure_ascii=False)\n"
        "assert lightjson.loads(text) == {'a': [1, 2.5, None, True, 'é']}\n"
        "print(sorted({'json', 're'} & set(sys.modules)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", f"import sys; sys.path[:0] = {sys.path!r}\n{probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]"
