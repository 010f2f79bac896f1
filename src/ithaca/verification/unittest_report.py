"""Run a project's unittest suite as ``python -m unittest`` would, and write a report.

Usage: ``python unittest_report.py REPORT_PATH [unittest arguments]``. The arguments are
those of ``python -m unittest`` (none: discover ``test*.py`` from the current folder;
``discover -s tests``; test names). The suite runs with a result that records each test's
id (``test.id()``) and outcome, and the report is JSON: ``{"schema":
"ithaca.unittest-report/1", "tests": [{"id", "outcome"}], "testsRun"}``, outcome one of
passed, failed, error, skipped, expected_failure, unexpected_success.

Exit status: 0 when every test succeeded and at least one ran (not skipped), 5 when no
test ran (as pytest, and unittest from Python 3.12), 1 otherwise, 2 for bad arguments.

Ithaca runs it from a copy in the sandbox, by path, so Python puts the script's folder
first on ``sys.path``; like ``python -m``, the current folder takes that place. Standard
library only: it runs under the project's interpreter.
"""

from __future__ import annotations

import json
import os
import sys
import unittest
from typing import Any

SCHEMA = "ithaca.unittest-report/1"
NO_TESTS = 5


class RecordingResult(unittest.TextTestResult):
    """A text result that also records every test's id and outcome."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.outcomes: list[tuple[str, str]] = []

    def _record(self, test: Any, outcome: str) -> None:
        self.outcomes.append((test.id(), outcome))

    def addSuccess(self, test: Any) -> None:  # noqa: N802
        super().addSuccess(test)
        self._record(test, "passed")

    def addFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        super().addFailure(test, err)
        self._record(test, "failed")

    def addError(self, test: Any, err: Any) -> None:  # noqa: N802
        super().addError(test, err)
        self._record(test, "error")

    def addSkip(self, test: Any, reason: str) -> None:  # noqa: N802
        super().addSkip(test, reason)
        self._record(test, "skipped")

    def addExpectedFailure(self, test: Any, err: Any) -> None:  # noqa: N802
        super().addExpectedFailure(test, err)
        self._record(test, "expected_failure")

    def addUnexpectedSuccess(self, test: Any) -> None:  # noqa: N802
        super().addUnexpectedSuccess(test)
        self._record(test, "unexpected_success")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:  # noqa: N802
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._record(subtest, "failed" if failed else "error")


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        sys.stderr.write("usage: unittest_report.py REPORT_PATH [unittest arguments]\n")
        return 2
    report_path, arguments = argv[1], argv[2:]
    sys.path[0] = os.getcwd()  # as ``python -m unittest``: the current folder, not ours
    runner = unittest.TextTestRunner(resultclass=RecordingResult, verbosity=2)
    program = unittest.main(
        module=None, argv=["python -m unittest", *arguments], testRunner=runner, exit=False
    )
    result = program.result
    assert isinstance(result, RecordingResult)
    tests = [{"id": test_id, "outcome": outcome} for test_id, outcome in result.outcomes]
    with open(report_path, "w", encoding="utf-8") as handle:
        json.dump({"schema": SCHEMA, "tests": tests, "testsRun": result.testsRun}, handle)
    ran = [entry for entry in tests if entry["outcome"] != "skipped"]
    if not ran:
        return NO_TESTS
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
