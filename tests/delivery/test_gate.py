"""The delivery gate through the real hook dispatcher (reference §12).

State comes from ``record`` and ``session``; what they cannot make directly (task
progress, checkpoints, file intents) is written as rows the way their services write
them. Protocols enforcement is off so that only the kernel guard, Ulysses (idle) and
delivery speak. Lease time is moved by patching the lease clock, never by sleeping.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tests.accepted import accept
from tests.refusals import gate_reason

from ithaca.delivery import resume
from ithaca.delivery.breadcrumb import MAX_BYTES, POINTER
from ithaca.delivery.sessions import leases
from ithaca.delivery.sessions.tool import session
from ithaca.hosts import dispatch

HOST_SESSION = "sess-1"


@pytest.fixture(autouse=True)
def relaxed(project_dir: Path) -> None:
    (project_dir / ".ithaca" / "config.toml").write_text("[protocols]\nstrict = false\n")
    accept(project_dir)


def db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / ".ithaca" / ".runtime" / "state.db", isolation_level=None)


def hook(root: Path, event: str, **fields: object) -> dict[str, Any]:
    payload = {"session_id": HOST_SESSION, "cwd": str(root), "hook_event_name": event, **fields}
    out, code = dispatch.run("claude", event, json.dumps(payload))
    assert code == 0
    return json.loads(out) if out else {}


# How a session start opens where the database is gone (hosts/lost.py).
LOST = "Ithaca cannot govern this session [STATE_MISSING]"


def session_start(root: Path, source: str = "startup") -> str | None:
    answer = hook(root, "SessionStart", source=source)
    context: str | None = answer.get("hookSpecificOutput", {}).get("additionalContext")
    return context


def pre_tool_use(root: Path, tool: str, tool_input: dict[str, Any]) -> tuple[str, str]:
    answer = hook(root, "PreToolUse", tool_name=tool, tool_input=tool_input)
    specific = answer.get("hookSpecificOutput", {})
    reason = specific.get("permissionDecisionReason")
    return specific.get("permissionDecision", "allow"), gate_reason(reason) if reason else ""


def define_task(record, task_id: str, title: str, change_id: str = "add-login") -> None:
    data = {"id": task_id, "title": title, "verification": {"argv": ["pytest"]}}
    record("task_contract", "define", {**data, "change_id": change_id})


def set_task_status(root: Path, task_id: str, status: str, updated_at: str) -> None:
    with db(root) as conn:
        conn.execute(
            "UPDATE delivery_tasks SET status = ?, updated_at = ? WHERE id = ?",
            (status, updated_at, task_id),
        )


def add_checkpoint(root: Path, stage: str, status: str, revision: int | None, at: str) -> None:
    with db(root) as conn:
        conn.execute(
            "INSERT INTO delivery_checkpoints (id, stage, scope_type, scope_id, revision, status,"
            " payload, evidence, diagnostics, created_at, updated_at)"
            " VALUES (?, ?, 'change', 'add-login', ?, ?, '{}', '[]', '[]', ?, ?)",
            (f"cp-{stage}-{status}-{revision}", stage, revision, status, at, at),
        )


def decide(
    record, question: str, *, defer: bool = False, scope: dict[str, Any] | None = None
) -> None:
    data = {
        "scope": scope or {"change_id": "add-login"},
        "question": question,
        "recommendation": "the simple one",
        "owner": "maria",
    }
    if defer:
        record("decision", "defer", {**data, "consequence": "decide before release"})
    else:
        selection = {"choice": "simple", "rationale": "fewer parts"}
        record("decision", "accept", {**data, "selection": selection})


# ---- SessionStart ------------------------------------------------------------------------


def test_no_active_work_means_no_breadcrumb(project_dir, record, new_change):
    assert session_start(project_dir) is None
    new_change()
    record("change_contract", "cancel", {"id": "add-login", "reason": "not needed"})
    assert session_start(project_dir) is None


def test_the_breadcrumb_names_change_task_checkpoints_decisions_and_attention(
    project_dir, record, new_change
):
    new_change()
    define_task(record, "T-1", "Write the schema")
    define_task(record, "T-3", "Add login form")
    set_task_status(project_dir, "T-1", "blocked", "2030-01-01T00:00:02.000Z")
    set_task_status(project_dir, "T-3", "in_progress", "2030-01-01T00:00:01.000Z")
    add_checkpoint(project_dir, "plan", "superseded", 1, "2030-01-01T00:00:00.000Z")
    add_checkpoint(project_dir, "plan", "accepted", 2, "2030-01-01T00:00:01.000Z")
    add_checkpoint(project_dir, "test", "draft", None, "2030-01-01T00:00:02.000Z")
    decide(record, "Which database?")
    decide(record, "Which hasher?")
    decide(record, "Which host?", scope={"baseline": True})
    decide(record, "Which region?", defer=True)
    assert session_start(project_dir) == "\n".join(
        [
            '[Ithaca delivery] change add-login (standard, active) · task T-3 "Add login form"'
            " in_progress",
            "plan r2 accepted · test r1 draft",
            "Decisions: 3 accepted, 1 deferred · Attention: DECISION_DEFERRED",
            POINTER,
        ]
    )


def test_the_current_task_is_in_progress_then_blocked_then_pending(project_dir, record, new_change):
    new_change()
    define_task(record, "T-1", "First")
    define_task(record, "T-2", "Second")
    assert 'task T-2 "Second" pending' in session_start(project_dir)
    set_task_status(project_dir, "T-1", "blocked", "2000-01-01T00:00:00.000Z")
    assert 'task T-1 "First" blocked' in session_start(project_dir)
    set_task_status(project_dir, "T-2", "in_progress", "2000-01-01T00:00:00.000Z")
    assert 'task T-2 "Second" in_progress' in session_start(project_dir)


def test_an_active_change_comes_before_a_blocked_or_ready_one(project_dir, record, new_change):
    new_change("add-login")
    new_change("fix-crash", kind="incident")
    record("change_contract", "revise", {"id": "fix-crash", "patch": {}, "status": "blocked"})
    assert session_start(project_dir).startswith("[Ithaca delivery] change add-login (standard,")
    record("change_contract", "revise", {"id": "add-login", "patch": {}, "status": "ready"})
    assert session_start(project_dir).startswith(
        "[Ithaca delivery] change fix-crash (incident, blocked)"
    )


def test_a_pending_recovery_alone_is_active_work(project_dir):
    with db(project_dir) as conn:
        conn.execute(
            "INSERT INTO delivery_fs_intents (id, op, status, owner_pid, steps, created_at,"
            " updated_at) VALUES ('int-1', 'record', 'pending', 1, '[]', 'x', 'x')"
        )
    assert session_start(project_dir) == (
        f"[Ithaca delivery] no open change\nAttention: RECOVERY_PENDING\n{POINTER}"
    )


def test_a_long_title_stays_on_one_line_and_within_budget(project_dir, record, new_change):
    new_change()
    define_task(record, "T-1", "Login\nform " + "é" * 180)
    text = session_start(project_dir)
    assert len(text.encode()) <= MAX_BYTES
    head = text.splitlines()[0]
    assert head.endswith('…" pending') and "\n" not in head


# ---- PreCompact and the compaction fallback ------------------------------------------------


def snapshot_path(root: Path) -> Path:
    return root / ".ithaca" / ".runtime" / "recovery" / f"precompact-{HOST_SESSION}.json"


def test_precompact_snapshots_the_breadcrumb_for_this_host_session(project_dir, record, new_change):
    new_change()
    define_task(record, "T-1", "First")
    assert hook(project_dir, "PreCompact", trigger="auto") == {}
    snapshot = json.loads(snapshot_path(project_dir).read_text())
    assert snapshot == {
        "host_session_id": HOST_SESSION,
        "change_id": "add-login",
        "task_id": "T-1",
        "session_id": None,
        "envelope_digest": None,
        "breadcrumb": session_start(project_dir),
    }


def test_a_compacted_session_without_its_database_falls_back_to_the_snapshot(
    project_dir, project, record, new_change
):
    new_change()
    hook(project_dir, "PreCompact", trigger="manual")
    expected = session_start(project_dir)
    project.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{project_dir}/.ithaca/.runtime/state.db{suffix}").unlink(missing_ok=True)
    started = session_start(project_dir, source="startup")
    assert started is not None and started.startswith(LOST)  # the loss is said, no snapshot
    assert resume.SNAPSHOT_NOTE not in started
    notice, restored = session_start(project_dir, source="compact").split("\n\n", 1)
    assert notice == started
    lines = expected.splitlines()
    assert restored.splitlines() == [*lines[:-1], resume.SNAPSHOT_NOTE, lines[-1]]


def test_a_snapshot_without_active_work_restores_nothing(project_dir, project):
    hook(project_dir, "PreCompact", trigger="auto")
    assert json.loads(snapshot_path(project_dir).read_text())["breadcrumb"] is None
    project.close()
    (project_dir / ".ithaca" / ".runtime" / "state.db").unlink()
    restored = session_start(project_dir, source="compact")
    assert restored is not None and restored.startswith(LOST) and "\n\n" not in restored


def test_a_snapshot_is_only_read_for_its_own_host_session(project_dir, project, new_change):
    new_change()
    hook(project_dir, "PreCompact", trigger="auto")
    project.close()
    (project_dir / ".ithaca" / ".runtime" / "state.db").unlink()
    output, code = dispatch.run(
        "claude",
        "SessionStart",
        json.dumps({"session_id": "other", "cwd": str(project_dir), "source": "compact"}),
    )
    context = json.loads(output)["hookSpecificOutput"]["additionalContext"]
    assert code == 0 and context.startswith(LOST) and resume.SNAPSHOT_NOTE not in context


# ---- PreToolUse: managed files -------------------------------------------------------------

GUARD = "is under .ithaca/, which only Ithaca writes"
MANAGED = [
    ("tasks/tasks.json", "is the team ledger", "`sync`"),
    ("decisions/baseline/dec-db.json", "holds Decision Records", "`record` decision"),
    ("changes/active/add-login/decisions/dec-x.json", "holds Decision Records", "`record`"),
    ("changes/archive/2030-01-01-add-login/intent.md", "archived change", "immutable"),
    ("changes/active/add-login/plan.json", "when a plan is accepted", "`checkpoint`"),
    ("changes/active/add-login/plan.md", "when a plan is accepted", "`checkpoint`"),
    ("changes/active/add-login/intent.md", "change contract", "`record` change_contract"),
    ("changes/active/add-login/diagnosis.md", "change contract", "`record` change_contract"),
]


def edit_calls(path: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        ("Edit", {"file_path": path, "old_string": "a", "new_string": "b"}),
        ("Write", {"file_path": path, "content": "x"}),
        ("MultiEdit", {"file_path": path, "edits": []}),
        ("NotebookEdit", {"notebook_path": path, "new_source": "x"}),
        ("apply_patch", {"input": f"*** Begin Patch\n*** Update File: {path}\n*** End Patch"}),
        ("Bash", {"command": f"echo x > {path}"}),
        ("Bash", {"command": f"sed -i s/a/b/ {path}"}),
        ("Bash", {"command": f"rm -f {path}"}),
        ("Bash", {"command": f"echo x | tee {path}"}),
        ("Bash", {"command": f"cp draft.json {path}"}),
        ("Bash", {"command": f"mv draft.json {path}"}),
        ("Bash", {"command": f"git checkout -- {path}"}),
    ]


@pytest.mark.parametrize(("relpath", "what", "tool"), MANAGED)
def test_writes_to_a_managed_file_carry_both_reasons(project_dir, relpath, what, tool):
    path = f".ithaca/{relpath}"
    for name, tool_input in edit_calls(path) + edit_calls(str(project_dir / path)):
        effect, reason = pre_tool_use(project_dir, name, tool_input)
        assert effect == "deny", (name, tool_input)
        guard, delivery = reason.split("\n")
        assert GUARD in guard
        assert delivery.startswith(f"Ithaca delivery: {path} ") and what in delivery
        assert tool in delivery


@pytest.mark.parametrize(
    "command",
    [
        'python3 -c \'open(".ithaca/decisions/baseline/dec-auth.json","w").write("x")\'',
        "node -e \"require('fs').writeFileSync('.ithaca/tasks/tasks.json','x')\"",
        "D=.ithaca; rm -rf $D",
    ],
)
def test_writes_hidden_in_inline_code_or_a_variable_are_denied(project_dir, command):
    effect, reason = pre_tool_use(project_dir, "Bash", {"command": command})
    assert effect == "deny"
    assert reason.startswith("Ithaca: ") and "which only Ithaca writes" in reason


def test_a_shell_command_naming_a_managed_file_is_denied_unless_read_only(project_dir):
    ledger = ".ithaca/tasks/tasks.json"
    effect, reason = pre_tool_use(project_dir, "Bash", {"command": f"python fix.py {ledger}"})
    assert effect == "deny"
    assert reason.startswith(f"Ithaca delivery: {ledger} is the team ledger")
    for command in (
        f"cat {ledger}",
        f"jq '.tasks | length' {ledger}",
        f"grep -c id {ledger} > counts.txt",
        f"git diff -- {ledger} && git log -p {ledger}",
        f"git add {ledger} && git commit -m 'publish tasks'",
        "git merge feature",
        f"git -C . pull origin main -- {ledger}",
        f"sha256sum {ledger} | tee sums.txt",
    ):
        assert pre_tool_use(project_dir, "Bash", {"command": command})[0] == "allow", command


def test_a_shell_command_from_inside_the_state_folder_is_judged_where_it_lands(project_dir):
    tasks = project_dir / ".ithaca" / "tasks"
    tasks.mkdir(exist_ok=True)
    answer = hook(tasks, "PreToolUse", tool_name="Bash", tool_input={"command": "vim tasks.json"})
    assert "is the team ledger" in answer["hookSpecificOutput"]["permissionDecisionReason"]


def test_other_state_files_keep_only_the_kernel_reason(project_dir):
    effect, reason = pre_tool_use(project_dir, "Write", {"file_path": ".ithaca/config.toml"})
    assert effect == "deny" and GUARD in reason and "Ithaca delivery" not in reason
    reads = ("Read", {"file_path": ".ithaca/tasks/tasks.json"})
    assert pre_tool_use(project_dir, *reads)[0] == "allow"
    assert pre_tool_use(project_dir, "Edit", {"file_path": "src/plan.md"})[0] == "allow"


# ---- leases ---------------------------------------------------------------------------------


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch):
    """``clock(minutes)``: the lease clock now reads that long after the test began."""
    start = leases.now_ms()

    def move(minutes: float) -> int:
        now = start + int(minutes * 60_000)
        monkeypatch.setattr(leases, "now_ms", lambda: now)
        return now

    return move


def acquire_task(
    project, host: str | None = HOST_SESSION, worktree: str = "none"
) -> dict[str, Any]:
    request = {
        "operation": "acquire",
        "task_id": "T-1",
        "strategy": "spawn",
        "worktree": worktree,
        "idempotency_key": f"acquire-{host}-{worktree}",
    }
    if host is not None:
        request["session"] = host
    return session(project.project, project.store, project.config, request)


def lease(root: Path, session_id: str) -> tuple[str, str]:
    with db(root) as conn:
        found = conn.execute(
            "SELECT heartbeat_at, lease_expires_at FROM delivery_sessions WHERE id = ?",
            (session_id,),
        ).fetchone()
    return found[0], found[1]


def admission_for_another_host(project) -> str:
    request = {"operation": "admission", "task_id": "T-1", "session": "sess-2"}
    return str(session(project.project, project.store, project.config, request)["verdict"])


def used_a_tool(root: Path, **fields: object) -> dict[str, Any]:
    return hook(root, "PostToolUse", tool_name="Edit", tool_input={"file_path": "a.py"}, **fields)


def test_tool_use_keeps_an_interactive_lease_past_thirty_minutes(
    project_dir, project, record, new_change, clock
):
    new_change()
    define_task(record, "T-1", "First")
    clock(0)
    sid = acquire_task(project)["session"]["id"]
    clock(20)
    used_a_tool(project_dir)
    clock(45)
    hook(project_dir, "Stop")
    now = clock(70)
    assert admission_for_another_host(project) == "abandon"
    assert lease(project_dir, sid)[1] == leases.stamp(now - 25 * 60_000, leases.DEFAULT_TTL_S)


def test_without_tool_use_the_lease_runs_out(project_dir, project, record, new_change, clock):
    new_change()
    define_task(record, "T-1", "First")
    clock(0)
    acquire_task(project)
    clock(31)
    assert admission_for_another_host(project) == "takeover"
    used_a_tool(project_dir)  # too late: an expired lease is not renewed
    assert admission_for_another_host(project) == "takeover"


def test_a_heartbeat_under_a_minute_old_is_not_repeated(
    project_dir, project, record, new_change, clock, count_events
):
    new_change()
    define_task(record, "T-1", "First")
    clock(0)
    sid = acquire_task(project)["session"]["id"]
    events = count_events()
    first = clock(10)
    used_a_tool(project_dir)
    clock(10.5)
    used_a_tool(project_dir)
    assert lease(project_dir, sid)[0] == leases.stamp(first)
    assert count_events() == events


def test_the_named_delivery_session_is_the_acting_one(
    project_dir, project, record, new_change, clock, monkeypatch
):
    new_change()
    define_task(record, "T-1", "First")
    clock(0)
    sid = acquire_task(project, host=None)["session"]["id"]
    monkeypatch.setenv("ITHACA_DELIVERY_SESSION", sid)
    now = clock(5)
    hook(project_dir, "Stop", session_id="sess-9")
    assert lease(project_dir, sid)[0] == leases.stamp(now)


def test_the_session_whose_worktree_holds_cwd_is_the_acting_one(
    project_dir, project, record, new_change, clock
):
    for args in (("config", "user.email", "d@example.com"), ("config", "user.name", "D")):
        subprocess.run(["git", "-C", str(project_dir), *args], check=True)
    (project_dir / "app.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(project_dir), "add", "app.py"], check=True)
    subprocess.run(["git", "-C", str(project_dir), "commit", "-qm", "first"], check=True)
    new_change()
    define_task(record, "T-1", "First")
    clock(0)
    acquired = acquire_task(project, host=None, worktree="create")
    now = clock(5)
    used_a_tool(Path(acquired["worktree"]))
    assert lease(project_dir, acquired["session"]["id"])[0] == leases.stamp(now)


def test_an_acquire_through_the_cli_binds_its_session_to_the_host_session(
    project_dir, project, record, new_change, count_events
):
    new_change()
    define_task(record, "T-1", "First")
    acquired = acquire_task(project, host=None)
    sid = acquired["session"]["id"]
    events = count_events()
    hook(
        project_dir,
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": "ithaca session acquire T-1 --strategy spawn --json"},
        tool_response={"stdout": json.dumps(acquired), "stderr": ""},
    )
    with db(project_dir) as conn:
        bound = conn.execute("SELECT host_session_id FROM delivery_sessions").fetchone()[0]
        event = conn.execute(
            "SELECT actor, subject FROM journal WHERE kind = 'delivery.session_bound'"
        ).fetchall()
    assert bound == HOST_SESSION
    assert event == [("hook", sid)]
    assert count_events() == events + 1
    assert admission_for_another_host(project) == "abandon"


def test_the_breadcrumb_names_the_tasks_session_and_its_lease(
    project_dir, project, record, new_change, clock
):
    new_change()
    define_task(record, "T-1", "First")
    clock(0)
    sid = acquire_task(project)["session"]["id"]
    clock(6.5)
    assert f"Session {sid} lease 23m" in session_start(project_dir)


def test_a_running_session_alone_is_active_work(project_dir, project, record, clock):
    record(
        "task_contract", "define", {"id": "T-1", "title": "Loose", "verification": {"argv": ["x"]}}
    )
    assert session_start(project_dir) is None
    clock(0)
    sid = acquire_task(project)["session"]["id"]
    clock(0.5)
    crumb = session_start(project_dir)
    assert crumb.splitlines()[1] == f"Session {sid} lease 29m"


def test_the_compaction_snapshot_names_the_acting_session(project_dir, project, record, new_change):
    new_change()
    define_task(record, "T-1", "First")
    sid = acquire_task(project)["session"]["id"]
    hook(project_dir, "PreCompact", trigger="auto")
    assert json.loads(snapshot_path(project_dir).read_text())["session_id"] == sid


# ---- imports ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("module", "allowed"),
    [
        (
            "ithaca.delivery.gate",
            (
                "ithaca.delivery.gate",
                "ithaca.delivery.writes",
                "ithaca.delivery.sessions",
                "ithaca.delivery.sessions.leases",
            ),
        ),
        ("ithaca.delivery.resume", ("ithaca.delivery.resume", "ithaca.delivery.breadcrumb")),
        # The package's face loads only the kernel package with it.
        ("ithaca.delivery.breadcrumb", ("ithaca.delivery.breadcrumb", "ithaca.kernel")),
    ],
)
def test_the_hook_modules_import_no_third_party_code(module, allowed):
    probe = (
        f"import sys; before = set(sys.modules); import {module}\n"
        "print('\\n'.join(sorted(set(sys.modules) - before)))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    stdlib = set(sys.stdlib_module_names)
    third_party = {name for name in loaded if name.split(".")[0] not in (*stdlib, "ithaca")}
    assert not third_party, sorted(third_party)
    ithaca = {name for name in loaded if name.split(".")[0] == "ithaca"}
    kernel_ok = module in ("ithaca.delivery.gate", "ithaca.delivery.resume")
    outside = {
        name
        for name in ithaca
        if name not in ("ithaca", "ithaca.delivery", *allowed)
        and not (kernel_ok and name.startswith("ithaca.kernel"))
    }
    assert not outside, sorted(outside)
