"""Git, run through the one module that starts it (``ithaca.kernel.git``): what a caller
reads, what it learns when Git fails, hangs or is missing, and that no other module of
Ithaca starts ``git`` itself."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TypeGuard

import pytest

import ithaca
from ithaca.kernel import git

SOURCE = Path(ithaca.__file__).parent
THE_MODULE = SOURCE / "kernel" / "git.py"
SPAWNERS = {
    "subprocess": {"run", "Popen", "call", "check_call", "check_output"},
    "os": {
        "posix_spawn",
        "posix_spawnp",
        "system",
        "popen",
        *(f"exec{tail}" for tail in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
        *(f"spawn{tail}" for tail in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")),
    },
    "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def fake_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install a ``git`` shell script ahead of the real one on ``PATH``."""

    def install(script: str) -> Path:
        folder = tmp_path / "fake-bin"
        folder.mkdir(exist_ok=True)
        program = folder / "git"
        program.write_text("#!/bin/sh\n" + script)
        program.chmod(0o755)
        monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
        return folder

    return install


def test_a_caller_reads_what_git_printed(repo: Path) -> None:
    done = git.run(["rev-parse", "--show-toplevel"], cwd=str(repo), timeout=10)
    assert done.returncode == 0
    assert done.stdout == os.fsencode(os.path.realpath(repo)) + b"\n"
    assert done.stderr == b""
    assert git.run_text(
        ["rev-parse", "--is-inside-work-tree"], cwd=str(repo), timeout=10
    ).stdout == ("true\n")


def test_a_failing_git_reports_its_exit_code_and_error(repo: Path) -> None:
    done = git.run_text(["rev-parse", "--verify", "no-such-ref"], cwd=str(repo), timeout=10)
    assert done.returncode == 128
    assert done.stderr.startswith("fatal: ")
    assert done.stdout == ""


def test_input_reaches_git_on_its_standard_input(repo: Path) -> None:
    done = git.run(["hash-object", "--stdin"], cwd=str(repo), input=b"hello\n", timeout=10)
    assert done.stdout == b"ce013625030ba8dba906f756967f9e9ca394464a\n"


def test_without_input_git_reads_an_empty_standard_input(repo: Path) -> None:
    done = git.run(["hash-object", "--stdin"], cwd=str(repo), timeout=10)
    assert done.stdout == b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\n"  # the empty blob


def test_large_input_and_large_output_flow_together(repo: Path) -> None:
    """``cat-file --batch`` answers each line as it reads it: a caller that wrote all its
    input before reading would deadlock on full pipes; the time cap would then report it."""
    body = b"x" * 200 + b"\n"
    blob = git.run(["hash-object", "-w", "--stdin"], cwd=str(repo), input=body, timeout=10)
    asked = blob.stdout * 20_000  # 820 kB of input, over 4 MB of output
    done = git.run(["cat-file", "--batch"], cwd=str(repo), input=asked, timeout=60)
    assert done.returncode == 0
    answer = blob.stdout.strip() + b" blob 201\n" + body + b"\n"
    assert done.stdout == answer * 20_000


def test_git_sees_the_environment_given_and_only_the_git_variables_named(repo: Path) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "Inherited", "ITHACA_PROBE": "kept"}
    named = {"GIT_AUTHOR_NAME": "Penelope", "GIT_AUTHOR_EMAIL": "p@ithaca.invalid"}
    done = git.run_text(
        ["var", "GIT_AUTHOR_IDENT"], cwd=str(repo), env=env, git_env=named, timeout=10
    )
    assert done.stdout.startswith("Penelope <p@ithaca.invalid> ")
    inherited = git.run_text(["var", "GIT_AUTHOR_IDENT"], cwd=str(repo), env=env, timeout=10)
    assert not inherited.stdout.startswith("Inherited")


def test_text_is_read_as_subprocess_reads_it_in_text_mode(fake_git) -> None:
    fake_git("printf 'caf\\303\\251\\r\\nline\\rend\\n'\nprintf 'warn\\r\\n' >&2\n")
    expected = subprocess.run(["git"], capture_output=True, text=True, check=True)
    done = git.run_text([], timeout=10)
    assert (done.stdout, done.stderr) == (expected.stdout, expected.stderr)
    assert done.stdout == "café\nline\nend\n"


def test_undecodable_text_raises_as_subprocess_text_mode_does(fake_git) -> None:
    fake_git("printf '\\377\\n'\n")
    with pytest.raises(UnicodeDecodeError):
        subprocess.run(["git"], capture_output=True, text=True, check=True)
    with pytest.raises(UnicodeDecodeError):
        git.run_text([], timeout=10)


def test_a_hung_git_is_killed_at_its_time_cap(fake_git, tmp_path: Path) -> None:
    pid_file = tmp_path / "git.pid"
    fake_git(f"echo $$ > {pid_file}\nexec sleep 30\n")
    started = time.monotonic()
    with pytest.raises(git.TimedOut) as raised:
        git.run(["status"], cwd=str(tmp_path), timeout=0.5)
    assert time.monotonic() - started < 10
    assert isinstance(raised.value, OSError)  # callers treat it as Git not answering
    assert str(raised.value).endswith("timed out after 0.5 seconds")
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left sleeping
        os.kill(int(pid_file.read_text()), 0)


