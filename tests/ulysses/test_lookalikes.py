"""The invisible-character fold before the confusable skeleton: its tables are Unicode's."""

from __future__ import annotations

import unicodedata

import icu
import pytest

from ithaca.ulysses import lookalikes, session

Rows = tuple[tuple[int, int, str], ...]


def code_points(rows: Rows) -> set[int]:
    return {point for first, last, _ in rows for point in range(first, last + 1)}


def test_the_removed_characters_are_unicodes_default_ignorable_code_points() -> None:
    # ICU carries the property that Python's unicodedata lacks.
    property_ = icu.UnicodeSet("[:Default_Ignorable_Code_Point:]")
    expected = {
        point
        for index in range(property_.getRangeCount())
        for point in range(
            ord(property_.getRangeStart(index)), ord(property_.getRangeEnd(index)) + 1
        )
    }
    assert code_points(lookalikes.DEFAULT_IGNORABLE) == expected, (
        f"Default_Ignorable_Code_Point changed in Unicode {icu.UNICODE_VERSION}: update the table"
    )


@pytest.mark.parametrize(
    "rows",
    [lookalikes.DEFAULT_IGNORABLE, lookalikes.UNDRAWN, lookalikes.BLANKS],
    ids=["default_ignorable", "undrawn", "blanks"],
)
def test_every_row_holds_the_general_category_it_names(rows: Rows) -> None:
    for first, last, category in rows:
        for point in range(first, last + 1):
            assert unicodedata.category(chr(point)) == category, f"U+{point:04X}"


def test_each_folded_character_is_a_format_mark_filler_or_space() -> None:
    for point in code_points(lookalikes.DEFAULT_IGNORABLE):
        char = chr(point)
        category = unicodedata.category(char)
        # Cn: unassigned, kept by Unicode for future ignorable characters
        assert category in ("Cf", "Mn", "Cn") or (
            category == "Lo" and unicodedata.name(char).endswith(" FILLER")
        ), f"U+{point:04X} {category}"
    for point in code_points(lookalikes.UNDRAWN):
        assert unicodedata.name(chr(point)).startswith("INTERLINEAR ANNOTATION ")
    for point in code_points(lookalikes.BLANKS):
        char = chr(point)
        assert unicodedata.category(char) == "Zs" or unicodedata.name(char) == (
            "BRAILLE PATTERN BLANK"
        ), f"U+{point:04X}"


def test_every_space_separator_but_the_space_itself_is_a_blank() -> None:
    separators = {
        point for point in range(0x110000) if unicodedata.category(chr(point)) == "Zs"
    } - {0x20}
    blanks = {point for point in code_points(lookalikes.BLANKS) if chr(point).isspace()}
    assert blanks == separators


def test_the_fold_removes_what_draws_nothing_and_spaces_the_blanks() -> None:
    # The fold alone, whatever the installed ICU does inside its skeleton.
    undrawn = code_points(lookalikes.DEFAULT_IGNORABLE) | code_points(lookalikes.UNDRAWN)
    assert lookalikes.fold_invisible("a" + "".join(map(chr, sorted(undrawn))) + "b") == "ab"
    for point in code_points(lookalikes.BLANKS):
        assert lookalikes.fold_invisible(f"a{chr(point)}b") == "a b"
    assert lookalikes.fold_invisible("re\u200btry\u2800count\ufe0f") == "retry count"
    assert lookalikes.fold_invisible("plain ascii stays") == "plain ascii stays"
    assert lookalikes.fold_invisible("Крым\u3000München") == "Крым München"


def test_invisible_characters_do_not_join_or_split_different_moves() -> None:
    # A blank is a space, so it does not erase one; different words stay different.
    assert session.forbidden_key("git\u2800push") == session.forbidden_key("git push")
    assert session.forbidden_key("git\u2800push") != session.forbidden_key("gitpush")
    assert session.forbidden_key("git pu\u200bsh") != session.forbidden_key("git pull")
