import importlib.util
import json
import math
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from textwrap import dedent

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tests import needs

from ithaca.kernel.config import defaults
from ithaca.validators import runner
from ithaca.validators.runtimes import LANGUAGES

HELPERS = runner.HELPERS
NODE = shutil.which("node")


def test_every_helper_the_languages_name_ships_with_the_package():
    named = {helper for language in LANGUAGES.values() for helper in language.helpers}
    assert named == {"tb_validate.py", "tb-validate.js", "tb-validate.cjs", "tb-validate.sh"}
    assert named == set(os.listdir(HELPERS)) - {"__pycache__"}


# --- Python: imported in-process ---------------------------------------------------------


@pytest.fixture
def python_helper(tmp_path):
    """A fresh copy of tb_validate wired to files under ``tmp_path`` (its bytecode is not
    cached into the package, which ships the helper's source only)."""
    with helper_in(tmp_path, observed='{"errors": 0}') as helper:
        yield helper


def written(tmp_path):
    return json.loads((tmp_path / "verdict.json").read_text())


def test_python_helper_reads_observed_and_writes_one_verdict(python_helper, tmp_path):
    assert python_helper.observed() == {"errors": 0}
    assert python_helper.passed is python_helper.pass_
    assert python_helper.pass_("clean ✓") is None
    assert written(tmp_path) == {"verdict": "pass", "reason": "clean ✓"}
    assert os.listdir(tmp_path) == ["observed.json", "verdict.json"]


def test_python_helper_writes_fail_with_evidence(python_helper, tmp_path):
    python_helper.fail("2 errors", {"errors": [1, 2]})
    assert written(tmp_path) == {
        "verdict": "fail",
        "reason": "2 errors",
        "evidence": {"errors": [1, 2]},
    }


def test_python_helper_refuses_a_second_verdict(python_helper, tmp_path):
    python_helper.pass_("first")
    with pytest.raises(RuntimeError, match="already written"):
        python_helper.fail("second")
    assert written(tmp_path)["reason"] == "first"


def test_python_helper_never_replaces_a_verdict_another_process_wrote(python_helper, tmp_path):
    (tmp_path / "verdict.json").write_text('{"verdict":"fail","reason":"other"}')
    with pytest.raises(RuntimeError, match="already written"):
        python_helper.pass_("mine")
    assert written(tmp_path)["reason"] == "other"
    assert sorted(os.listdir(tmp_path)) == ["observed.json", "verdict.json"]


@pytest.mark.parametrize(
    ("reason", "evidence", "error"),
    [
        (3, None, TypeError),
        (None, None, TypeError),
        ("nan", math.nan, ValueError),
        ("object", object(), TypeError),
    ],
)
def test_python_helper_raises_for_a_bad_reason_or_evidence(
    python_helper, tmp_path, reason, evidence, error
):
    with pytest.raises(error):
        python_helper.pass_(reason, evidence)
    assert not (tmp_path / "verdict.json").exists()
    python_helper.fail("a later good verdict still counts")
    assert written(tmp_path)["verdict"] == "fail"


# --- JavaScript: through the runner ------------------------------------------------------


def run(language, source, observed=None):
    values = defaults()["validators"]
    values.update(timeout_s=5, grace_s=0.5)
    shape = {
        "schema": "ithaca.validator-snapshot/1",
        "language": language,
        "mode": "judge",
        "entrypoint": LANGUAGES[language].entrypoint,
        "source": dedent(source),
        "timeout_s": 5,
        "runtime": {"name": "any", "version": "any"},
        "manifests": [],
    }
    return runner.run_snapshot(shape, observed, values, project_root=None)


@needs.node
def test_javascript_helper_returns_and_the_cell_goes_on():
    result = run(
        "javascript",
        """\
        import { observed, pass } from "./tb-validate.js";
        pass("fine", { seen: observed() });
        console.log("still running");
        """,
        {"k": [1]},
    )
    assert (result["pass"], result["evidence"]) == (True, {"seen": {"k": [1]}})
    assert result["stdout"] == "still running\n"


@needs.node
@pytest.mark.parametrize(
    "call",
    [
        'pass("one"); fail("two")',
        'pass("one"); require_("two")',
        "pass(42)",
        'pass("nan", { n: NaN })',
        'pass("inf", [Infinity])',
        'pass("hole", { a: undefined })',
        'pass("function", { f() {} })',
        'pass("bigint", 1n)',
    ],
    ids=[
        "second",
        "second-via-cjs",
        "number-reason",
        "nan",
        "infinity",
        "undefined",
        "fn",
        "bigint",
    ],
)
def test_javascript_helper_throws_for_a_second_or_malformed_verdict(call):
    source = f"""\
        import {{ createRequire }} from "node:module";
        import {{ pass, fail }} from "./tb-validate.js";
        const require_ = createRequire(import.meta.url)("./tb-validate.cjs").fail;
        {call};
        """
    result = run("javascript", source)
    assert (result["pass"], result["reason"], result["cause"]) == (
        False,
        "malformed_verdict",
        "crash",
    )
    assert "tb-validate" in result["stderr"] or "BigInt" in result["stderr"]


# --- Shell: sourced by sh ----------------------------------------------------------------


def shell(tmp_path, *arguments):
    """Run ``tb_pass``/``tb_fail`` with ``arguments``; (status, verdict or None, stderr)."""
    verdict = tmp_path / "verdict.json"
    if verdict.exists():
        verdict.unlink()
    script = f'. "{HELPERS / "tb-validate.sh"}"\n"$@"\n'
    done = subprocess.run(
        ["/bin/sh", "-c", script, "sh", *arguments],
        env={"PATH": os.environ["PATH"], "TB_VERDICT_PATH": str(verdict)},
        capture_output=True,
        text=True,
    )
    found = json.loads(verdict.read_text()) if verdict.exists() else None
    return done.returncode, found, done.stderr


