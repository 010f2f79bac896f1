"""Which test runner verifies a project, found from its files or its configuration.

The end-of-turn critic and ``ithaca verify`` run the project's tests themselves, so they
need the runner a person would run: ``[verification] runner`` when the user named one,
``[verification] commands`` when the user wrote the line, else the evidence of the
project's files, first match wins:

1. pytest: its configuration (``pytest.ini``, ``.pytest.ini``, ``[tool.pytest.ini_options]``
   or ``[tool.pytest]`` in ``pyproject.toml``, ``[pytest]`` in ``tox.ini``, ``[tool:pytest]``
   in ``setup.cfg``, a ``conftest.py``), pytest as a declared dependency, or a ``tox.ini``
   or ``noxfile.py`` whose sessions run pytest;
2. nox, then tox, when their sessions run something else than pytest or unittest (both
   build environments, which needs network, so they are the last Python resort);
3. make, when Python test files exist and a ``Makefile``'s ``test:`` (or ``check:``)
   recipe runs pytest or unittest (the project's own way to run them);
4. unittest, when Python test files (``test*.py``) exist and nothing says pytest;
5. ``package.json`` ``scripts.test`` (npm; pnpm with ``pnpm-lock.yaml``, yarn with
   ``yarn.lock``), ``Cargo.toml`` (cargo), ``go.mod`` (go), a ``Makefile`` with a ``test:``
   or ``check:`` target (make).

A Python runner runs under the project's own interpreter (``.venv/bin/python`` or
``venv/bin/python``) when there is one, else ``python3`` looked up on the PATH Ithaca
gives the run. ``Runner.command`` is the line as a person types it; the run
(``verification.run``) asks it for a report Ithaca reads (``report``). ``Runner.config``
names the files that configure the runner, which the critic holds to the turn's start.

Standard library only: the critic detects the runner in the hook.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ithaca.verification.configs import (
    CARGO_CONFIG,
    GO_CONFIG,
    MAKE_CONFIG,
    NOX_CONFIG,
    NPM_CONFIG,
    PNPM_CONFIG,
    PYTEST_CONFIG,
    TOX_CONFIG,
    UNITTEST_CONFIG,
    YARN_CONFIG,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

NAMES = ("pytest", "unittest", "tox", "nox", "make", "npm", "pnpm", "yarn", "cargo", "go", "custom")
REPORTS = ("junit", "unittest", "go-json")
# npm init's placeholder test script, which runs no test.
NPM_PLACEHOLDER = "Error: no test specified"
# The test files ``python -m unittest`` discovers by default.
UNITTEST_PATTERN = re.compile(r"test.*\.py\Z")
# Folders a search for test files never enters: environments, dependencies, build output.
NOT_SEARCHED = frozenset(
    {"node_modules", "site-packages", "__pycache__", "build", "dist", "target", "vendor"}
)
# How deep and how wide the search for test files and conftest.py may go.
MAX_DEPTH = 6
MAX_FOLDERS = 4000
MAX_READ = 1024 * 1024


@dataclass(frozen=True)
class Runner:
    """The project's test runner: what Ithaca runs, why it chose it, which report it
    reads back, and the files that configure it."""

    name: str  # one of NAMES
    command: tuple[str, ...]  # argv; "custom": ("sh", "-c", "<configured line>")
    why: str  # one sentence for ``ithaca status``: which file or setting decided it
    report: str | None  # one of REPORTS, or None: the runner gives no report
    config: tuple[str, ...]  # glob patterns (relative, POSIX; "**/" prefix allowed)


def detect(root: str, settings: Mapping[str, Any]) -> Runner | None:
    """The runner for the project at ``root``, or None when nothing names one.

    ``settings`` is ``config["verification"]``: ``runner`` ("auto" or a name in NAMES)
    wins, then ``commands`` (its first line), then the project's files. Raises
    ``INVALID_CONFIG`` for an unknown runner name, or "custom" without commands."""
    chosen = settings.get("runner") or "auto"
    commands = [line for line in settings.get("commands") or [] if str(line).strip()]
    if chosen not in ("auto", *NAMES):
        from ithaca.kernel.errors import InvalidInput

        raise InvalidInput(
            "INVALID_CONFIG",
            f"verification.runner is {chosen!r}; one of auto, {', '.join(NAMES)}",
            {"key": "verification.runner"},
        )
    if chosen in ("auto", "custom") and commands:
        return _configured_line(root, str(commands[0]))
    if chosen == "custom":
        from ithaca.kernel.errors import InvalidInput

        raise InvalidInput(
            "INVALID_CONFIG",
            "verification.runner is custom but verification.commands is empty",
            {"key": "verification.runner"},
        )
    if chosen != "auto":
        return _forced(root, chosen)
    return _found(_Project(root))


# --- configured -------------------------------------------------------------------------


def _forced(root: str, name: str) -> Runner:
    why = f"configured in [verification] runner = {name!r}"
    project = _Project(root)
    if name in ("pytest", "unittest"):
        python, where = _python(root)
        if name == "pytest":
            return Runner("pytest", (python, "-m", "pytest"), f"{why}; {where}", "junit",
                          PYTEST_CONFIG)  # fmt: skip
        return Runner("unittest", (python, "-m", "unittest", *_unittest_arguments(project)),
                      f"{why}; {where}", "unittest", UNITTEST_CONFIG)  # fmt: skip
    if name == "make":
        target = _make_target(project) or "test"
        return Runner("make", ("make", target), why, None, MAKE_CONFIG)
    fixed = {
        "tox": (("tox",), TOX_CONFIG),
        "nox": (("nox",), NOX_CONFIG),
        "npm": (("npm", "test"), NPM_CONFIG),
        "pnpm": (("pnpm", "test"), PNPM_CONFIG),
        "yarn": (("yarn", "test"), YARN_CONFIG),
        "cargo": (("cargo", "test"), CARGO_CONFIG),
        "go": (("go", "test", "./..."), GO_CONFIG),
    }
    command, config = fixed[name]
    return Runner(name, command, why, "go-json" if name == "go" else None, config)


def _configured_line(root: str, line: str) -> Runner:
    """The runner for a configured shell line: a plain ``python -m unittest …`` or ``go
    test …`` keeps its words so Ithaca can ask it for a report; anything else runs as
    written through ``sh -c`` (pytest, wherever it runs in the line, reports through the
    ``PYTEST_ADDOPTS`` Ithaca sets)."""
    why = "configured in [verification] commands"
    words = _plain_words(line)
    if words and len(words) >= 3 and _is_python(words[0]) and words[1:3] == ["-m", "unittest"]:
        return Runner("custom", tuple(words), f"{why} (unittest, run with Ithaca's reporter)",
                      "unittest", UNITTEST_CONFIG)  # fmt: skip
    if words and len(words) >= 2 and os.path.basename(words[0]) == "go" and words[1] == "test":
        return Runner("custom", tuple(words), f"{why} (go test, asked for -json)", "go-json",
                      GO_CONFIG)  # fmt: skip
    command = ("sh", "-c", line)
    if re.search(r"(^|[\s/])(py\.test|pytest)(\s|$)", line):
        return Runner("custom", command, f"{why} (pytest, asked for a JUnit report)", "junit",
                      PYTEST_CONFIG)  # fmt: skip
    first = words[0] if words else line.split(None, 1)[0] if line.split() else ""
    config = {
        "make": MAKE_CONFIG,
        "npm": NPM_CONFIG,
        "pnpm": PNPM_CONFIG,
        "yarn": YARN_CONFIG,
        "cargo": CARGO_CONFIG,
        "go": GO_CONFIG,
        "tox": TOX_CONFIG,
        "nox": NOX_CONFIG,
    }.get(os.path.basename(first), ())
    return Runner("custom", command, why, None, config)


def _plain_words(line: str) -> list[str] | None:
    """The words of ``line`` when it is one simple command (no operator, substitution,
    redirection or variable), else None."""
    import shlex

    if any(char in line for char in "|;&<>`$(){}\n*?[]~"):
        return None
    try:
        return shlex.split(line)
    except ValueError:
        return None


def _is_python(word: str) -> bool:
    return re.fullmatch(r"python(3(\.\d+)?)?", os.path.basename(word)) is not None


# --- found from the project's files ---------------------------------------------------


class _Project:
    """The project's files, each read at most once."""

    def __init__(self, root: str):
        self.root = root
        self._texts: dict[str, str | None] = {}
        self._walked: tuple[list[str], list[str]] | None = None
        self._toml: dict[str, Any] | None = None

    def exists(self, relative: str) -> bool:
        return os.path.isfile(os.path.join(self.root, relative))

    def text(self, relative: str) -> str | None:
        if relative not in self._texts:
            try:
                with open(os.path.join(self.root, relative), "rb") as handle:
                    data = handle.read(MAX_READ)
                self._texts[relative] = data.decode("utf-8", "replace")
            except OSError:
                self._texts[relative] = None
        return self._texts[relative]

    def pyproject(self) -> dict[str, Any]:
        if self._toml is None:
            import tomllib

            text = self.text("pyproject.toml")
            try:
                self._toml = tomllib.loads(text) if text else {}
            except tomllib.TOMLDecodeError:
                self._toml = {}
        return self._toml

    def sections(self, relative: str) -> dict[str, str]:
        """An INI file's sections, each as its raw text (None-safe, tolerant)."""
        text = self.text(relative)
        found: dict[str, str] = {}
        current: str | None = None
        for line in (text or "").splitlines():
            header = re.match(r"\s*\[([^\]]+)\]\s*$", line)
            if header:
                current = header.group(1).strip()
                found.setdefault(current, "")
            elif current is not None:
                found[current] += line + "\n"
        return found

    def walk(self) -> tuple[list[str], list[str]]:
        """(conftest.py files, unittest-style test files), relative, found within
        MAX_DEPTH folders and MAX_FOLDERS in all, outside hidden folders, environments
        and dependencies."""
        if self._walked is None:
            conftests: list[str] = []
            tests: list[str] = []
            pending = [("", 0)]
            seen = 0
            while pending and seen < MAX_FOLDERS:
                relative, depth = pending.pop(0)
                seen += 1
                try:
                    entries = sorted(os.scandir(os.path.join(self.root, relative)),
                                     key=lambda entry: entry.name)  # fmt: skip
                except OSError:
                    continue
                for entry in entries:
                    path = f"{relative}{entry.name}"
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            if depth < MAX_DEPTH and _searched(entry):
                                pending.append((f"{path}/", depth + 1))
                        elif entry.name == "conftest.py":
                            conftests.append(path)
                        elif UNITTEST_PATTERN.match(entry.name):
                            tests.append(path)
                    except OSError:
                        continue
            self._walked = (conftests, tests)
        return self._walked


