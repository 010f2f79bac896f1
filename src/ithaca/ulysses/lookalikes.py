"""Texts compared by what they look like: invisible characters folded, then the UTS #39
confusable skeleton.

A failed move must not come back as the same words with one letter swapped for a
look-alike from another script (Cyrillic ``а`` for Latin ``a``, Greek ``ο`` for ``o``).
Unicode's confusables data maps every such character to a prototype; two texts look the
same when their skeletons are equal. ICU's spoof checker implements it and ships with
that data, so the mapping follows Unicode's releases without a table of our own. The
skeleton is a key for comparing, never a text to show (``rn`` and ``m`` share one).

Nor may it come back with characters that draw nothing (a zero-width space inside a
word, a variation selector after a letter, tag characters, a bidi override) or with a
blank that only looks like a space (a braille blank, an ideographic space). Before the
skeleton, ``fold_invisible`` removes the first kind and turns the second into a plain
space, which the caller then collapses like any other whitespace. The first kind is
Unicode's ``Default_Ignorable_Code_Point`` property (and the interlinear annotation
marks); Python's ``unicodedata`` does not expose the property, so it is a table below.
The ICU installed today (77) drops the same characters inside its skeleton; the table
keeps the fold from depending on the ICU build.

ICU is loaded on first use: nothing on a hook's path compares moves.
"""

from __future__ import annotations

from typing import Any

# Default_Ignorable_Code_Point, as DerivedCoreProperties.txt of Unicode 16.0.0 lists it
# (the same code points since Unicode 14.0.0). One row per line of that file:
# (first, last, General_Category). The Cn rows are unassigned code points that Unicode
# keeps for future characters of this kind. These are removed.
DEFAULT_IGNORABLE = (
    (0x00AD, 0x00AD, "Cf"),  # SOFT HYPHEN
    (0x034F, 0x034F, "Mn"),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C, "Cf"),  # ARABIC LETTER MARK
    (0x115F, 0x1160, "Lo"),  # HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5, "Mn"),  # KHMER VOWEL INHERENT AQ, KHMER VOWEL INHERENT AA
    (0x180B, 0x180D, "Mn"),  # MONGOLIAN FREE VARIATION SELECTOR ONE..THREE
    (0x180E, 0x180E, "Cf"),  # MONGOLIAN VOWEL SEPARATOR
    (0x180F, 0x180F, "Mn"),  # MONGOLIAN FREE VARIATION SELECTOR FOUR
    (0x200B, 0x200F, "Cf"),  # ZERO WIDTH SPACE, ZWNJ, ZWJ, LEFT-TO-RIGHT and RIGHT-TO-LEFT MARK
    (0x202A, 0x202E, "Cf"),  # bidi embeddings and overrides, LRE..RLO
    (0x2060, 0x2064, "Cf"),  # WORD JOINER and the invisible operators
    (0x2065, 0x2065, "Cn"),
    (0x2066, 0x206F, "Cf"),  # bidi isolates LRI..PDI, deprecated format characters
    (0x3164, 0x3164, "Lo"),  # HANGUL FILLER
    (0xFE00, 0xFE0F, "Mn"),  # VARIATION SELECTOR-1..16
    (0xFEFF, 0xFEFF, "Cf"),  # ZERO WIDTH NO-BREAK SPACE (the byte order mark)
    (0xFFA0, 0xFFA0, "Lo"),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8, "Cn"),
    (0x1BCA0, 0x1BCA3, "Cf"),  # SHORTHAND FORMAT LETTER OVERLAP..UP STEP
    (0x1D173, 0x1D17A, "Cf"),  # MUSICAL SYMBOL BEGIN BEAM..END PHRASE
    (0xE0000, 0xE0000, "Cn"),
    (0xE0001, 0xE0001, "Cf"),  # LANGUAGE TAG
    (0xE0002, 0xE001F, "Cn"),
    (0xE0020, 0xE007F, "Cf"),  # TAG SPACE..CANCEL TAG
    (0xE0080, 0xE00FF, "Cn"),
    (0xE0100, 0xE01EF, "Mn"),  # VARIATION SELECTOR-17..256
    (0xE01F0, 0xE0FFF, "Cn"),
)

# Format characters outside that property that draw nothing either: the interlinear
# annotation marks. A display that ignores them shows the text between them, so only the
# marks are removed.
UNDRAWN = ((0xFFF9, 0xFFFB, "Cf"),)  # INTERLINEAR ANNOTATION ANCHOR..TERMINATOR

# Blanks that stand where a space would: every Space_Separator but U+0020 itself (NFKC
# already turns most of them into U+0020, but not OGHAM SPACE MARK), and BRAILLE PATTERN
# BLANK, an empty braille cell that is no space to Unicode and is not default-ignorable.
# Each becomes U+0020.
BLANKS = (
    (0x00A0, 0x00A0, "Zs"),  # NO-BREAK SPACE
    (0x1680, 0x1680, "Zs"),  # OGHAM SPACE MARK
    (0x2000, 0x200A, "Zs"),  # EN QUAD..HAIR SPACE
    (0x202F, 0x202F, "Zs"),  # NARROW NO-BREAK SPACE
    (0x205F, 0x205F, "Zs"),  # MEDIUM MATHEMATICAL SPACE
    (0x2800, 0x2800, "So"),  # BRAILLE PATTERN BLANK
    (0x3000, 0x3000, "Zs"),  # IDEOGRAPHIC SPACE
)


_fold: dict[int, str | None] | None = None  # for str.translate, built on first use
_checker: Any = None


def _fold_table() -> dict[int, str | None]:
    table: dict[int, str | None] = {}
    for first, last, _ in (*DEFAULT_IGNORABLE, *UNDRAWN):
        table.update(dict.fromkeys(range(first, last + 1)))
    for first, last, _ in BLANKS:
        table.update(dict.fromkeys(range(first, last + 1), " "))
    return table


def fold_invisible(text: str) -> str:
    """``text`` without the characters that draw nothing, and with a plain space for each
    blank that imitates one."""
    global _fold
    if text.isascii():  # none of them is ASCII
        return text
    if _fold is None:
        _fold = _fold_table()  # built whole, then published: no thread sees half a table
    return text.translate(_fold)


def skeleton(text: str) -> str:
    """The UTS #39 skeleton of ``text`` (ICU's ``SpoofChecker.getSkeleton``), taken after
    ``fold_invisible``."""
    global _checker
    if _checker is None:
        import icu

        _checker = icu.SpoofChecker()
    # 0: the one skeleton type UTS #39 defines
    return str(_checker.getSkeleton(0, fold_invisible(text)))