def test_shell_helper_escapes_the_reason_and_keeps_evidence_verbatim(tmp_path):
    status, found, _ = shell(tmp_path, "tb_fail", 'a "b" \\c\n\td', ' {"n": [1, 2.5e3]} ')
    assert status == 0
    assert found == {"verdict": "fail", "reason": 'a "b" \\c\n\td', "evidence": {"n": [1, 2500.0]}}
    assert shell(tmp_path, "tb_pass", "")[:2] == (0, {"verdict": "pass", "reason": ""})


@pytest.mark.parametrize("evidence", ["{bad", "[1,]", "01", "NaN", "", "1 2", '"\\x"', "[\x01]"])
def test_shell_helper_refuses_evidence_that_is_not_json(tmp_path, evidence):
    status, found, stderr = shell(tmp_path, "tb_pass", "r", evidence)
    assert (status, found) == (2, None)
    assert "not JSON" in stderr


def test_shell_helper_refuses_a_second_verdict_and_a_missing_reason(tmp_path):
    verdict = tmp_path / "verdict.json"
    script = f'. "{HELPERS / "tb-validate.sh"}"\ntb_pass one\ntb_fail two\necho "status $?"\n'
    done = subprocess.run(
        ["/bin/sh", "-c", script],
        env={"PATH": os.environ["PATH"], "TB_VERDICT_PATH": str(verdict)},
        capture_output=True,
        text=True,
    )
    assert done.stdout == "status 2\n"
    assert json.loads(verdict.read_text())["reason"] == "one"
    assert shell(tmp_path, "tb_pass")[:2] == (2, None)


def test_a_shell_cell_that_stops_on_a_refused_verdict_crashes():
    result = run("shell", '. "$ITHACA_RUN_DIR/tb-validate.sh"\ntb_pass ok "{oops" || exit 3\n')
    assert (result["pass"], result["cause"], result["exitCode"]) == (False, "crash", 3)


TEXT = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"))
SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT


@settings(max_examples=30, deadline=None)
@given(TEXT)
def test_any_shell_reason_round_trips(tmp_path_factory, reason):
    status, found, _ = shell(tmp_path_factory.mktemp("sh"), "tb_pass", reason)
    assert (status, found) == (0, {"verdict": "pass", "reason": reason})


JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)


def strict_json(text):
    try:
        json.loads(text, parse_constant=lambda name: 1 / 0)
    except (ValueError, ZeroDivisionError):
        return False
    return True


@settings(max_examples=50, deadline=None)
@given(
    st.one_of(
        JSON_VALUES.map(json.dumps),
        JSON_VALUES.map(lambda value: json.dumps(value, ensure_ascii=False, indent=1)),
        st.text('{}[],:" \\0123456789.eE+-truefalsnl\t\x01u', max_size=14),
    )
)
@example("\\200")  # the refusal quotes evidence verbatim: echo would expand this to a byte
def test_shell_helper_accepts_exactly_strict_json_evidence(tmp_path_factory, text):
    status, found, stderr = shell(tmp_path_factory.mktemp("sh"), "tb_pass", "r", text)
    if strict_json(text):
        assert status == 0 and found["evidence"] == json.loads(text)
    else:
        assert (status, found) == (2, None)
        assert f"evidence is not JSON: {text}" in stderr


@settings(max_examples=60, deadline=None)
@given(evidence=JSON_VALUES, reason=TEXT)
def test_python_helper_writes_exactly_what_json_would(tmp_path_factory, evidence, reason):
    # The helper drives json's C accelerator directly; json itself is the oracle.
    folder = tmp_path_factory.mktemp("py")
    expected = {"verdict": "pass", "reason": reason}
    if evidence is not None:
        expected["evidence"] = evidence
    try:
        oracle = json.dumps(expected, ensure_ascii=False, allow_nan=False)
    except ValueError:  # infinities have no strict JSON form
        oracle = None
    with helper_in(folder, observed=json.dumps(evidence)) as helper:
        assert helper.observed() == json.loads(json.dumps(evidence))
        if oracle is None:
            with pytest.raises(ValueError):
                helper.pass_(reason, evidence)
            return
        helper.pass_(reason, evidence)
    assert (folder / "verdict.json").read_text(encoding="utf-8") == oracle


@pytest.mark.parametrize("text", ["{bad", "[1,]", "", "1 2", '{"a": 1} x'])
def test_python_helper_reads_malformed_observed_data_as_json_would(tmp_path, text):
    with helper_in(tmp_path, observed=text) as helper, pytest.raises(ValueError) as raised:
        helper.observed()
    with pytest.raises(ValueError) as expected:
        json.loads(text)
    assert str(raised.value) == str(expected.value)


@contextmanager
def helper_in(folder, *, observed):
    """A fresh tb_validate whose observed data and verdict live in ``folder``."""
    (folder / "observed.json").write_text(observed, encoding="utf-8")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "dont_write_bytecode", True)
        for prefix in ("TB", "ITHACA"):
            patch.setenv(f"{prefix}_OBSERVED_PATH", str(folder / "observed.json"))
            patch.setenv(f"{prefix}_VERDICT_PATH", str(folder / "verdict.json"))
        spec = importlib.util.spec_from_file_location("tb_validate", HELPERS / "tb_validate.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
