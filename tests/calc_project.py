"""A small real unittest project, ``calc.py`` and its two tests, for the tests of Ithaca's
own verification runs and the end-of-turn critic."""

from __future__ import annotations

from pathlib import Path

CALC = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a - b\n"  # fails test_small
TESTS = """\
import unittest

from calc import add


class AddTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(add(1, 2), 3)

    def test_zero(self):
        self.assertEqual(add(0, 0), 0)
"""
ONE_TEST = TESTS.split("    def test_zero")[0]  # test_zero dropped


def lay_calc(root: Path, calc: str = CALC) -> Path:
    """``calc.py`` (as ``calc``) and ``test_calc.py`` in ``root``; returns ``root``."""
    (root / "calc.py").write_text(calc)
    (root / "test_calc.py").write_text(TESTS)
    return root