def _searched(entry: os.DirEntry[str]) -> bool:
    if entry.name.startswith(".") or entry.name in NOT_SEARCHED:
        return False
    return not os.path.exists(os.path.join(entry.path, "pyvenv.cfg"))


def _found(project: _Project) -> Runner | None:
    pytest_sign = _pytest_sign(project)
    if pytest_sign is not None:
        python, where = _python(project.root)
        return Runner("pytest", (python, "-m", "pytest"), f"{pytest_sign}; {where}", "junit",
                      PYTEST_CONFIG)  # fmt: skip
    tests = project.walk()[1]
    for name, file, config in (("nox", "noxfile.py", NOX_CONFIG), ("tox", "tox.ini", TOX_CONFIG)):
        sessions = _sessions(project, file)
        if sessions is not None and not (tests and "unittest" in sessions):
            return Runner(name, (name,), f"{file} defines the test sessions and runs neither"
                          " pytest nor unittest", None, config)  # fmt: skip
    target = _make_target(project)
    runs_python = target is not None and re.search(
        r"\b(pytest|unittest)\b", _recipe(project, target)
    )
    if tests and target is not None and runs_python:
        name = _makefile(project)
        why = f"{name}'s {target}: target runs the Python tests (the project's own way to run them)"
        return Runner("make", ("make", target), why, None, MAKE_CONFIG)
    if tests:
        python, where = _python(project.root)
        arguments = _unittest_arguments(project)
        found = f"{len(tests)} unittest test file(s) such as {tests[0]}"
        why = f"{found} and no pytest configuration or dependency; {where}"
        return Runner("unittest", (python, "-m", "unittest", *arguments), why, "unittest",
                      UNITTEST_CONFIG)  # fmt: skip
    package = _package_test(project)
    if package is not None:
        return package
    if project.exists("Cargo.toml"):
        return Runner("cargo", ("cargo", "test"), "Cargo.toml is a Rust package", None,
                      CARGO_CONFIG)  # fmt: skip
    if project.exists("go.mod"):
        return Runner("go", ("go", "test", "./..."), "go.mod is a Go module", "go-json",
                      GO_CONFIG)  # fmt: skip
    if target is not None:
        name = _makefile(project)
        return Runner("make", ("make", target), f"{name} has a {target}: target", None,
                      MAKE_CONFIG)  # fmt: skip
    return None