def test_a_git_that_keeps_talking_still_stops_at_its_time_cap(fake_git) -> None:
    fake_git("while :; do echo still working; sleep 0.05; done\n")
    started = time.monotonic()
    with pytest.raises(git.TimedOut):
        git.run([], timeout=0.5)
    assert time.monotonic() - started < 10


def test_without_a_time_cap_a_slow_git_is_waited_for(fake_git) -> None:
    fake_git("sleep 1\necho done\n")
    assert git.run([], timeout=None).stdout == b"done\n"


def test_a_missing_git_is_reported_as_not_found(tmp_path: Path, monkeypatch) -> None:
    empty = tmp_path / "no-git-here"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(FileNotFoundError) as raised:
        git.run(["--version"], timeout=10)
    assert str(raised.value) == "[Errno 2] No such file or directory: 'git'"


def test_importing_it_costs_a_hook_none_of_the_slow_modules() -> None:
    probe = "import sys; import ithaca.kernel.git; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    slow = {"subprocess", "signal", "threading", "re", "enum", "typing", "dataclasses", "locale"}
    assert not loaded & slow, sorted(loaded & slow)


# ---- no other module starts git -------------------------------------------------------


def _is_git(node: ast.AST) -> bool:
    """A string naming the ``git`` program."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return False
    return node.value == "git" or node.value.endswith("/git")


def _git_argv(node: ast.AST) -> TypeGuard[ast.List | ast.Tuple]:
    """An argument list that starts with the ``git`` program."""
    return isinstance(node, (ast.List, ast.Tuple)) and bool(node.elts) and _is_git(node.elts[0])


def _git_line(node: ast.AST) -> bool:
    """A shell line that runs ``git``."""
    if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
        return False
    program = node.value.split(" ", 1)[0]
    return program == "git" or program.endswith("/git")


def _spawners(tree: ast.AST) -> tuple[dict[str, str], set[str]]:
    """The names under which ``tree`` reaches the process-starting modules (``import
    subprocess as sp``) and their functions (``from subprocess import run``)."""
    modules = {name: name for name in SPAWNERS}
    functions = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name: a.name for a in node.names if a.name in SPAWNERS}
        elif isinstance(node, ast.ImportFrom) and node.module in SPAWNERS:
            called = SPAWNERS[node.module]
            functions |= {a.asname or a.name for a in node.names if a.name in called}
    return modules, functions


def _spawns(call: ast.Call, modules: dict[str, str], functions: set[str]) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        module = modules.get(func.value.id)
        return module is not None and func.attr in SPAWNERS[module]
    return isinstance(func, ast.Name) and func.id in functions


def git_spawns(source: str) -> list[int]:
    """The lines where ``source`` starts ``git``: a process-starting call given a ``git``
    argument list or shell line, or, in a module that starts processes, any argument list
    that starts with ``git`` (built apart from the call)."""
    tree = ast.parse(source)
    modules, functions = _spawners(tree)
    calls = [
        n for n in ast.walk(tree) if isinstance(n, ast.Call) and _spawns(n, modules, functions)
    ]
    direct = [
        call.lineno
        for call in calls
        for arg in [*call.args[:1], *(keyword.value for keyword in call.keywords)]
        if _git_argv(arg) or _git_line(arg)
    ]
    built = [node.lineno for node in ast.walk(tree) if calls and _git_argv(node)]
    return sorted({*direct, *built})


@pytest.mark.parametrize(
    "source",
    [
        'import subprocess\nsubprocess.run(["git", "status"], check=False)\n',
        'import subprocess\nsubprocess.check_output(("/usr/bin/git", "log"))\n',
        'import os\nos.posix_spawnp("git", ["git", "status"], os.environ)\n',
        'import subprocess\nargv = ["git", "-C", "."]\nsubprocess.Popen(argv + ["status"])\n',
        'from subprocess import run as go\ngo(args=["git", "diff"])\n',
        'import os\nos.system("git status")\n',
        'import subprocess as sp\nsp.run(["git", "fetch"])\n',
    ],
)
def test_the_scan_finds_a_git_started_by_hand(source: str) -> None:
    assert git_spawns(source)


def test_the_scan_leaves_commands_that_only_name_git_alone() -> None:
    source = (
        'import subprocess\nsubprocess.run(["python3", "check.py"])\n'
        'DENIED = {"commands": ["git push"]}\n'
        'def is_git(program):\n    return program == "git"\n'
    )
    assert git_spawns(source) == []


def test_only_the_git_module_starts_git() -> None:
    found = {
        str(path.relative_to(SOURCE)): lines
        for path in sorted(SOURCE.rglob("*.py"))
        if path != THE_MODULE and (lines := git_spawns(path.read_text(encoding="utf-8")))
    }
    assert found == {}, f"start git through ithaca.kernel.git instead: {found}"
    assert git_spawns(THE_MODULE.read_text(encoding="utf-8"))  # the scan sees the real one
