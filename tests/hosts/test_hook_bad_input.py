"""Every installed hook answers, closed, whatever it is fed (docs/hooks.md "Host timeouts").

A hook that exits 1 or prints a traceback is a failed hook to both hosts, which then run
the call unchecked. So each class of input a hook cannot read is piped into the exact
command ``ithaca install <host>`` wired for every event of every host: events that can
block refuse (exit 2, the code on stderr), the others report the code and exit 0.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ithaca import resolve
from ithaca.hosts import HOSTS, dispatch

CODE = "HOOK_INPUT_UNREADABLE"
# The events a hook can stop what comes next on: a prompt, a tool call, the end of a turn.
BLOCKING = {"PreToolUse", "UserPromptSubmit", "UserPromptExpansion", "Stop", "SubagentStop"}


def _valid(root: Path) -> dict[str, Any]:
    return {
        "session_id": "sess-bad-input",
        "cwd": str(root),
        "hook_event_name": "PreToolUse",
        "prompt": "hello",
        "tool_name": "Write",
        "tool_input": {"file_path": str(root / "a.py"), "content": "x = 1\n"},
    }


def _bad_inputs(root: Path) -> dict[str, bytes]:
    valid = _valid(root)
    text = json.dumps(valid).encode()

    def with_field(name: str, value: Any) -> bytes:
        return json.dumps({**valid, name: value}).encode()

    depth = 100_000
    return {
        "invalid UTF-8": text.replace(b'"hello"', b'"hel\xff\xfelo"'),
        "nesting of any depth": b'{"tool_input": ' + b"[" * depth + b"]" * depth + b"}",
        "larger than any host sends": b"{" + b" " * (dispatch.MAX_INPUT_BYTES + 1) + b"}",
        "tool_input a list": with_field("tool_input", ["rm", "-rf", "."]),
        "tool_name a number": with_field("tool_name", 7),
        "session_id an object": with_field("session_id", {"id": "x"}),
        "cwd a number": with_field("cwd", 3),
        "a truncated stream": text[: len(text) // 2],
        "an empty stdin": b"",
        "a JSON array": json.dumps([valid]).encode(),
        "a JSON scalar": b"42",
    }


def _installed_commands(root: Path, host: str) -> dict[str, str]:
    """Each event's hook command, as ``ithaca install HOST`` wrote it in the host's hooks
    document."""
    done = subprocess.run(
        ["ithaca", "--project", str(root), "install", host],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    adapter = resolve(HOSTS[host])
    document = json.loads((root / adapter.runs_ithaca(str(root))).read_text())
    commands = {}
    for event in adapter.EVENTS:
        ours = [
            hook["command"]
            for group in document["hooks"].get(event, [])
            for hook in group["hooks"]
            if f"ithaca-hook {host} {event} " in hook["command"]
        ]
        if ours:
            commands[event] = ours[0]
    assert commands, f"ithaca install {host} wired no hook"
    return commands


def _run(command: str, data: bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["/bin/sh", "-c", command], input=data, capture_output=True, cwd=cwd)


def _problems(event: str, case: str, done: subprocess.CompletedProcess[bytes]) -> list[str]:
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    where = (
        f"{event} fed {case}: exit {done.returncode}, stdout {out[:300]!r}, stderr {err[:300]!r}"
    )
    if done.returncode == 1 or "Traceback" in out + err:
        return [f"failed open: {where}"]
    if event in BLOCKING:
        return [] if done.returncode == 2 and CODE in err else [f"did not block: {where}"]
    if done.returncode != 0:
        return [f"blocked a non-blocking event: {where}"]
    try:
        answer = json.loads(out)
    except ValueError:
        return [f"no JSON answer: {where}"]
    return [] if CODE in answer.get("systemMessage", "") else [f"code not shown: {where}"]


@pytest.mark.parametrize("host", list(HOSTS))
def test_every_installed_hook_answers_unreadable_input_closed(project_dir: Path, host: str):
    commands = _installed_commands(project_dir, host)
    problems = []
    for case, data in _bad_inputs(project_dir).items():
        for event, command in commands.items():
            problems += _problems(event, case, _run(command, data, project_dir))
    assert problems == []


@pytest.mark.parametrize("host", list(HOSTS))
def test_outside_a_project_unreadable_input_is_passed_over_quietly(tmp_path: Path, host: str):
    adapter = resolve(HOSTS[host])
    bad = _bad_inputs(tmp_path)
    for event in adapter.EVENTS:
        for case in ("invalid UTF-8", "nesting of any depth", "a JSON array"):
            done = subprocess.run(
                ["ithaca-hook", host, event], input=bad[case], capture_output=True, cwd=tmp_path
            )
            assert (done.returncode, done.stdout, done.stderr) == (0, b"", b""), (event, case)


def test_a_wrong_timeout_is_refused_as_a_block(project_dir: Path):
    for timeout in ("soon", "0", "-5", "nan", "99999"):
        done = subprocess.run(
            ["ithaca-hook", "claude", "PreToolUse", "--timeout", timeout],
            input=json.dumps(_valid(project_dir)).encode(),
            capture_output=True,
            cwd=project_dir,
        )
        assert done.returncode == 2, timeout
        assert b"--timeout takes seconds" in done.stderr


@pytest.mark.parametrize("failure", [RuntimeError("boom"), KeyboardInterrupt(), MemoryError()])
def test_anything_escaping_the_hook_is_answered_with_a_block(
    project_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    failure: BaseException,
):
    def broken(*args: object, **kwargs: object) -> tuple[str, int]:
        raise failure

    monkeypatch.setattr(dispatch, "run", broken)
    stdin = io.TextIOWrapper(io.BytesIO(json.dumps(_valid(project_dir)).encode()))
    monkeypatch.setattr(sys, "stdin", stdin)
    monkeypatch.chdir(project_dir)
    assert dispatch.main(["claude", "PreToolUse"]) == 2
    captured = capsys.readouterr()
    assert "HOOK_FAILED" in captured.err and "refused" in captured.err
    assert "Traceback" not in captured.out + captured.err
