"""Each execution session's places are its own (issue 12, item 8): its worktree and output
folder in ``.ithaca-work/`` are written only by a host call the session acts for, and the
allowances of sessions from before the work folder, under ``.ithaca/``, likewise.

Every verdict comes from the hook as the host runs it, ``ithaca hook claude PreToolUse``
in a process of its own; the sessions are acquired through the ``session`` tool, bound
to the host session that acquired them. Protocol enforcement is relaxed so that only
the kernel guard and delivery speak.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept

from ithaca.app import IthacaProject
from ithaca.delivery.sessions.tool import session

HOST_A = "11111111-1111-4111-8111-111111111111"
HOST_B = "22222222-2222-4222-8222-222222222222"
DENIED = "[SESSION_WRITE_DENIED]"


def git(root: Path | str, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def tasks(project_dir: Path, record: Any, new_change: Any) -> list[str]:
    """Tasks T-1 and T-2 in a repository with a first commit, protocols relaxed."""
    (project_dir / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = false\n")
    accept(project_dir)
    git(project_dir, "config", "user.email", "dev@example.com")
    git(project_dir, "config", "user.name", "Dev")
    (project_dir / "app.py").write_text("x = 1\n")
    git(project_dir, "add", "app.py")
    git(project_dir, "commit", "-qm", "first")
    new_change()
    for task_id in ("T-1", "T-2"):
        data = {"id": task_id, "title": task_id, "verification": {"argv": ["true"]}}
        record("task_contract", "define", {**data, "change_id": "add-login"})
    return ["T-1", "T-2"]


def acquire(
    project: IthacaProject, task_id: str, host: str, worktree: str = "create"
) -> dict[str, Any]:
    request = {
        "operation": "acquire",
        "task_id": task_id,
        "strategy": "spawn",
        "worktree": worktree,
        "session": host,
        "idempotency_key": f"acquire-{task_id}",
    }
    return session(project.project, project.store, project.config, request)


def hook(
    root: Path,
    tool: str,
    tool_input: dict[str, str],
    host: str,
    cwd: Path | None = None,
    **env: str,
) -> dict[str, str]:
    """The hook process's verdict on one call: ``effect`` (allow when it said nothing)
    and ``text``."""
    payload = {"session_id": host, "cwd": str(cwd or root), "hook_event_name": "PreToolUse",
               "tool_name": tool, "tool_input": tool_input}  # fmt: skip
    done = subprocess.run(
        [str(Path(sys.executable).parent / "ithaca"), "hook", "claude", "PreToolUse"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, "CLAUDE_PROJECT_DIR": str(root), **env},
    )
    assert done.returncode == 0, done.stderr
    specific = (json.loads(done.stdout) if done.stdout else {}).get("hookSpecificOutput", {})
    return {
        "effect": specific.get("permissionDecision", "allow"),
        "text": specific.get("permissionDecisionReason", ""),
    }


def write(root: Path, path: Path | str, host: str, **more: Any) -> dict[str, str]:
    return hook(root, "Write", {"file_path": str(path), "content": "{}\n"}, host, **more)


def shell(root: Path, command: str, host: str, **more: Any) -> dict[str, str]:
    return hook(root, "Bash", {"command": command}, host, **more)


def places(answer: dict[str, Any]) -> tuple[str, Path, Path]:
    worktree = Path(answer["worktree"] or "/nonexistent")
    return answer["session"]["id"], worktree, Path(answer["packet"]["output_path"])


def test_a_host_session_writes_its_own_sessions_worktree_and_output(project, project_dir, tasks):
    _, worktree, output = places(acquire(project, "T-1", HOST_A))
    assert write(project_dir, worktree / "app.py", HOST_A)["effect"] == "allow"
    assert write(project_dir, output, HOST_A)["effect"] == "allow"
    assert shell(project_dir, f"echo '{{}}' > {output}", HOST_A)["effect"] == "allow"
    relative = output.relative_to(project_dir)
    assert shell(project_dir, f'echo x > "$PWD/{relative}"', HOST_A)["effect"] == "allow"
    edit = {"file_path": "app.py", "old_string": "1", "new_string": "2"}
    assert hook(project_dir, "Edit", edit, HOST_A, cwd=worktree)["effect"] == "allow"
    assert shell(project_dir, "rm -f *.pyc", HOST_A, cwd=worktree)["effect"] == "allow"


@pytest.mark.parametrize(
    "attempt",
    [
        lambda root, worktree, output: write(root, worktree / "app.py", HOST_B),
        lambda root, worktree, output: write(root, output, HOST_B),
        lambda root, worktree, output: shell(root, f"echo x > {worktree}/app.py", HOST_B),
        lambda root, worktree, output: shell(
            root, f"echo '{{}}' > {output.relative_to(root)}", HOST_B
        ),
        lambda root, worktree, output: shell(
            root, f'cp /dev/null "$PWD/{output.relative_to(root)}"', HOST_B
        ),
        lambda root, worktree, output: shell(root, f"rm -rf {worktree}", HOST_B),
        lambda root, worktree, output: shell(root, "echo x > app.py", HOST_B, cwd=worktree / ".."),
        lambda root, worktree, output: write(root, link_to(root, output), HOST_B),
    ],
    ids=[
        *("write-worktree", "write-output", "redirect-worktree", "redirect-output"),
        *("variable-output", "remove-worktree", "beside-worktree", "through-a-link"),
    ],
)
def test_another_host_session_cannot_write_into_a_sessions_places(
    project, project_dir, tasks, attempt
):
    sid, worktree, output = places(acquire(project, "T-1", HOST_A))
    answer = attempt(project_dir, worktree, output)
    assert answer["effect"] == "deny" and DENIED in answer["text"]
    if "worktrees/" + sid in answer["text"] or "outputs/" + sid in answer["text"]:
        assert f"execution session {sid} (task T-1, running)" in answer["text"]
    assert "session acquire" in answer["text"]


def link_to(root: Path, target: Path) -> Path:
    """A symlink in the main checkout that leads to ``target``."""
    link = root / "shortcut.json"
    link.symlink_to(target)
    return link


def test_a_glob_in_a_sessions_place_may_not_climb_out_of_it(project, project_dir, tasks):
    sid_a, worktree_a, _ = places(acquire(project, "T-1", HOST_A))
    _, _, output_b = places(acquire(project, "T-2", HOST_B, worktree="none"))
    inside = shell(project_dir, f"touch {worktree_a.relative_to(project_dir)}/*.py", HOST_A)
    assert inside["effect"] == "allow"
    climbing = f"{worktree_a.relative_to(project_dir)}/*/../../../outputs/{output_b.parent.name}/x"
    denied = shell(project_dir, f"touch {climbing}", HOST_A)
    assert denied["effect"] == "deny" and DENIED in denied["text"]


def test_each_of_two_host_sessions_keeps_to_its_own_session(project, project_dir, tasks):
    sid_a, worktree_a, output_a = places(acquire(project, "T-1", HOST_A))
    _, _, output_b = places(acquire(project, "T-2", HOST_B, worktree="none"))
    assert write(project_dir, output_b, HOST_B)["effect"] == "allow"
    denied = write(project_dir, output_a, HOST_B)
    assert denied["effect"] == "deny"
    assert f"output folder of execution session {sid_a}" in denied["text"]
    assert write(project_dir, output_b, HOST_A)["effect"] == "deny"
    assert write(project_dir, worktree_a / "app.py", HOST_A)["effect"] == "allow"


def test_the_named_delivery_session_acts_for_its_worker(project, project_dir, tasks):
    sid, worktree, output = places(acquire(project, "T-1", HOST_A))
    worker = "33333333-3333-4333-8333-333333333333"  # the worker's own host session
    named = {"ITHACA_DELIVERY_SESSION": sid}
    assert write(project_dir, output, worker, **named)["effect"] == "allow"
    assert shell(project_dir, "echo x > app.py", worker, cwd=worktree)["effect"] == "allow"
    assert write(project_dir, output, worker)["effect"] == "deny"


def test_nothing_else_in_the_work_folder_is_anyones(project, project_dir, tasks):
    acquire(project, "T-1", HOST_A)
    work = project_dir / ".ithaca-work"
    for attempt in (
        write(project_dir, work / "notes.txt", HOST_A),
        write(project_dir, work / "worktrees" / "plan-add-login" / "app.py", HOST_A),
        shell(project_dir, "rm -rf .ithaca-work", HOST_A),
        shell(project_dir, "touch .ithaca-w*/outputs/x", HOST_A),
    ):
        assert attempt["effect"] == "deny" and DENIED in attempt["text"], attempt
    plan = write(project_dir, work / "worktrees" / "plan-add-login" / "app.py", HOST_A)
    assert "run-plan" in plan["text"]


def test_an_allowance_under_the_state_folder_is_its_sessions_alone(project, project_dir, tasks):
    """A session started before the work folder was allowed its output file under
    ``.ithaca/.runtime/sessions/``: the kernel guard honours it for that session only."""
    sid = acquire(project, "T-1", HOST_A, worktree="none")["session"]["id"]
    old_output = Path(project.project.runtime, "sessions", sid, "output.json")
    conn = sqlite3.connect(project.project.db_path, isolation_level=None)
    try:
        conn.execute(
            "INSERT INTO write_allowances (path, owner, created_at) VALUES (?, ?, 'x')",
            (str(old_output), f"delivery:{sid}"),
        )
    finally:
        conn.close()
    assert write(project_dir, old_output, HOST_A)["effect"] == "allow"
    assert shell(project_dir, f"echo '{{}}' > {old_output}", HOST_A)["effect"] == "allow"
    for denied in (
        write(project_dir, old_output, HOST_B),
        shell(project_dir, f"echo '{{}}' > {old_output}", HOST_B),
    ):
        assert denied["effect"] == "deny" and "[STATE_WRITE_DENIED]" in denied["text"]
    packet = old_output.parent / "packet.json"
    assert write(project_dir, packet, HOST_A)["effect"] == "deny"


def test_the_main_checkout_does_not_show_the_work_folder(project, project_dir, tasks):
    _, worktree, output = places(acquire(project, "T-1", HOST_A))
    output.write_text("{}\n")
    (worktree / "draft.py").write_text("y = 2\n")
    shown = git(project_dir, "status", "--porcelain", "--untracked-files=all")
    assert ".ithaca-work" not in shown
    assert git(worktree, "status", "--porcelain") == "?? draft.py\n"
