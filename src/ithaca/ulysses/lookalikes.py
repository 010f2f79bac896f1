"""Texts compared by what they look like: the UTS #39 confusable skeleton.

A failed move must not come back as the same words with one letter swapped for a
look-alike from another script (Cyrillic ``а`` for Latin ``a``, Greek ``ο`` for ``o``).
Unicode's confusables data maps every such character to a prototype; two texts look the
same when their skeletons are equal. ICU's spoof checker implements it and ships with
that data, so the mapping follows Unicode's releases without a table of our own. The
skeleton is a key for comparing, never a text to show (``rn`` and ``m`` share one).

ICU is loaded on first use: nothing on a hook's path compares moves.
"""

from __future__ import annotations

from typing import Any

_checker: Any = None


def skeleton(text: str) -> str:
    """The UTS #39 skeleton of ``text`` (ICU's ``SpoofChecker.getSkeleton``)."""
    global _checker
    if _checker is None:
        import icu

        _checker = icu.SpoofChecker()
    return str(_checker.getSkeleton(0, text))  # 0: the one skeleton type UTS #39 defines
