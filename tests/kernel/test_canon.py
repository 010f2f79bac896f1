from __future__ import annotations

import hashlib
import json
import math
import struct

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput

SAFE = 2**53 - 1

# Any code point except lone surrogates (which have no UTF-8 form): controls, astral, all.
json_text = st.text(alphabet=st.characters(blacklist_categories=["Cs"]))
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-SAFE, max_value=SAFE)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(json_text, children, max_size=5)
    ),
    max_leaves=30,
)


def _double(hex_bits: str) -> float:
    value: float = struct.unpack(">d", bytes.fromhex(hex_bits))[0]
    return value


@given(json_values)
def test_canonical_bytes_match_the_rfc8785_reference_implementation(value) -> None:
    assert canon.canonical(value) == rfc8785.dumps(value)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_finite_double_serialises_like_the_reference(number: float) -> None:
    assert canon.canonical(number) == rfc8785.dumps(number)


@given(json_values)
def test_canonical_text_parses_back_to_an_equal_value(value) -> None:
    # JSON has one number type; large floats print without a fraction, so read ints as floats.
    assert json.loads(canon.canonical_text(value), parse_int=float) == value


# RFC 8785 Appendix B: IEEE 754 bit patterns and their required serialisation.
@pytest.mark.parametrize(
    ("bits", "expected"),
    [
        ("0000000000000000", "0"),
        ("8000000000000000", "0"),
        ("0000000000000001", "5e-324"),
        ("8000000000000001", "-5e-324"),
        ("7fefffffffffffff", "1.7976931348623157e+308"),
        ("ffefffffffffffff", "-1.7976931348623157e+308"),
        ("4340000000000000", "9007199254740992"),
        ("c340000000000000", "-9007199254740992"),
        ("4430000000000000", "295147905179352830000"),
        ("44b52d02c7e14af5", "9.999999999999997e+22"),
        ("44b52d02c7e14af6", "1e+23"),
        ("44b52d02c7e14af7", "1.0000000000000001e+23"),
        ("444b1ae4d6e2ef4e", "999999999999999700000"),
        ("444b1ae4d6e2ef4f", "999999999999999900000"),
        ("444b1ae4d6e2ef50", "1e+21"),
        ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"),
        ("3eb0c6f7a0b5ed8d", "0.000001"),
        ("41b3de4355555553", "333333333.3333332"),
        ("41b3de4355555554", "333333333.33333325"),
        ("41b3de4355555555", "333333333.3333333"),
        ("41b3de4355555556", "333333333.3333334"),
        ("41b3de4355555557", "333333333.33333343"),
        ("becbf647612f3696", "-0.0000033333333333333333"),
        ("43143ff3c1cb0959", "1424953923781206.2"),
    ],
)
def test_numbers_serialise_as_in_rfc8785_appendix_b(bits: str, expected: str) -> None:
    assert canon.canonical_text(_double(bits)) == expected


@pytest.mark.parametrize(
    ("number", "expected"),
    [
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-7, "1e-7"),
        (1e-6, "0.000001"),
        (333333333.3333333, "333333333.3333333"),
        (-0.0, "0"),
        (4.50, "4.5"),
        (2.0, "2"),
        (1e30, "1e+30"),
    ],
)
def test_familiar_numbers_take_their_ecmascript_form(number: float, expected: str) -> None:
    assert canon.canonical_text(number) == expected


def test_rfc8785_section_3_2_4_example_is_reproduced() -> None:
    value = {
        "numbers": [333333333.33333329, 1e30, 4.50, 2e-3, 0.000000000000000000000000001],
        "string": "\u20ac$\u000f\u000aA'\u0042\u0022\u005c\\\"/",
        "literals": [None, True, False],
    }

    assert canon.canonical(value) == (
        b'{"literals":[null,true,false],'
        b'"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        b'"string":"\xe2\x82\xac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    )


def test_rfc8785_section_3_2_3_key_order_is_reproduced() -> None:
    value = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }

    keys = list(json.loads(canon.canonical(value)))

    assert keys == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_astral_key_sorts_before_u_ffff_by_utf16_code_units() -> None:
    # By code point U+1F600 > U+FFFF; in UTF-16 it starts with the surrogate 0xD83D < 0xFFFF.
    text = canon.canonical_text({"\uffff": 1, "\U0001f600": 2})

    assert text == '{"\U0001f600":2,"\uffff":1}'


def test_control_characters_use_short_escapes_or_lowercase_hex() -> None:
    text = canon.canonical_text("\b\t\n\f\r\x00\x1f\x7f")

    assert text == '"\\b\\t\\n\\f\\r\\u0000\\u001f\x7f"'


@pytest.mark.parametrize(
    ("value", "pointer"),
    [
        (2**53, ""),
        (-(2**53), ""),
        ({"a": [1, 2**53]}, "/a/1"),
        ({"a/b~c": math.nan}, "/a~1b~0c"),
        ([math.inf], "/0"),
        ({"x": {"y": -math.inf}}, "/x/y"),
    ],
)
def test_out_of_range_numbers_are_refused_with_their_pointer(value, pointer: str) -> None:
    with pytest.raises(InvalidInput) as excinfo:
        canon.canonical(value)

    assert excinfo.value.code == "INVALID_INPUT"
    assert excinfo.value.details == {"pointer": pointer, "problem": "NUMBER_OUT_OF_RANGE"}


def test_largest_safe_integers_are_accepted() -> None:
    assert canon.canonical([SAFE, -SAFE]) == f"[{SAFE},{-SAFE}]".encode()


@pytest.mark.parametrize(
    ("value", "problem"),
    [({1: "x"}, "INVALID_KEY"), ({"a": {1, 2}}, "INVALID_TYPE"), ("\ud800", "INVALID_STRING")],
)
def test_values_without_a_json_form_are_invalid_input(value, problem: str) -> None:
    with pytest.raises(InvalidInput) as excinfo:
        canon.canonical(value)

    assert excinfo.value.details["problem"] == problem


@given(json_values)
def test_digest_is_sha256_of_the_canonical_bytes(value) -> None:
    assert canon.digest(value) == hashlib.sha256(rfc8785.dumps(value)).hexdigest()


def test_digest_ignores_key_insertion_order() -> None:
    assert canon.digest({"a": 1, "b": [1.0, "x"]}) == canon.digest({"b": [1, "x"], "a": 1})


def test_digest_bytes_is_sha256_of_the_raw_bytes() -> None:
    assert canon.digest_bytes(b"abc") == hashlib.sha256(b"abc").hexdigest()


def test_digest_excluding_lets_an_object_carry_its_own_digest() -> None:
    record = {"id": "rec_1", "body": {"n": 1}}
    sealed = {**record, "digest": canon.digest(record)}

    assert canon.digest_excluding(sealed, "digest") == sealed["digest"]
    assert canon.digest_excluding({**sealed, "body": {"n": 2}}, "digest") != sealed["digest"]
    assert canon.digest_excluding(record, "absent") == canon.digest(record)


def test_a_lone_surrogate_is_reported_where_it_sits():
    with pytest.raises(InvalidInput) as raised:
        canon.canonical({"a": ["fine", "\ud800"]})
    assert raised.value.details == {"pointer": "/a/1", "problem": "INVALID_STRING"}


def test_large_and_small_inputs_get_the_same_sha256_as_hashlib():
    import hashlib

    from ithaca.kernel.canon import LARGE_INPUT, digest_bytes

    for size in (0, 1, LARGE_INPUT - 1, LARGE_INPUT, 3 * LARGE_INPUT + 5):
        data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
        assert digest_bytes(data) == hashlib.sha256(data).hexdigest()