def _pytest_sign(project: _Project) -> str | None:
    """Which file says the project uses pytest, as the sentence ``why`` starts with."""
    for name in ("pytest.ini", ".pytest.ini"):
        if project.exists(name):
            return f"{name} configures pytest"
    tool = project.pyproject().get("tool")
    if isinstance(tool, dict) and isinstance(tool.get("pytest"), dict):
        key = "ini_options" if "ini_options" in tool["pytest"] else None
        return f"pyproject.toml has [tool.pytest{'.' + key if key else ''}]"
    if "pytest" in project.sections("tox.ini"):
        return "tox.ini has a [pytest] section"
    if "tool:pytest" in project.sections("setup.cfg"):
        return "setup.cfg has a [tool:pytest] section"
    conftests = project.walk()[0]
    if conftests:
        return f"{conftests[0]} is a pytest conftest.py"
    declared = _declares_pytest(project)
    if declared is not None:
        return f"{declared} declares pytest as a dependency"
    for file in ("tox.ini", "noxfile.py"):
        sessions = _sessions(project, file)
        if sessions is not None and re.search(r"\b(py\.test|pytest)\b", sessions):
            return (
                f"{file}'s sessions run pytest (Ithaca runs it directly: building their"
                " environments needs network)"
            )
    return None


_REQUIREMENT = re.compile(r"^\s*(pytest)(-[\w.-]+)?\s*(\[|[<>=!~;@ ]|$)", re.IGNORECASE)


