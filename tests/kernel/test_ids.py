from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import ids

CROCKFORD_CHAR = "[0-9A-HJKMNP-TV-Z]"
ULID_MAX_MS = 2**48 - 1


def test_new_id_is_prefix_underscore_and_26_crockford_chars() -> None:
    value = ids.new("evt")

    assert re.fullmatch(f"evt_{CROCKFORD_CHAR}{{26}}", value)
    assert ids.matches("evt", value)


def test_matches_rejects_other_prefixes_and_malformed_values() -> None:
    value = ids.new("evt")

    assert not ids.matches("apr", value)
    assert not ids.matches("evt", value[:-1])
    assert not ids.matches("evt", value + "0")
    assert not ids.matches("evt", value[:-1] + "U")
    assert not ids.matches("evt", value.lower())
    assert not ids.matches("evt", None)


@given(
    st.integers(min_value=0, max_value=ULID_MAX_MS - 1),
    st.integers(min_value=1, max_value=ULID_MAX_MS),
)
def test_an_id_made_later_sorts_after_an_earlier_one(earlier: int, gap: int) -> None:
    later = min(earlier + gap, ULID_MAX_MS)

    assert ids.ulid(earlier) < ids.ulid(later)


def test_ulid_time_part_encodes_the_milliseconds() -> None:
    assert ids.ulid(0)[:10] == "0000000000"
    assert ids.ulid(ULID_MAX_MS)[:10] == "7ZZZZZZZZZ"
    assert ids.ulid(1_700_000_000_000)[:10] == "01HF7YAT00"


def test_ten_thousand_ids_in_the_same_millisecond_are_distinct() -> None:
    made = {ids.ulid(1_700_000_000_000) for _ in range(10_000)}

    assert len(made) == 10_000


def test_ten_thousand_new_ids_are_distinct() -> None:
    assert len({ids.new("evt") for _ in range(10_000)}) == 10_000


def test_derived_ids_agree_for_the_same_seed_and_differ_for_another():
    first = ids.derived("apr", "session\naction\n0")
    assert re.fullmatch(f"apr_{CROCKFORD_CHAR}{{8}}", first)
    assert ids.derived("apr", "session\naction\n0") == first
    assert ids.derived("apr", "session\naction\n1") != first


@given(st.text(alphabet="aZ09_-é\n. ", max_size=205) | st.text(max_size=3))
def test_session_ids_are_checked_as_their_pattern_says(value: str) -> None:
    expected = re.fullmatch(r"[A-Za-z0-9_-]{1,200}", value) is not None

    assert ids.is_session_id(value) is expected


@given(
    st.sampled_from(["evt", "apr", "ev"]),
    st.text(alphabet="0AHJZILOUaz_\n", min_size=24, max_size=28),
)
def test_ids_are_matched_as_their_pattern_says(prefix: str, tail: str) -> None:
    value = f"evt_{tail}"

    expected = re.fullmatch(f"{prefix}_{CROCKFORD_CHAR}{{26}}", value) is not None
    assert ids.matches(prefix, value) is expected
