"""No traceback reaches a user: every ``ithaca`` command, run with bad input, in a folder
that cannot be written, with a missing ``--project``, outside a Git repository or before
``ithaca init``, answers with a coded error (``error CODE: …`` and the next step) or a
usage message, never a traceback and never an unexpected failure.

The command lines come from the CLI itself (every leaf of the click tree, its required
arguments and options filled with a placeholder), so a new command is walked without
adding it here. Each situation runs all of them in one process (``command_walk.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from tests.needs import require

from ithaca import init_project
from ithaca.cli import entry
from ithaca.cli.entry import cli
from ithaca.kernel import Refused

WALKER = Path(__file__).with_name("command_walk.py")
# Commands that are not one answer to one call: the demo plays in a folder of its own,
# the MCP server and the merge driver are started by a host or by Git, not typed.
NOT_WALKED = {("demo",), ("mcp",), ("sync", "merge-driver")}
PLACEHOLDER = "x"


def command_lines() -> Iterator[list[str]]:
    def walk(group: click.Group, prefix: list[str]) -> Iterator[list[str]]:
        ctx = click.Context(group)
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None
            path = [*prefix, name]
            if tuple(path) in NOT_WALKED:
                continue
            if isinstance(command, click.Group):
                yield from walk(command, path)
                continue
            line = list(path)
            for param in command.params:
                if isinstance(param, click.Argument) and param.required:
                    line += [PLACEHOLDER] * max(param.nargs, 1)
                elif isinstance(param, click.Option) and param.required:
                    line += [param.opts[0], PLACEHOLDER]
            yield line

    return walk(cli, [])


LINES = list(command_lines())


def walked(
    lines: list[list[str]], cwd: Path, wrap: list[str] | None = None
) -> list[dict[str, Any]]:
    done = subprocess.run(
        [*(wrap or []), sys.executable, str(WALKER)],
        input=json.dumps({"lines": lines}),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    results: list[dict[str, Any]] = json.loads(done.stdout)
    return results


def problems(results: list[dict[str, Any]]) -> list[str]:
    """Every answer that is not a success, a coded error or a usage message."""
    found = []
    for result in results:
        line = " ".join(result["argv"])
        text = result["stdout"] + result["stderr"]
        code = result["code"]
        if isinstance(code, str) or "Traceback" in text or "INTERNAL_ERROR" in text:
            found.append(f"{line}: {code}: {text[-400:]}")
        elif code != 0:
            stderr = result["stderr"]
            coded = any(row.startswith("error ") for row in stderr.splitlines())
            coded = coded or stderr.lstrip().startswith(("Usage:", '{"error"', "usage:"))
            if not coded:
                found.append(f"{line}: exit {code} without a coded error: {text[-400:]}")
    return found


def read_only(folder: Path) -> list[str]:
    """A bubblewrap view with ``folder`` mounted read-only, as on a read-only file system
    (permissions would not do: tests may run as root, which ignores them)."""
    where = str(folder)
    return ["bwrap", "--bind", "/", "/", "--ro-bind", where, where, "--dev", "/dev"] + [
        "--proc",
        "/proc",
        "--chdir",
        where,
        "--",
    ]


def last_word(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], raised: BaseException
) -> tuple[object, str]:
    """What ``ithaca next`` answers when its command raises ``raised``: exit code, stderr."""
    from ithaca.cli.commands import next as next_command

    def broken(*_args: object, **_kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(next_command.command, "callback", broken)
    monkeypatch.setattr(sys, "argv", ["ithaca", "next"])
    with pytest.raises(SystemExit) as exited:
        entry.main()
    return exited.value.code, capsys.readouterr().err


def test_an_interrupt_is_a_coded_error_with_exit_130(monkeypatch, capsys) -> None:
    code, err = last_word(monkeypatch, capsys, KeyboardInterrupt())
    assert (code, err.strip().splitlines()[-1][:20]) == (130, "error INTERRUPTED: s")


def test_a_coded_error_a_command_let_through_keeps_its_code(monkeypatch, capsys) -> None:
    code, err = last_word(monkeypatch, capsys, Refused("SOME_CODE", "what to do next"))
    assert (code, err) == (1, "error SOME_CODE: what to do next\n")


def test_a_bug_is_an_internal_error_naming_the_doctor_and_the_debug_switch(
    monkeypatch, capsys
) -> None:
    code, err = last_word(monkeypatch, capsys, ZeroDivisionError("division by zero"))
    assert code == 1 and err.startswith("error INTERNAL_ERROR: Ithaca failed unexpectedly")
    assert "ithaca doctor" in err and "ITHACA_DEBUG=1" in err and "Traceback" not in err
    monkeypatch.setenv("ITHACA_DEBUG", "1")
    with pytest.raises(ZeroDivisionError):
        last_word(monkeypatch, capsys, ZeroDivisionError("division by zero"))


def test_bad_input_in_a_project(project_dir: Path) -> None:
    assert problems(walked(LINES, project_dir)) == []


def test_before_init_in_a_git_repository(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert problems(walked(LINES, tmp_path)) == []


def test_outside_a_git_repository(tmp_path: Path) -> None:
    assert problems(walked(LINES, tmp_path)) == []


def test_with_a_missing_project_folder(tmp_path: Path) -> None:
    lines = [["--project", str(tmp_path / "gone"), *line] for line in LINES]
    results = walked(lines, tmp_path)
    assert problems(results) == []
    assert all("PROJECT_PATH_MISSING" in result["stderr"] for result in results)


def test_in_a_folder_that_cannot_be_written(tmp_path: Path) -> None:
    require("bubblewrap")
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    opened, _ = init_project(repo)
    opened.close()
    assert problems(walked(LINES, repo, read_only(repo))) == []
    fresh = tmp_path / "fresh"
    subprocess.run(["git", "init", "-q", str(fresh)], check=True)
    (init,) = walked([["init"]], fresh, read_only(fresh))
    assert init["code"] == 1 and init["stderr"].startswith("error PATH_NOT_WRITABLE:")
    assert not (fresh / ".ithaca").exists()


@pytest.fixture(autouse=True)
def no_user_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """User-only commands ask at a terminal; the walk has none (stdin is a pipe)."""
    monkeypatch.delenv("ITHACA_SESSION_ID", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("ITHACA_DEBUG", raising=False)