def _declares_pytest(project: _Project) -> str | None:
    """The file that declares pytest (or a pytest plugin) as a dependency, if any."""
    data = project.pyproject()
    declared: list[Any] = []
    project_table = data.get("project")
    if isinstance(project_table, dict):
        declared.append(project_table.get("dependencies"))
        declared += list(_values(project_table.get("optional-dependencies")))
    declared += list(_values(data.get("dependency-groups")))
    tool = _table(data, "tool")
    poetry = _table(tool, "poetry")
    for key in ("dependencies", "dev-dependencies"):
        if isinstance(poetry.get(key), dict):
            declared.append(list(poetry[key]))
    for group in _values(poetry.get("group")):
        if isinstance(group, dict) and isinstance(group.get("dependencies"), dict):
            declared.append(list(group["dependencies"]))
    for table in ("pdm", "uv"):
        section = _table(tool, table)
        declared += list(_values(section.get("dev-dependencies")))
        if isinstance(section.get("dev-dependencies"), list):
            declared.append(section["dev-dependencies"])
    for group in declared:
        if isinstance(group, list) and any(
            isinstance(item, str) and _REQUIREMENT.match(item) for item in group
        ):
            return "pyproject.toml"
    requirements = [
        name
        for name in _listing(project.root, "")
        if re.fullmatch(r"(requirements|dev-requirements|test-requirements)[\w.-]*\.(txt|in)", name)
    ]
    requirements += [f"requirements/{name}" for name in _listing(project.root, "requirements")
                     if name.endswith((".txt", ".in"))]  # fmt: skip
    for name in sorted(requirements):
        if any(_REQUIREMENT.match(line) for line in (project.text(name) or "").splitlines()):
            return name
    setup = project.sections("setup.cfg")
    for part in ("options.extras_require", "options"):
        if any(_REQUIREMENT.match(line) for line in setup.get(part, "").splitlines()):
            return "setup.cfg"
    pipfile = project.sections("Pipfile")
    listed = pipfile.get("dev-packages", "") + pipfile.get("packages", "")
    if re.search(r"^\s*\"?pytest\"?\s*=", listed, re.MULTILINE):
        return "Pipfile"
    return None


