"""Real verification runs under bubblewrap: the project's runner, Ithaca's environment, the
project read-only, counts read from the report Ithaca asked for, never from what the
tests print; the turn's runner configuration laid back over the project."""

from __future__ import annotations

import importlib.util
import json
import os
import py_compile
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from tests import needs
from tests.verification.files import lay

from ithaca.kernel.config import defaults
from ithaca.kernel.errors import Refused
from ithaca.verification import runners
from ithaca.verification.run import Outcome, in_sandbox
from ithaca.verification.runners import Runner

# The interpreter running this suite has pytest; a user points validators.path at such a
# folder the same way (its python3 runs with its own environment, found from its path).
CLEAN_PATH = os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"])
PYTEST = Runner("pytest", ("python3", "-m", "pytest"), "test", "junit", runners.PYTEST_CONFIG)


@pytest.fixture
def settings() -> dict[str, Any]:
    values: dict[str, Any] = defaults()["validators"]
    values.update(path=CLEAN_PATH, grace_s=0.5)
    return values


def verify(
    root: Path, settings: dict[str, Any], runner: Runner | None = None, **kw: Any
) -> Outcome:
    chosen = runner or runners.detect(str(root), {"runner": "auto", "commands": []})
    assert chosen is not None
    return in_sandbox(str(root), chosen, timeout_s=kw.pop("timeout_s", 60), settings=settings, **kw)


PASSING = {
    "pytest.ini": "[pytest]\n",
    "tests/test_calc.py": "def test_add():\n    assert 1 + 1 == 2\n\n"
    "def test_sub():\n    assert 2 - 1 == 1\n",
}


