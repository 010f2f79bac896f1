"""Reading the report Ithaca asked a runner for: JUnit XML, the unittest reporter's JSON and
``go test -json``, each treated as hostile input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ithaca.verification import reports
from ithaca.verification.run import UNITTEST_REPORTER

JUNIT = b"""<?xml version="1.0" encoding="utf-8"?>
<testsuites name="pytest tests"><testsuite name="pytest" errors="0" failures="0" skipped="0"
 tests="99">
<testcase classname="tests.test_a" name="test_ok" time="0.001" />
<testcase classname="tests.test_a.TestK" name="test_param[1]" time="0.001" />
<testcase classname="tests.test_a" name="test_bad" time="0.001"><failure message="assert 1 == 2">
assert 1 == 2</failure></testcase>
<testcase classname="tests.test_a" name="test_fixture" time="0.001"><error message="failed on
 setup">boom</error></testcase>
<testcase classname="tests.test_a" name="test_skip" time="0"><skipped type="pytest.skip"
 message="no" /></testcase>
<testcase classname="tests.test_a" name="test_xfail" time="0"><skipped type="pytest.xfail"
 message="x" /></testcase>
<testcase classname="" name="tests.test_broken" time="0"><error message="collection failure">
ImportError</error></testcase>
</testsuite></testsuites>
"""


def test_junit_counts_every_testcase_not_the_suite_attributes() -> None:
    report = reports.parse_junit(JUNIT)
    assert report.counts == {"collected": 7, "passed": 2, "failed": 1, "errors": 2, "skipped": 2}
    assert report.tests == {
        "tests.test_a::test_ok": "passed",
        "tests.test_a.TestK::test_param[1]": "passed",
        "tests.test_a::test_bad": "failed",
        "tests.test_a::test_fixture": "error",
        "tests.test_a::test_skip": "skipped",
        "tests.test_a::test_xfail": "skipped",
        "tests.test_broken": "error",
    }
    assert report.executed == 5


def test_a_test_named_twice_keeps_its_worse_outcome() -> None:
    data = (
        b'<testsuite><testcase classname="m" name="t"/>'
        b'<testcase classname="m" name="t"><failure/></testcase></testsuite>'
    )
    report = reports.parse_junit(data)
    assert report.tests == {"m::t": "failed"}
    assert report.counts["collected"] == 2


@pytest.mark.parametrize(
    "data",
    [
        b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 '
        b'"&lol;&lol;&lol;">]><testsuite><testcase name="&lol2;"/></testsuite>',
        b'<!doctype testsuite SYSTEM "file:///etc/passwd"><testsuite/>',
        b'<testsuite><!ENTITY x "y"></testsuite>',
    ],
)
def test_junit_with_a_doctype_or_an_entity_is_refused(data: bytes) -> None:
    with pytest.raises(reports.ReportError, match="DOCTYPE or an entity"):
        reports.parse_junit(data)


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"<testsuite><testcase>", "not well-formed"),
        (b"5 passed", "not well-formed"),
        (b"<html/>", "root is <html>"),
        (b"<testsuite><testcase name='&undefined;'/></testsuite>", "not well-formed"),
    ],
)
def test_malformed_junit(data: bytes, problem: str) -> None:
    with pytest.raises(reports.ReportError, match=problem):
        reports.parse_junit(data)


def test_a_report_is_read_only_from_a_regular_file_and_within_its_cap(tmp_path: Path) -> None:
    real = tmp_path / "real.xml"
    real.write_bytes(JUNIT)
    assert reports.read_bytes(str(real)) == JUNIT
    with pytest.raises(reports.ReportError, match="no report"):
        reports.read_bytes(str(tmp_path / "missing.xml"))
    link = tmp_path / "link.xml"
    link.symlink_to(real)
    with pytest.raises(reports.ReportError, match="could not be opened"):
        reports.read_bytes(str(link))
    fifo = tmp_path / "fifo.xml"
    os.mkfifo(fifo)
    with pytest.raises(reports.ReportError, match="not a regular file"):
        reports.read_bytes(str(fifo))
    with pytest.raises(reports.ReportError, match="larger than 100 bytes"):
        reports.read_bytes(str(real), max_bytes=100)


def test_unittest_report_outcomes() -> None:
    data = json.dumps(
        {
            "schema": "ithaca.unittest-report/1",
            "tests": [
                {"id": "t.T.test_a", "outcome": "passed"},
                {"id": "t.T.test_b", "outcome": "failed"},
                {"id": "t.T.test_c", "outcome": "error"},
                {"id": "t.T.test_d", "outcome": "skipped"},
                {"id": "t.T.test_e", "outcome": "expected_failure"},
                {"id": "t.T.test_f", "outcome": "unexpected_success"},
            ],
        }
    ).encode()
    report = reports.parse_unittest(data)
    assert report.counts == {"collected": 6, "passed": 1, "failed": 2, "errors": 1, "skipped": 2}
    assert report.tests["t.T.test_e"] == "skipped" and report.tests["t.T.test_f"] == "failed"


@pytest.mark.parametrize(
    "data",
    [
        b"[1]",
        b"{}",
        b'{"tests": [{"outcome": "passed"}]}',
        b'{"tests": [{"id": "a", "outcome": "won"}]}',
        b"x",
    ],
)
def test_malformed_unittest_report(data: bytes) -> None:
    with pytest.raises(reports.ReportError):
        reports.parse_unittest(data)


GO_EVENTS = b"""\
{"Action":"start","Package":"ex.com/a"}
{"Action":"run","Package":"ex.com/a","Test":"TestOk"}
{"Action":"output","Package":"ex.com/a","Test":"TestOk","Output":"=== RUN   TestOk\\n"}
{"Action":"pass","Package":"ex.com/a","Test":"TestOk","Elapsed":0}
{"Action":"fail","Package":"ex.com/a","Test":"TestBad/sub","Elapsed":0}
{"Action":"fail","Package":"ex.com/a","Test":"TestBad","Elapsed":0}
{"Action":"skip","Package":"ex.com/a","Test":"TestLater","Elapsed":0}
{"Action":"output","Package":"ex.com/a","Output":"FAIL\\n"}
{"Action":"fail","Package":"ex.com/a","Elapsed":0.1}
# ex.com/b
b.go:3:1: syntax error
{"Action":"output","Package":"ex.com/b","Output":"FAIL\\tex.com/b [build failed]\\n"}
{"Action":"fail","Package":"ex.com/b","Elapsed":0}
{"Action":"skip","Package":"ex.com/c","Elapsed":0}
"""


def test_go_json_events() -> None:
    report = reports.parse_go_json(GO_EVENTS)
    assert report.tests == {
        "ex.com/a::TestOk": "passed",
        "ex.com/a::TestBad/sub": "failed",
        "ex.com/a::TestBad": "failed",
        "ex.com/a::TestLater": "skipped",
        "ex.com/b::[build]": "error",
    }
    assert report.counts == {"collected": 5, "passed": 1, "failed": 2, "errors": 1, "skipped": 1}
    output = reports.go_output(GO_EVENTS, 1000)
    assert "=== RUN   TestOk\n" in output and "b.go:3:1: syntax error" in output
    assert output.endswith("FAIL\tex.com/b [build failed]\n")


def reporter(project: Path, *arguments: str) -> tuple[int, dict[str, str]]:
    report = project / "report.json"
    done = subprocess.run(
        [sys.executable, str(UNITTEST_REPORTER), str(report), *arguments],
        cwd=project,
        capture_output=True,
        env={"PATH": os.environ["PATH"], "PYTHONDONTWRITEBYTECODE": "1"},
    )
    data = json.loads(report.read_text()) if report.exists() else {"tests": []}
    assert data.get("schema", "ithaca.unittest-report/1") == "ithaca.unittest-report/1"
    return done.returncode, {entry["id"]: entry["outcome"] for entry in data["tests"]}


SUITE = """\
import unittest


