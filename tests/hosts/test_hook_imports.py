"""Hook paths stay on the standard library and Ithaca's own light modules."""

from __future__ import annotations

import json
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest
from tests.accepted import accept

import ithaca
from ithaca import collected, open_project
from ithaca.hosts import HOSTS
from ithaca.hosts.claude.installer import hook_command

HEAVY = (
    "pydantic",
    "mcp",
    "click",
    "rich",
    "typer",
    "httpx",
    "starlette",
    "anyio",
    "rfc8785",
    "icu",
)
# Standard modules that each cost milliseconds of every hook call on a slow machine: ``re``
# (with ``enum`` and its compiler) through ``json``, ``shlex`` and ``fnmatch``; ``datetime``
# through the ``sqlite3`` package; ``importlib``; ``functools`` with ``collections`` and
# ``types`` through ``_sqlite3`` and ``namedtuple``. Hooks use ``_json``, ``_sqlite3`` (with
# a stand-in ``functools``), ``kernel.tuples`` and string methods instead.
SLOW = (
    "json",
    "re",
    "enum",
    "sqlite3",
    "datetime",
    "shlex",
    "fnmatch",
    "importlib",
    "functools",
    "collections",
    "types",
)


def _hook_modules() -> list[str]:
    package = Path(ithaca.__file__).parent
    # The dispatcher and its gates, and each host's adapter; installers are not on it.
    names = [
        f"ithaca.hosts.{m.name}"
        for m in pkgutil.iter_modules([str(package / "hosts")])
        if not m.ispkg
    ]
    names += list(HOSTS.values())  # each host's package is its adapter
    names += [name for name, _ in collected("GATES")]  # every gate the parts register
    names += ["ithaca.kernel.classify", "ithaca.kernel.git", "ithaca.protocols.enforcement"]
    return sorted(set(names))


def _loaded_after(code: str) -> set[str]:
    probe = code + "\nimport sys, json\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return {name.split(".")[0] for name in json.loads(done.stdout.splitlines()[-1])}


def test_every_hook_module_imports_without_third_party_packages():
    modules = _hook_modules()
    assert "ithaca.protocols.gate" in modules
    loaded = _loaded_after("\n".join(f"import {name}" for name in modules))
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_a_full_pre_tool_use_call_loads_no_third_party_package(tmp_path):
    code = (
        "import io, json, sys\n"
        "from ithaca.hosts import dispatch\n"
        f"payload = {{'session_id': 's1', 'cwd': {str(tmp_path)!r}, 'tool_name': 'Edit',"
        " 'tool_input': {'file_path': 'a.py'}}\n"
        "dispatch.run('claude', 'PreToolUse', json.dumps(payload))\n"
    )
    (tmp_path / ".ithaca").mkdir()
    loaded = _loaded_after(code)
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_hook_modules_do_not_import_dataclasses_or_typing():
    # Both cost milliseconds at start-up; hooks run on every tool call.
    loaded = _loaded_after("\n".join(f"import {name}" for name in _hook_modules()))
    assert "dataclasses" not in loaded
    assert "typing" not in loaded


def _imported_by_the_installed_hook(event: str, payload: dict[str, object]) -> set[str]:
    """Every module the hook process ``ithaca install`` writes imports for one call."""
    done = subprocess.run(
        ["/bin/sh", "-c", hook_command(event)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
    )
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "imported package" not in line
    }


@pytest.fixture
def governed_project(project_dir: Path) -> Path:
    """A project whose bundle has command and path rules, with a prompt admitted and its
    protocols loaded, so that tool calls take the normal path through every gate. It has a
    team configuration and a team rule file too (accepted, as the user accepts them), so
    that the hooks read the configuration's cache and list the rule files."""
    (project_dir / ".ithaca" / "config.toml").write_text('[protocols]\nproject_id = "p"\n')
    (project_dir / ".ithaca" / "protocols" / "team.from-file.json").write_text(
        json.dumps(
            {
                "id": "team.from-file",
                "name": "From a file",
                "description": "A file.",
                "priority": 0,
                "selector": {},
                "rules": ["Keep it."],
            }
        )  # fmt: skip
    )
    accept(project_dir)
    project = open_project(project_dir)
    for protocol_id, constraint in (
        ("team.no-force-push", {"kind": "deny_command", "commands": ["git push --force"]}),
        ("team.secrets", {"kind": "deny_path", "paths": ["secrets/**", "*.key"]}),
    ):
        project.protocols.create_protocol(
            {
                "id": protocol_id,
                "name": protocol_id,
                "description": "A rule that applies to every call.",
                "priority": 0,
                "selector": {},
                "rules": ["Follow the rule."],
                "constraints": [constraint],
            },
            actor="user",
        )
    answer = json.loads(
        subprocess.run(
            ["/bin/sh", "-c", hook_command("UserPromptSubmit")],
            input=json.dumps({"session_id": "s1", "cwd": str(project_dir), "prompt": "Go."}),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    context = answer["hookSpecificOutput"]["additionalContext"]
    event_id = context.split("as event ", 1)[1].split(" ", 1)[0]
    project.protocols.load_protocols({"eventId": event_id})
    project.close()
    return project_dir


@pytest.mark.parametrize(
    ("event", "tool"),
    [
        ("UserPromptSubmit", None),
        ("PreToolUse", {"tool_name": "Edit", "tool_input": {"file_path": "src/app.py"}}),
        ("PreToolUse", {"tool_name": "Bash", "tool_input": {"command": "git status && ls"}}),
        ("PreToolUse", {"tool_name": "Task", "tool_input": {"subagent_type": "code-reviewer"}}),
        ("Stop", {"stop_hook_active": False}),
    ],
)
def test_a_hook_call_imports_none_of_the_slow_standard_modules(governed_project, event, tool):
    payload = {"session_id": "s1", "cwd": str(governed_project), "prompt": "Go on.", **(tool or {})}
    imported = _imported_by_the_installed_hook(event, payload)
    assert "ithaca.hosts.dispatch" in imported
    assert imported.isdisjoint(SLOW), sorted(imported & set(SLOW))
    assert imported.isdisjoint(HEAVY), sorted(imported & set(HEAVY))