@needs.bubblewrap
def test_a_pytest_project_passes_with_counts_and_leaves_the_project_untouched(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    root = lay(tmp_path / "p", PASSING)
    before = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    outcome = verify(root, settings)
    assert (outcome.status, outcome.exit_code) == ("passed", 0), outcome
    assert outcome.counts == {"collected": 2, "passed": 2, "failed": 0, "errors": 0, "skipped": 0}
    assert outcome.tests == {
        "tests.test_calc::test_add": "passed",
        "tests.test_calc::test_sub": "passed",
    }
    assert outcome.reason == "2 passed, 0 failed, 0 errors, 0 skipped of 2 (from the report)"
    # No cache, no bytecode: the project is read-only and nothing asked to write it.
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == before


@needs.bubblewrap
def test_a_unittest_project_with_a_bare_pyproject(tmp_path: Path, settings: dict[str, Any]) -> None:
    root = lay(
        tmp_path / "u",
        {
            "pyproject.toml": "[project]\nname = 'calc'\nversion = '1'\n",
            "calc.py": "def add(a, b):\n    return a + b\n",
            "tests/test_calc.py": "import unittest\nfrom calc import add\n\n"
            "class TestAdd(unittest.TestCase):\n"
            "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"
            "    def test_wrong(self):\n        self.assertEqual(add(1, 2), 4)\n",
        },
    )
    outcome = verify(root, settings)
    assert (outcome.status, outcome.exit_code) == ("failed", 1), outcome
    assert outcome.tests == {
        "test_calc.TestAdd.test_add": "passed",
        "test_calc.TestAdd.test_wrong": "failed",
    }
    assert outcome.counts == {"collected": 2, "passed": 1, "failed": 1, "errors": 0, "skipped": 0}
    assert "AssertionError: 3 != 4" in outcome.tail


@needs.bubblewrap
@pytest.mark.parametrize(
    "conftest",
    [
        "def pytest_collection_modifyitems(items):\n    items[:] = []\n",
        # ... and pretends the session went well.
        "def pytest_collection_modifyitems(items):\n    items[:] = []\n\n"
        "def pytest_sessionfinish(session):\n    session.exitstatus = 0\n",
    ],
)
def test_a_conftest_that_deselects_everything_is_no_tests(
    tmp_path: Path, settings: dict[str, Any], conftest: str
) -> None:
    root = lay(tmp_path / "p", {**PASSING, "conftest.py": conftest})
    outcome = verify(root, settings)
    assert outcome.status == "no_tests", outcome
    assert outcome.counts == {"collected": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    assert outcome.reason.startswith("no test ran")


@needs.bubblewrap
def test_all_skipped_is_no_tests_even_with_exit_0(tmp_path: Path, settings: dict[str, Any]) -> None:
    root = lay(
        tmp_path / "p",
        {
            "pytest.ini": "[pytest]\n",
            "test_s.py": "import pytest\n\n@pytest.mark.skip\ndef test_a():\n    pass\n",
        },
    )
    outcome = verify(root, settings)
    assert (outcome.status, outcome.exit_code) == ("no_tests", 0)
    assert outcome.tests == {"test_s::test_a": "skipped"}


@needs.bubblewrap
def test_a_printed_summary_counts_for_nothing(tmp_path: Path, settings: dict[str, Any]) -> None:
    root = lay(
        tmp_path / "p",
        {
            "pytest.ini": "[pytest]\n",
            "test_liar.py": "def test_liar():\n    print('===== 5 passed in 0.01s =====')\n"
            "    print('OK')\n    assert False\n",
        },
    )
    outcome = verify(root, settings)
    assert outcome.status == "failed"
    assert outcome.counts == {"collected": 1, "passed": 0, "failed": 1, "errors": 0, "skipped": 0}
    assert outcome.tests == {"test_liar::test_liar": "failed"}


ENVIRONMENT_TEST = """\
import os
import sys


def test_environment():
    own = ("PYTEST_CURRENT_TEST", "PYTEST_VERSION")  # pytest sets these itself
    prefixes = ("PYTHON", "PYTEST", "NODE", "LD_")
    assert sorted(n for n in os.environ if n.startswith(prefixes) and n not in own) == [
        "PYTEST_ADDOPTS", "PYTHONDONTWRITEBYTECODE", "PYTHONNOUSERSITE", "PYTHONPYCACHEPREFIX"
    ]
    assert "VIRTUAL_ENV" not in os.environ and "AGENT_SECRET" not in os.environ
    assert os.environ["PYTEST_ADDOPTS"].startswith("-p no:cacheprovider --junitxml=")
    assert os.environ["HOME"].endswith("/home")
    assert os.environ["PYTHONPYCACHEPREFIX"].endswith("/pycache")
    assert os.environ["CI"] == "1"
"""


@needs.bubblewrap
def test_the_callers_environment_never_reaches_the_run(
    tmp_path: Path, settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an agent's shell might have set (``--co`` runs no test and exits 0, a
    sitecustomize on PYTHONPATH that forces exit 0) is not the run's environment."""
    planted = lay(tmp_path / "planted", {"sitecustomize.py": "import os\nos._exit(0)\n"})
    for name, value in {
        "PYTEST_ADDOPTS": "--co",
        "PYTHONPATH": str(planted),
        "PYTHONSTARTUP": str(planted / "sitecustomize.py"),
        "NODE_OPTIONS": "--require /nowhere.js",
        "VIRTUAL_ENV": str(planted),
        "LD_PRELOAD": "/nowhere.so",
        "PYTEST_PLUGINS": "nowhere",
        "AGENT_SECRET": "x",
    }.items():
        monkeypatch.setenv(name, value)
    root = lay(tmp_path / "p", {"pytest.ini": "[pytest]\n", "test_env.py": ENVIRONMENT_TEST})
    outcome = verify(root, settings)
    assert outcome.status == "passed", outcome.tail
    assert outcome.tests == {"test_env::test_environment": "passed"}


@needs.bubblewrap
def test_a_shim_first_on_the_callers_path_is_not_run(
    tmp_path: Path, settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's PATH is ``validators.path`` (else Ithaca's own): a ``python3`` shim that
    says all is well, first on the PATH of the process calling Ithaca, is never run."""
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in ("python3", "pytest"):
        shim = shims / name
        shim.write_text("#!/bin/sh\necho '5 passed (shim)'\nexit 0\n")
        shim.chmod(0o755)
    monkeypatch.setenv("PATH", f"{shims}{os.pathsep}{os.environ['PATH']}")
    assert shutil.which("python3") == str(shims / "python3")  # the caller would run the shim
    root = lay(
        tmp_path / "p", {"pytest.ini": "[pytest]\n", "test_f.py": "def test_f():\n    assert 0\n"}
    )
    outcome = verify(root, settings)
    assert outcome.status == "failed" and "(shim)" not in outcome.tail
    assert outcome.tests == {"test_f::test_f": "failed"}


@needs.bubblewrap
def test_a_folder_of_the_project_on_ithacas_own_path_is_left_out(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    """An agent that writes ``bin/python3`` in the project and gets that folder onto the
    PATH Ithaca runs with (or a relative entry) still has its shim ignored."""
    root = lay(
        tmp_path / "p", {"pytest.ini": "[pytest]\n", "test_f.py": "def test_f():\n    assert 0\n"}
    )
    shim = root / "bin" / "python3"
    shim.parent.mkdir()
    shim.write_text("#!/bin/sh\necho '5 passed (shim)'\nexit 0\n")
    shim.chmod(0o755)
    settings["path"] = os.pathsep.join([str(root / "bin"), "bin", CLEAN_PATH])

    outcome = verify(root, settings)

    assert outcome.status == "failed" and "(shim)" not in outcome.tail
    assert outcome.tests == {"test_f::test_f": "failed"}


@needs.bubblewrap
def test_the_runners_compiled_libraries_are_read_only_to_the_run(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    """Ithaca compiles pytest's modules once, outside the run; a test cannot write there
    (a later run would load what it wrote)."""
    probe = (
        "import os\n\ndef test_cannot_write_the_compiled_libraries():\n"
        "    folder = os.environ['PYTHONPYCACHEPREFIX']\n"
        "    found = [name for _, _, names in os.walk(folder) for name in names]\n"
        "    assert any(name.endswith('.pyc') for name in found)\n"
        "    try:\n"
        "        open(os.path.join(folder, 'planted.pyc'), 'wb').close()\n"
        "    except OSError:\n"
        "        return\n"
        "    raise AssertionError('the run wrote its compiled libraries')\n"
    )
    root = lay(tmp_path / "p", {"pytest.ini": "[pytest]\n", "test_probe.py": probe})

    outcome = verify(root, settings)

    assert outcome.status == "passed", outcome.tail
    assert outcome.tests == {"test_probe::test_cannot_write_the_compiled_libraries": "passed"}


@needs.bubblewrap
def test_bytecode_planted_in_pycache_is_never_loaded(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    root = lay(
        tmp_path / "u",
        {
            "pyproject.toml": "[project]\nname = 'x'\n",
            "test_value.py": "import unittest\nimport helper\n\n"
            "class T(unittest.TestCase):\n"
            "    def test_value(self):\n        self.assertEqual(helper.VALUE, 1)\n",
        },
    )
    helper = root / "helper.py"
    helper.write_text("VALUE = 1\n")  # what the planted bytecode says
    os.utime(helper, (1_700_000_000, 1_700_000_000))
    py_compile.compile(str(helper), cfile=importlib.util.cache_from_source(str(helper)))
    helper.write_text("VALUE = 2\n")  # the source: same size, same modification time
    os.utime(helper, (1_700_000_000, 1_700_000_000))
    plain = subprocess.run(
        [sys.executable, "-m", "unittest"],
        cwd=root,
        capture_output=True,
        env={"PATH": CLEAN_PATH, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert plain.returncode == 0  # Python alone would trust the planted .pyc
    outcome = verify(root, settings)
    assert outcome.status == "failed", outcome
    assert outcome.tests == {"test_value.T.test_value": "failed"}


DESELECT = "def pytest_collection_modifyitems(items):\n    items[:] = []\n"


@needs.bubblewrap
def test_the_overlay_lays_the_turns_configuration_back(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    """conftest.py as the turn found it (bytes), and a conftest the turn added (None),
    hidden behind an empty file; the project itself is not changed."""
    root = lay(
        tmp_path / "p",
        {
            **PASSING,
            "conftest.py": DESELECT,  # the turn rewrote the root conftest.py
            "tests/conftest.py": DESELECT,  # and added this one
        },
    )
    assert verify(root, settings).status == "no_tests"
    overlay = {"conftest.py": b"# as it was\n", "tests/conftest.py": None, "tests/gone.py": None}
    outcome = verify(root, settings, overlay=overlay)
    assert outcome.status == "passed", outcome
    assert outcome.counts is not None and outcome.counts["passed"] == 2
    assert (root / "conftest.py").read_text() == DESELECT
    assert (root / "tests" / "conftest.py").read_text() == DESELECT


@needs.bubblewrap
def test_an_overlay_over_a_removed_file_is_an_error(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    root = lay(tmp_path / "p", PASSING)
    outcome = verify(root, settings, overlay={"conftest.py": b"# as it was\n"})
    assert (outcome.status, outcome.exit_code, outcome.counts) == ("error", None, None)
    assert outcome.reason.startswith("conftest.py was removed since the turn began")


@needs.bubblewrap
def test_a_run_past_its_time_is_a_timeout(tmp_path: Path, settings: dict[str, Any]) -> None:
    root = lay(
        tmp_path / "p",
        {
            "pytest.ini": "[pytest]\n",
            "test_slow.py": "import time\n\ndef test_slow():\n    time.sleep(120)\n",
        },
    )
    outcome = verify(root, settings, timeout_s=2)
    assert (outcome.status, outcome.counts) == ("timeout", None)
    assert outcome.reason == "the run did not end within 2 s and was stopped"


@needs.bubblewrap
def test_a_project_venv_runs_the_tests(tmp_path: Path, settings: dict[str, Any]) -> None:
    root = lay(tmp_path / "p", PASSING)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    # The project's environment reaches this suite's packages (pytest) through a .pth.
    site = subprocess.run(
        [
            str(root / ".venv/bin/python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "suite.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    runner = runners.detect(str(root), {"runner": "auto", "commands": []})
    assert runner is not None and runner.command[0] == ".venv/bin/python"
    settings["path"] = "/usr/bin:/bin"  # no python3 with pytest there: the venv's is used
    outcome = verify(root, settings, runner)
    assert outcome.status == "passed", outcome


@needs.bubblewrap
def test_a_missing_program_is_runtime_missing(tmp_path: Path, settings: dict[str, Any]) -> None:
    runner = Runner("custom", ("no-such-runner-x",), "test", None, ())
    with pytest.raises(Refused) as raised:
        verify(lay(tmp_path / "p", PASSING), settings, runner)
    assert raised.value.code == "VALIDATOR_RUNTIME_MISSING"


@needs.bubblewrap
def test_make_wrapping_pytest_reports_through_pytest_addopts(
    tmp_path: Path, settings: dict[str, Any]
) -> None:
    root = lay(
        tmp_path / "m",
        {
            "Makefile": "build:\n\ttrue\n\ntest: build\n\tpython3 -m pytest -q tests\n",
            "tests/test_calc.py": PASSING["tests/test_calc.py"],
        },
    )
    runner = runners.detect(str(root), {"runner": "auto", "commands": []})
    assert runner is not None and runner.name == "make"
    outcome = verify(root, settings, runner)
    assert outcome.status == "passed", outcome
    assert outcome.counts is not None and outcome.counts["passed"] == 2


@needs.bubblewrap
def test_make_without_a_report_is_not_counted(tmp_path: Path, settings: dict[str, Any]) -> None:
    ok = verify(lay(tmp_path / "ok", {"Makefile": "test:\n\techo 5 passed\n"}), settings)
    assert (ok.status, ok.counts, ok.tests) == ("passed", None, {})
    assert ok.reason.startswith("exit 0; make gives no report Ithaca reads")
    bad = verify(lay(tmp_path / "bad", {"Makefile": "test:\n\ttouch built\n"}), settings)
    assert (bad.status, bad.exit_code) == ("failed", 2)
    assert "Read-only file system" in bad.tail


@needs.bubblewrap
@needs.node
def test_npm_test(tmp_path: Path, settings: dict[str, Any]) -> None:
    settings["path"] = f"{os.path.dirname(shutil.which('npm') or '')}:{CLEAN_PATH}"
    package = {"name": "x", "version": "1.0.0", "scripts": {"test": "node test.js"}}
    files = {"package.json": json.dumps(package)}
    ok = verify(lay(tmp_path / "ok", {**files, "test.js": "console.log('ok')\n"}), settings)
    assert (ok.status, ok.counts) == ("passed", None), ok
    bad = verify(lay(tmp_path / "bad", {**files, "test.js": "process.exit(3)\n"}), settings)
    assert bad.status == "failed", bad


@needs.bubblewrap
def test_cargo_test(tmp_path: Path, settings: dict[str, Any]) -> None:
    cargo = shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")
    assert os.path.exists(cargo), "cargo is on this machine"
    settings["path"] = f"{os.path.dirname(cargo)}:{CLEAN_PATH}"
    root = lay(
        tmp_path / "c",
        {
            "Cargo.toml": "[package]\nname = 'demo'\nversion = '0.1.0'\nedition = '2021'\n",
            "src/lib.rs": "#[cfg(test)]\nmod tests {\n"
            "    #[test]\n    fn adds() { assert_eq!(1 + 2, 3); }\n}\n",
        },
    )
    # A read-only project cannot get its Cargo.lock written, so it has one, as usual.
    subprocess.run(
        [cargo, "generate-lockfile", "--offline"], cwd=root, check=True, capture_output=True
    )
    outcome = verify(root, settings)
    assert (outcome.status, outcome.counts) == ("passed", None), outcome
    assert "test tests::adds ... ok" in outcome.tail or "1 passed" in outcome.tail