class T(unittest.TestCase):
    def test_pass(self):
        pass

    def test_fail(self):
        self.assertEqual(1, 2)

    def test_error(self):
        raise RuntimeError("boom")

    @unittest.skip("later")
    def test_skip(self):
        pass

    @unittest.expectedFailure
    def test_xfail(self):
        self.assertEqual(1, 2)

    @unittest.expectedFailure
    def test_xpass(self):
        pass

    def test_sub(self):
        for i in range(2):
            with self.subTest(i=i):
                self.assertEqual(i, 0)
"""


def test_the_unittest_reporter_records_each_outcome(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    code, tests = reporter(tmp_path)
    assert code == 1
    assert tests == {
        "test_suite.T.test_pass": "passed",
        "test_suite.T.test_fail": "failed",
        "test_suite.T.test_error": "error",
        "test_suite.T.test_skip": "skipped",
        "test_suite.T.test_xfail": "expected_failure",
        "test_suite.T.test_xpass": "unexpected_success",
        "test_suite.T.test_sub (i=1)": "failed",
    }


def test_the_unittest_reporter_exits_0_on_success_and_5_when_no_test_ran(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ok.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    def test_ok(self): pass\n"
        "    @unittest.skip('x')\n    def test_skip(self): pass\n"
    )
    assert reporter(tmp_path) == (5, {})  # not a package: default discovery finds nothing
    assert reporter(tmp_path, "discover", "-s", "tests") == (
        0,
        {"test_ok.T.test_ok": "passed", "test_ok.T.test_skip": "skipped"},
    )
    (tmp_path / "tests" / "test_ok.py").write_text(
        "import unittest\n\nclass T(unittest.TestCase):\n    @unittest.skip('x')\n"
        "    def test_skip(self): pass\n"
    )
    assert reporter(tmp_path, "discover", "-s", "tests") == (5, {"test_ok.T.test_skip": "skipped"})


def test_the_unittest_reporter_imports_from_the_project_not_from_its_own_folder(
    tmp_path: Path,
) -> None:
    """Run by path, Python would put Ithaca's verification folder first on sys.path, where
    ``reports`` and ``runners`` live; like ``python -m unittest`` the project comes first."""
    (tmp_path / "test_path.py").write_text(
        "import os, sys, unittest\n\nclass T(unittest.TestCase):\n"
        "    def test_path(self):\n"
        "        self.assertEqual(sys.path[0], os.getcwd())\n"
        "        with self.assertRaises(ImportError):\n"
        "            import runners  # noqa: F401\n"
    )
    assert reporter(tmp_path) == (0, {"test_path.T.test_path": "passed"})
