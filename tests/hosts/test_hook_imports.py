"""Hook paths stay on the standard library and Ithaca's own light modules."""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import ithaca

HEAVY = ("pydantic", "mcp", "click", "rich", "typer", "httpx", "starlette", "anyio", "rfc8785")


def _hook_modules() -> list[str]:
    package = Path(ithaca.__file__).parent
    names = [
        f"ithaca.hosts.{m.name}"
        for m in pkgutil.iter_modules([str(package / "hosts")])
        if not m.name.startswith("install")
    ]
    names += [f"ithaca.{path.parent.name}.gate" for path in package.glob("*/gate.py")]
    names += ["ithaca.kernel.guard", "ithaca.kernel.classify", "ithaca.protocols.enforcement"]
    return names


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
