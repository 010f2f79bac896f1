"""Finding the project's test runner from real file layouts, and from the configuration."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from tests.verification.files import lay

from ithaca.kernel.errors import InvalidInput
from ithaca.verification.runners import Runner, detect

AUTO: dict[str, Any] = {"runner": "auto", "commands": [], "timeout_s": 60, "max_blocks": 3}
PYTHON = ("python3", "-m", "pytest")


def found(root: Path, **settings: Any) -> Runner:
    runner = detect(str(root), {**AUTO, **settings})
    assert runner is not None
    return runner


UNITTEST_TEST = "import unittest\n\nclass T(unittest.TestCase):\n    def test_a(self): pass\n"


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"pytest.ini": "[pytest]\n"}, "pytest.ini configures pytest"),
        ({".pytest.ini": "[pytest]\n"}, ".pytest.ini configures pytest"),
        (
            {"pyproject.toml": "[tool.pytest.ini_options]\naddopts = '-q'\n"},
            "pyproject.toml has [tool.pytest.ini_options]",
        ),
        (
            {"pyproject.toml": "[tool.pytest]\nminversion = '9'\n"},
            "pyproject.toml has [tool.pytest]",
        ),
        ({"tox.ini": "[tox]\nenvlist = py\n[pytest]\naddopts = -q\n"}, "tox.ini has a [pytest]"),
        ({"setup.cfg": "[metadata]\nname = x\n[tool:pytest]\n"}, "setup.cfg has a [tool:pytest]"),
        ({"tests/unit/conftest.py": "", "tests/unit/test_a.py": ""}, "tests/unit/conftest.py is a"),
        (
            {"pyproject.toml": "[dependency-groups]\ndev = ['pytest>=8', 'ruff']\n"},
            "pyproject.toml declares pytest",
        ),
        (
            {
                "pyproject.toml": "[project]\nname='x'\n[project.optional-dependencies]\n"
                "test = ['pytest-cov']\n"
            },
            "pyproject.toml declares pytest",
        ),
        (
            {"pyproject.toml": "[tool.poetry.group.dev.dependencies]\npytest = '^8'\n"},
            "pyproject.toml declares pytest",
        ),
        ({"requirements-dev.txt": "ruff\npytest==8.3\n"}, "requirements-dev.txt declares pytest"),
        (
            {
                "tox.ini": "[tox]\nenvlist = py\n[testenv]\ndeps = -rreq.txt\n"
                "commands = pytest {posargs}\n"
            },
            "tox.ini's sessions run pytest",
        ),
        (
            {"noxfile.py": "import nox\n@nox.session\ndef t(s):\n    s.run('pytest')\n"},
            "noxfile.py's sessions run pytest",
        ),
    ],
)
def test_pytest_is_found_from_its_configuration_or_its_declaration(
    tmp_path: Path, files: dict[str, str], why: str
) -> None:
    runner = found(lay(tmp_path, {**files, "tests/test_x.py": UNITTEST_TEST}))
    assert (runner.name, runner.command, runner.report) == ("pytest", PYTHON, "junit")
    assert runner.why.startswith(why), runner.why
    assert "python3 from Ithaca's PATH" in runner.why
    assert "**/conftest.py" in runner.config and "pyproject.toml" in runner.config


def test_a_bare_pyproject_with_unittest_tests_gets_unittest(tmp_path: Path) -> None:
    """The real case: a pyproject.toml naming the project and nothing about pytest."""
    lay(
        tmp_path,
        {
            "pyproject.toml": "[project]\nname = 'calc'\nversion = '1'\ndependencies = ['attrs']\n",
            "calc/__init__.py": "",
            "tests/__init__.py": "",
            "tests/test_calc.py": UNITTEST_TEST,
        },
    )
    runner = found(tmp_path)
    assert (runner.name, runner.command, runner.report) == (
        "unittest",
        ("python3", "-m", "unittest"),
        "unittest",
    )
    assert runner.why.startswith("1 unittest test file(s) such as tests/test_calc.py and no pytest")
    assert "unittest.py" in runner.config


def test_unittest_discovers_from_a_test_folder_that_is_not_a_package(tmp_path: Path) -> None:
    """``python -m unittest`` alone does not enter a folder without ``__init__.py``."""
    lay(tmp_path, {"pyproject.toml": "[project]\nname='x'\n", "tests/test_a.py": UNITTEST_TEST})
    assert found(tmp_path).command == ("python3", "-m", "unittest", "discover", "-s", "tests")


def test_test_files_in_environments_and_dependencies_are_not_evidence(tmp_path: Path) -> None:
    lay(
        tmp_path,
        {
            "node_modules/x/test_a.py": UNITTEST_TEST,
            ".venv/lib/test_b.py": UNITTEST_TEST,
            "env/pyvenv.cfg": "home = /usr\n",
            "env/lib/site/test_c.py": UNITTEST_TEST,
            "env/lib/site/conftest.py": "",
        },
    )
    assert detect(str(tmp_path), AUTO) is None


def test_the_project_venv_is_the_interpreter(tmp_path: Path) -> None:
    lay(
        tmp_path,
        {"pytest.ini": "", ".venv/pyvenv.cfg": "home = /usr/bin\n", ".venv/bin/python": ""},
    )
    runner = found(tmp_path)
    assert runner.command == (".venv/bin/python", "-m", "pytest")
    assert runner.why.endswith("run with the project's .venv/bin/python")


def test_tox_and_nox_that_run_something_else_are_the_runner(tmp_path: Path) -> None:
    tox = lay(
        tmp_path / "tox", {"tox.ini": "[tox]\nenvlist = py\n[testenv]\ncommands = stestr run\n"}
    )
    assert (found(tox).name, found(tox).command, found(tox).report) == ("tox", ("tox",), None)
    assert "tox.ini" in found(tox).config and "tox.ini defines" in found(tox).why
    nox = lay(
        tmp_path / "nox",
        {"noxfile.py": "import nox\n@nox.session\ndef t(s):\n    s.run('trial', 'x')\n"},
    )
    assert (found(nox).name, found(nox).command) == ("nox", ("nox",))
    assert "noxfile.py" in found(nox).config


def test_tox_running_unittest_gives_way_to_unittest(tmp_path: Path) -> None:
    lay(
        tmp_path,
        {
            "tox.ini": "[testenv]\ncommands = python -m unittest\n",
            "test_a.py": UNITTEST_TEST,
        },
    )
    assert found(tmp_path).command == ("python3", "-m", "unittest")


@pytest.mark.parametrize(
    ("lock", "name"), [(None, "npm"), ("pnpm-lock.yaml", "pnpm"), ("yarn.lock", "yarn")]
)
def test_package_json_test_script(tmp_path: Path, lock: str | None, name: str) -> None:
    lay(tmp_path, {"package.json": json.dumps({"scripts": {"test": "vitest run"}})})
    if lock:
        lay(tmp_path, {lock: ""})
    runner = found(tmp_path)
    assert (runner.name, runner.command, runner.report) == (name, (name, "test"), None)
    assert runner.why.startswith("package.json scripts.test")
    assert "package.json" in runner.config and "vitest.config.*" in runner.config


def test_npm_placeholder_script_is_no_runner(tmp_path: Path) -> None:
    placeholder = 'echo "Error: no test specified" && exit 1'
    lay(tmp_path, {"package.json": json.dumps({"scripts": {"test": placeholder}})})
    assert detect(str(tmp_path), AUTO) is None


def test_cargo_go_and_make(tmp_path: Path) -> None:
    cargo = found(lay(tmp_path / "c", {"Cargo.toml": "[package]\nname = 'x'\n"}))
    assert (cargo.name, cargo.command, cargo.report) == ("cargo", ("cargo", "test"), None)
    assert ".cargo/config.toml" in cargo.config
    go = found(lay(tmp_path / "g", {"go.mod": "module example.com/x\n"}))
    assert (go.name, go.command, go.report, go.config) == (
        "go",
        ("go", "test", "./..."),
        "go-json",
        ("go.mod", "go.work"),
    )
    make = found(lay(tmp_path / "m", {"Makefile": "all:\n\tcc x.c\ntest: all\n\t./run\n"}))
    assert (make.name, make.command, make.why) == (
        "make",
        ("make", "test"),
        "Makefile has a test: target",
    )
    check = found(lay(tmp_path / "k", {"GNUmakefile": "check:\n\t./run\n"}))
    assert check.command == ("make", "check")
    variable = lay(tmp_path / "v", {"Makefile": "test := yes\nall:\n\ttrue\n"})
    assert detect(str(variable), AUTO) is None


def test_a_makefile_that_runs_the_python_tests_comes_before_unittest(tmp_path: Path) -> None:
    lay(
        tmp_path,
        {"Makefile": "test:\n\tPYTHONPATH=src python3 -m unittest\n", "test_a.py": UNITTEST_TEST},
    )
    runner = found(tmp_path)
    assert (runner.name, runner.command) == ("make", ("make", "test"))
    assert (
        runner.why
        == "Makefile's test: target runs the Python tests (the project's own way to run them)"
    )
    lay(tmp_path, {"Makefile": "test:\n\t./check.sh\n"})
    assert found(tmp_path).name == "unittest"


def test_python_comes_before_package_json(tmp_path: Path) -> None:
    lay(tmp_path, {"package.json": json.dumps({"scripts": {"test": "jest"}}), "pytest.ini": ""})
    assert found(tmp_path).name == "pytest"


def test_nothing_found(tmp_path: Path) -> None:
    lay(tmp_path, {"README.md": "hello\n", "pyproject.toml": "not [ toml"})
    assert detect(str(tmp_path), AUTO) is None


@pytest.mark.parametrize(
    ("line", "name", "command", "report"),
    [
        ("make ci", "custom", ("sh", "-c", "make ci"), None),
        (
            "pytest -q tests/ | tee out",
            "custom",
            ("sh", "-c", "pytest -q tests/ | tee out"),
            "junit",
        ),
        (
            "python3 -m unittest discover -s t",
            "custom",
            ("python3", "-m", "unittest", "discover", "-s", "t"),
            "unittest",
        ),
        ("go test ./pkg/...", "custom", ("go", "test", "./pkg/..."), "go-json"),
    ],
)
def test_configured_commands_win(
    tmp_path: Path, line: str, name: str, command: tuple[str, ...], report: str | None
) -> None:
    lay(tmp_path, {"pytest.ini": "", "Makefile": "test:\n\ttrue\n"})
    runner = found(tmp_path, commands=[line, "other"])
    assert (runner.name, runner.command, runner.report) == (name, command, report)
    assert runner.why.startswith("configured in [verification] commands")


def test_a_named_runner_wins_over_the_files(tmp_path: Path) -> None:
    lay(tmp_path, {"pytest.ini": "", "Makefile": "check:\n\ttrue\n", "package.json": "{}"})
    assert found(tmp_path, runner="make").command == ("make", "check")
    assert found(tmp_path, runner="npm").command == ("npm", "test")
    forced = found(tmp_path, runner="unittest", commands=["make"])
    assert forced.command == ("python3", "-m", "unittest")
    assert forced.why.startswith("configured in [verification] runner = 'unittest'")


def test_a_bad_runner_setting_is_invalid_config(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as raised:
        detect(str(tmp_path), {**AUTO, "runner": "jest"})
    assert raised.value.code == "INVALID_CONFIG"
    with pytest.raises(InvalidInput):
        detect(str(tmp_path), {**AUTO, "runner": "custom"})


def test_detection_does_not_wander(tmp_path: Path) -> None:
    """Test files deeper than the search goes are not evidence."""
    deep = os.path.join(*["d"] * 8, "test_a.py")
    lay(tmp_path, {deep: UNITTEST_TEST})
    assert detect(str(tmp_path), AUTO) is None
