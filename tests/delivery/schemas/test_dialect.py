"""The schema dialect's checker: strictness, normal forms and the shape choice of oneOf."""

from __future__ import annotations

from typing import Any

import pytest

from ithaca.delivery.schemas import ids
from ithaca.delivery.schemas.dialect import (
    array,
    check,
    merge_patch_of,
    obj,
    string_set,
    text,
)
from ithaca.delivery.schemas.record import SCOPE
from ithaca.kernel.errors import InvalidInput

BODY = obj(
    {"title": text(10), "limits": obj({"n": {"type": "integer", "minimum": 1}})},
    {"tags": string_set(text(5), 3), "items": array(text(3), 2, default=[])},
)


def problem(schema: dict[str, Any], value: Any) -> tuple[str, str]:
    with pytest.raises(InvalidInput) as caught:
        check(schema, value)
    assert caught.value.code == "VALIDATION_ERROR"
    return caught.value.details["pointer"], caught.value.details["problem"]


def test_values_come_back_normalised() -> None:
    checked = check(BODY, {"title": "t", "limits": {"n": 2}, "tags": ["b", "a", "b"]})
    assert checked == {"title": "t", "limits": {"n": 2}, "tags": ["a", "b"], "items": []}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"limits": {"n": 1}}, ("/title", "MISSING_FIELD")),
        ({"title": "t", "limits": {"n": 1}, "x": 1}, ("/x", "UNKNOWN_FIELD")),
        ({"title": "t", "limits": {"n": True}}, ("/limits/n", "WRONG_TYPE")),
        ({"title": "t", "limits": {"n": 0}}, ("/limits/n", "OUT_OF_RANGE")),
        ({"title": "x" * 11, "limits": {"n": 1}}, ("/title", "TOO_LONG")),
        ({"title": "", "limits": {"n": 1}}, ("/title", "TOO_SHORT")),
        (
            {"title": "t", "limits": {"n": 1}, "items": ["a", "b", "c"]},
            ("/items", "TOO_MANY_ITEMS"),
        ),
        ({"title": "t", "limits": {"n": 1}, "tags": ["toolong"]}, ("/tags/0", "TOO_LONG")),
    ],
)
def test_violations_name_the_field(value: dict[str, Any], expected: tuple[str, str]) -> None:
    assert problem(BODY, value) == expected


def test_patterns_match_the_whole_string() -> None:
    assert check(ids.CHANGE_ID, "add-login") == "add-login"
    assert problem(ids.CHANGE_ID, "add-login\n") == ("", "WRONG_FORMAT")


def test_one_of_picks_the_shape_by_its_required_fields() -> None:
    assert check(SCOPE, {"baseline": True}) == {"baseline": True}
    assert check(SCOPE, {"change_id": "add-login"}) == {"change_id": "add-login"}
    assert problem(SCOPE, {"baseline": 1}) == ("/baseline", "NOT_ALLOWED")
    assert problem(SCOPE, {}) == ("", "NO_MATCHING_SHAPE")
    assert problem(SCOPE, {"baseline": True, "change_id": "x1"})[1] == "UNKNOWN_FIELD"


def test_a_merge_patch_schema_makes_fields_optional_and_nullable_but_stays_strict() -> None:
    patch = merge_patch_of(BODY)
    assert check(patch, {}) == {}
    assert check(patch, {"title": None, "limits": {"n": None}}) == {
        "title": None,
        "limits": {"n": None},
    }
    assert problem(patch, {"limits": {"m": 1}}) == ("/limits/m", "UNKNOWN_FIELD")