def _table(parent: Mapping[str, Any], key: str) -> dict[str, Any]:
    found = parent.get(key)
    return found if isinstance(found, dict) else {}


def _values(table: Any) -> list[Any]:
    return list(table.values()) if isinstance(table, dict) else []


def _listing(root: str, relative: str) -> list[str]:
    try:
        return sorted(os.listdir(os.path.join(root, relative)))
    except OSError:
        return []


def _sessions(project: _Project, file: str) -> str | None:
    """The text of the test sessions ``file`` defines (tox.ini's ``[tox]``/``[testenv…]``
    sections, or a whole noxfile.py), or None when it defines none."""
    if file == "noxfile.py":
        return project.text(file) if project.exists(file) else None
    sections = project.sections(file)
    found = [body for name, body in sections.items() if name == "tox" or name.startswith("testenv")]
    return "\n".join(found) if found else None


def _unittest_arguments(project: _Project) -> tuple[str, ...]:
    """The discovery arguments ``python -m unittest`` needs here: none when test files
    sit at the root or in a package below it (the default discovery finds them), else
    ``discover -s <folder>`` for the first folder of tests that is not a package."""
    tests = project.walk()[1]
    if not tests or any("/" not in path for path in tests):
        return ()
    for path in tests:
        top = path.split("/", 1)[0]
        if not project.exists(f"{top}/__init__.py"):
            return ("discover", "-s", top)
    return ()


def _package_test(project: _Project) -> Runner | None:
    import json

    text = project.text("package.json")
    if text is None:
        return None
    try:
        package = json.loads(text)
    except ValueError:
        return None
    scripts = package.get("scripts") if isinstance(package, dict) else None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or NPM_PLACEHOLDER in script:
        return None
    for name, lock, config in (
        ("pnpm", "pnpm-lock.yaml", PNPM_CONFIG),
        ("yarn", "yarn.lock", YARN_CONFIG),
    ):
        if project.exists(lock):
            why = f"package.json scripts.test, with {lock} (a {name} project)"
            return Runner(name, (name, "test"), why, None, config)
    return Runner("npm", ("npm", "test"), "package.json scripts.test", None, NPM_CONFIG)


def _makefile(project: _Project) -> str:
    """The makefile ``make`` reads (GNU make's order)."""
    return next(n for n in ("GNUmakefile", "makefile", "Makefile") if project.exists(n))


def _recipe(project: _Project, target: str) -> str:
    """The recipe lines of ``target``'s rule in the makefile ``make`` reads."""
    lines: list[str] = []
    inside = False
    for line in (project.text(_makefile(project)) or "").splitlines():
        if line.startswith("\t"):
            if inside:
                lines.append(line)
            continue
        rule = re.match(r"^([A-Za-z0-9_.%/ -]+?)\s*::?(?![=])", line)
        if rule:
            inside = target in rule.group(1).split()
    return "\n".join(lines)


def _make_target(project: _Project) -> str | None:
    """``test`` or ``check``, the first a Makefile defines as a rule."""
    for name in ("GNUmakefile", "makefile", "Makefile"):
        text = project.text(name)
        if text is None:
            continue
        targets: set[str] = set()
        for line in text.splitlines():
            rule = re.match(r"^([A-Za-z0-9_.%/ -]+?)\s*::?(?![=])", line)
            if rule:
                targets.update(rule.group(1).split())
        for target in ("test", "check"):
            if target in targets:
                return target
        return None
    return None


def _python(root: str) -> tuple[str, str]:
    """The interpreter a Python runner runs under, and the clause ``why`` ends with."""
    for folder in (".venv", "venv"):
        relative = f"{folder}/bin/python"
        if os.path.isfile(os.path.join(root, relative)) and os.path.isfile(
            os.path.join(root, folder, "pyvenv.cfg")
        ):
            return relative, f"run with the project's {relative}"
    return "python3", "run with python3 from Ithaca's PATH (the project has no .venv)"
