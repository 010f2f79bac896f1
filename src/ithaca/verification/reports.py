"""Test counts and per-test outcomes, read from the report Ithaca asked a runner for.

A runner's printed summary is text the tests can print too ("5 passed"), so Ithaca never
reads it. It reads a file it asked the runner to write: a JUnit XML file (pytest's
``--junitxml``, which ``PYTEST_ADDOPTS`` requests from pytest however it is started), the
JSON of Ithaca's unittest reporter (``unittest_report``), or ``go test -json``'s event
stream. The report is written inside the sandbox by code the agent wrote, so it is read
as hostile input: opened without following symlinks and only as a regular file, at most
``MAX_BYTES``, and an XML file with a DOCTYPE or an entity declaration is refused (no
entity expansion, so no "billion laughs"; defusedxml is not available).

Test ids: JUnit ``<classname>::<name>`` (``<name>`` alone with no classname); unittest
``test.id()`` (``package.module.Class.test_name``); go ``<package>::<Test>``. Outcomes:
"passed", "failed", "error", "skipped" (an expected failure counts as skipped, as pytest's
JUnit writes it; an unexpected success as failed, as ``unittest`` judges it).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

MAX_BYTES = 64 * 1024 * 1024
OUTCOMES = ("passed", "failed", "error", "skipped")
COUNTS = ("collected", "passed", "failed", "errors", "skipped")
# A test's outcome when the report names it twice: the worse one stays.
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}
_UNITTEST = {
    "passed": "passed",
    "failed": "failed",
    "error": "error",
    "skipped": "skipped",
    "expected_failure": "skipped",
    "unexpected_success": "failed",
}
_DECLARATION = re.compile(rb"<!\s*(DOCTYPE|ENTITY)", re.IGNORECASE)


class ReportError(ValueError):
    """The report is missing, too large or malformed (the message says which)."""


@dataclass(frozen=True)
class Report:
    """What a report says: counts and each test's outcome."""

    counts: dict[str, int]
    tests: dict[str, str]

    @property
    def executed(self) -> int:
        """The tests that ran to an outcome (not skipped)."""
        return self.counts["passed"] + self.counts["failed"] + self.counts["errors"]


def read_bytes(path: str, max_bytes: int = MAX_BYTES) -> bytes:
    """The bytes of the report at ``path``: a regular file, not through a symlink."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise ReportError("the runner wrote no report") from exc
    except OSError as exc:
        raise ReportError(f"the report could not be opened ({exc.strerror})") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise ReportError("the report is not a regular file")
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ReportError(f"the report is larger than {max_bytes} bytes")
    return data


def parse(kind: str, data: bytes) -> Report:
    """The report of ``kind`` ("junit", "unittest" or "go-json")."""
    if kind == "junit":
        return parse_junit(data)
    if kind == "unittest":
        return parse_unittest(data)
    if kind == "go-json":
        return parse_go_json(data)
    raise ValueError(f"no report kind {kind!r}")


def parse_junit(data: bytes) -> Report:
    """A JUnit XML report: each ``<testcase>`` is one test; a ``<error>`` child makes it
    an error, ``<failure>`` failed, ``<skipped>`` skipped, none passed."""
    import xml.etree.ElementTree as ElementTree

    if _DECLARATION.search(data):
        raise ReportError("the JUnit report declares a DOCTYPE or an entity, which is refused")
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise ReportError(f"the JUnit report is not well-formed XML ({exc})") from exc
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportError(f"the JUnit report's root is <{root.tag}>, not <testsuites>")
    tests: dict[str, str] = {}
    outcomes: list[str] = []
    for case in root.iter("testcase"):
        name, classname = case.get("name") or "", case.get("classname") or ""
        test_id = f"{classname}::{name}" if classname else name
        children = {child.tag for child in case}
        if "error" in children:
            outcome = "error"
        elif "failure" in children:
            outcome = "failed"
        elif "skipped" in children:
            outcome = "skipped"
        else:
            outcome = "passed"
        outcomes.append(outcome)
        _keep(tests, test_id, outcome)
    return Report(_counts(outcomes), tests)


def parse_unittest(data: bytes) -> Report:
    """The JSON ``unittest_report`` writes: ``{"schema", "tests": [{"id", "outcome"}]}``."""
    try:
        document = json.loads(data)
    except ValueError as exc:
        raise ReportError(f"the unittest report is not JSON ({exc})") from exc
    entries = document.get("tests") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise ReportError("the unittest report has no list of tests")
    tests: dict[str, str] = {}
    outcomes: list[str] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            raise ReportError("a unittest report entry has no id")
        outcome = _UNITTEST.get(entry.get("outcome"))  # type: ignore[arg-type]
        if outcome is None:
            raise ReportError(f"a unittest report entry has the outcome {entry.get('outcome')!r}")
        outcomes.append(outcome)
        _keep(tests, entry["id"], outcome)
    return Report(_counts(outcomes), tests)


def parse_go_json(data: bytes) -> Report:
    """``go test -json`` events: the last ``pass``/``fail``/``skip`` of each test (a
    subtest is a test of its own, ``TestA/sub``); a package that failed without a test
    event (a build failure) is one error, ``<package>::[build]``."""
    tests: dict[str, str] = {}
    failed_packages: list[str] = []
    for line in data.splitlines():
        line = line.strip()
        if not line.startswith(b"{"):
            continue
        try:
            event: Any = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        action, package, test = event.get("Action"), event.get("Package"), event.get("Test")
        if action not in ("pass", "fail", "skip") or not isinstance(package, str):
            continue
        if isinstance(test, str):
            tests[f"{package}::{test}"] = {"pass": "passed", "fail": "failed"}.get(
                action, "skipped"
            )
        elif action == "fail":
            failed_packages.append(package)
    for package in failed_packages:
        if not any(test_id.startswith(f"{package}::") for test_id in tests):
            tests[f"{package}::[build]"] = "error"
    return Report(_counts(list(tests.values())), tests)


def go_output(data: bytes, limit: int) -> str:
    """The text ``go test -json`` events carry (``Output``), its last ``limit`` chars."""
    pieces: list[str] = []
    for line in data.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            pieces.append(line.decode("utf-8", "replace") + "\n")
            continue
        if isinstance(event, dict) and isinstance(event.get("Output"), str):
            pieces.append(event["Output"])
    return "".join(pieces)[-limit:]


def _keep(tests: dict[str, str], test_id: str, outcome: str) -> None:
    known = tests.get(test_id)
    if known is None or _RANK[outcome] > _RANK[known]:
        tests[test_id] = outcome


def _counts(outcomes: list[str]) -> dict[str, int]:
    return {
        "collected": len(outcomes),
        "passed": outcomes.count("passed"),
        "failed": outcomes.count("failed"),
        "errors": outcomes.count("error"),
        "skipped": outcomes.count("skipped"),
    }
