"""The checks a staged install passes before it is swapped in, and the doctor repeats.

An install can read fine and still not work: a staged file that does not parse, a file
that does not say what the provenance records, a command that does not run (the
interpreter moved, Ithaca's package folder is gone). A hook that cannot start is one the
host ignores, so every tool call would run ungated while the settings look wired. So the
preflight parses every staged JSON and TOML file, compares the staged project with the
provenance, checks that each command resolves, and runs the staged SessionStart hook on
a scratch project whose state folder lies in the staging folder, never the project's. The
hook must exit 0, answer nothing or a JSON object, and export the session id through the
host's env file: that shows the command reached Ithaca's hook entry point.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ithaca.hosts.install.files import parse_json_object
from ithaca.hosts.install.hooks import HOOK_PROGRAM
from ithaca.hosts.install.manifest import MISSING, drift, finding
from ithaca.hosts.install.staged import Staged
from ithaca.kernel import IthacaError

HOOK_START_FAILED = "HOOK_START_FAILED"
PREFLIGHT_SESSION = "ithaca-preflight"


def install_checks(
    host: str, root: Path, manifest: dict[str, Any]
) -> Callable[[Staged], list[str]]:
    """The preflight of an install into ``root`` that ``manifest`` records."""

    def check(staged: Staged) -> list[str]:
        problems = parse_problems(staged)
        if problems:
            return problems
        findings = drift(manifest["provenance"], lambda relpath: staged.read(root, relpath))
        findings += unresolved(manifest)
        if not findings:
            findings = hook_answers(host, manifest, staged.folder)
        return [item["message"] for item in findings]

    return check


def parse_problems(staged: Staged) -> list[str]:
    """Each staged JSON or TOML file that does not parse (an uninstall's whole preflight)."""
    problems = []
    for change in staged.changes:
        kind = Path(change.relpath).suffix
        if change.staged is None or kind not in (".json", ".toml"):
            continue
        try:
            text = change.staged.read_bytes().decode("utf-8")
            if kind == ".json":
                parse_json_object(text, change.target)
            else:
                tomllib.loads(text)
        except (IthacaError, ValueError) as exc:
            problems.append(f"the staged {change.target} does not parse ({exc})")
    return problems


def unresolved(manifest: dict[str, Any]) -> list[dict[str, str]]:
    """The hook interpreter and the MCP server command, each unless it can be run."""
    commands = [HOOK_PROGRAM] if manifest.get("hooks") else []
    server = manifest.get("mcpEntry", {}).get("command")
    commands += [server] if isinstance(server, str) else []
    return [
        finding(MISSING, f"command {command}", command, _not_runnable(command))
        for command in dict.fromkeys(commands)
        if not _runnable(command)
    ]


def _not_runnable(command: str) -> str:
    if os.path.isabs(command):
        return f"{command} cannot be run any more"
    return (
        f"{command} is not on PATH, so the hosts cannot start it: install Ithaca as a tool"
        " (uv tool install, or pipx install) or put its bin folder on PATH"
    )


def hook_answers(host: str, manifest: dict[str, Any], folder: Path) -> list[dict[str, str]]:
    """Run the manifest's SessionStart hook on a scratch project made in ``folder``."""
    listed = [item for item in manifest.get("hooks", []) if item["event"] == "SessionStart"]
    if not listed:
        return []
    command = listed[0]["command"]
    scratch = folder / "scratch"
    (scratch / "state").mkdir(parents=True, exist_ok=True)
    env_file = scratch / "session.env"
    env = {**os.environ, "ITHACA_DIR": str(scratch / "state"), _env_variable(host): str(env_file)}
    payload = {
        "session_id": PREFLIGHT_SESSION,
        "cwd": str(scratch),
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    label = "hook SessionStart"
    try:
        done = subprocess.run(
            ["/bin/sh", "-c", command],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=scratch,
            env=env,
            timeout=listed[0].get("timeout", 10),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [finding(HOOK_START_FAILED, label, command, f"the SessionStart hook failed ({exc})")]
    problem = _answer_problem(done, env_file)
    return [finding(HOOK_START_FAILED, label, command, problem)] if problem else []


def _answer_problem(done: subprocess.CompletedProcess[str], env_file: Path) -> str:
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"the SessionStart hook exited with {done.returncode} ({last})"
    if done.stdout.strip():
        try:
            answer = json.loads(done.stdout)
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            return "the SessionStart hook answered something other than a JSON object"
    exported = env_file.read_text() if env_file.exists() else ""
    if f"ITHACA_SESSION_ID={PREFLIGHT_SESSION}" not in exported:
        return "the SessionStart hook ran but did not reach Ithaca (no session exported)"
    return ""


def _env_variable(host: str) -> str:
    """The variable naming the file ``host`` sources before the agent's commands."""
    from importlib import import_module

    from ithaca.hosts import HOSTS

    return str(import_module(HOSTS[host]).SESSION_ENV_FILE)


def _runnable(command: str) -> bool:
    if os.path.isabs(command):
        return os.path.isfile(command) and os.access(command, os.X_OK)
    return shutil.which(command) is not None
