import json
import os
import signal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.validators import verdict
from ithaca.validators.verdict import Verdict

PASS = Verdict(True, "all good", {"n": 1})
FAIL = Verdict(False, "3 errors", {"errors": 3})


def classify(found, *, exit_code=0, signal_number=None, timed_out=False, cpu=False, stderr=""):
    return verdict.classify(
        found,
        exit_code=exit_code,
        signal_number=signal_number,
        timed_out=timed_out,
        cpu_exhausted=cpu,
        stderr=stderr,
    )


def test_a_valid_verdict_keeps_reason_and_evidence_and_ignores_extra_keys():
    data = json.dumps({"verdict": "fail", "reason": "why", "evidence": [1], "extra": 2})
    assert verdict.parse(data.encode()) == Verdict(False, "why", [1])
    assert verdict.parse(b'{"verdict":"pass","reason":""}') == Verdict(True, "", None)


def test_the_reason_is_cut_to_4096_characters():
    found = verdict.parse(json.dumps({"verdict": "pass", "reason": "é" * 5000}).encode())
    assert found.reason == "é" * 4096


@pytest.mark.parametrize(
    "data",
    [
        b'{"verdict":"pass","reason":NaN}',
        b'{"verdict":"pass","reason":"x","evidence":Infinity}',
        b'{"verdict":"pass","reason":"x","evidence":-Infinity}',
        b'{"verdict":"pass","reason":"x","evidence":1e400}',
        b'{"verdict":"pass","reason":"x","evidence":9007199254740993}',
        b'{"verdict":"pass","reason":"\\ud800"}',
        b'{"verdict":"pass","reason":5}',
        b'{"verdict":"pass"}',
        b'{"verdict":"PASS","reason":"x"}',
        b'{"verdict":true,"reason":"x"}',
        b'["pass","x"]',
        b'"pass"',
        b'{"verdict":"pass","reason":"x"',
        b'\xff{"verdict":"pass","reason":"x"}',
        b"",
        b"[" * 100_000,
    ],
)
def test_malformed_verdicts_are_bad_json(data):
    assert verdict.parse(data) == "bad_json"


def test_reading_a_missing_verdict_says_no_verdict(tmp_path):
    assert verdict.read(str(tmp_path / "verdict.json"), 1024) == "no_verdict"


def test_reading_an_oversized_verdict_says_too_large(tmp_path):
    path = tmp_path / "verdict.json"
    path.write_text(json.dumps({"verdict": "pass", "reason": "x" * 2000}))
    assert verdict.read(str(path), 1024) == "too_large"
    assert verdict.read(str(path), 4096) == Verdict(True, "x" * 2000, None)


def test_a_symlink_fifo_or_folder_is_never_read_as_a_verdict(tmp_path):
    real = tmp_path / "elsewhere.json"
    real.write_text('{"verdict":"pass","reason":"forged"}')
    link = tmp_path / "link.json"
    link.symlink_to(real)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for path in (link, fifo, folder):
        assert verdict.read(str(path), 1024) == "bad_json"


@pytest.mark.parametrize(
    ("found", "facts", "expected"),
    [
        (FAIL, {"exit_code": 3}, (False, "3 errors", None)),
        (
            FAIL,
            {"exit_code": None, "signal_number": 9, "timed_out": True},
            (False, "3 errors", None),
        ),
        (PASS, {"timed_out": True, "exit_code": None, "signal_number": 9}, "timeout"),
        (PASS, {"exit_code": None, "signal_number": signal.SIGXCPU}, "timeout"),
        (PASS, {"exit_code": None, "signal_number": 9, "cpu": True}, "timeout"),
        (PASS, {"exit_code": None, "signal_number": 9}, "oom"),
        (PASS, {"exit_code": 1, "stderr": "Traceback\nMemoryError\n"}, "oom"),
        (
            "no_verdict",
            {"exit_code": None, "signal_number": 11, "stderr": "heap out of memory"},
            "oom",
        ),
        ("no_verdict", {"exit_code": 1, "stderr": "Cannot allocate memory"}, "oom"),
        (PASS, {"exit_code": None, "signal_number": 11}, "signal"),
        (PASS, {"exit_code": 1}, "crash"),
        ("no_verdict", {"exit_code": 2}, "crash"),
        ("too_large", {}, "too_large"),
        ("bad_json", {}, "bad_json"),
        ("no_verdict", {"stderr": "MemoryError"}, "no_verdict"),
        (PASS, {"stderr": "MemoryError"}, (True, "all good", None)),
    ],
)
def test_the_first_matching_row_of_the_table_decides(found, facts, expected):
    judged = classify(found, **facts)
    if isinstance(expected, str):
        assert (judged.passed, judged.reason, judged.cause, judged.evidence) == (
            False,
            "malformed_verdict",
            expected,
            None,
        )
    else:
        assert (judged.passed, judged.reason, judged.cause) == expected
        assert judged.evidence == found.evidence


@given(
    found=st.sampled_from([PASS, FAIL, "no_verdict", "bad_json", "too_large"]),
    exit_code=st.sampled_from([0, 1, 2, 137]),
    signal_number=st.sampled_from([None, signal.SIGKILL, signal.SIGSEGV, signal.SIGXCPU]),
    timed_out=st.booleans(),
    cpu=st.booleans(),
    stderr=st.sampled_from(["", "MemoryError"]),
)
def test_a_pass_needs_a_pass_verdict_and_a_clean_exit(
    found, exit_code, signal_number, timed_out, cpu, stderr
):
    exit_code = None if signal_number else exit_code
    judged = classify(
        found,
        exit_code=exit_code,
        signal_number=signal_number,
        timed_out=timed_out,
        cpu=cpu,
        stderr=stderr,
    )
    clean = exit_code == 0 and signal_number is None and not timed_out
    assert judged.passed == (found == PASS and clean)
    assert (judged.cause is None) == (judged.passed or found == FAIL)
