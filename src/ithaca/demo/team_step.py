"""Demo scene: a team on one ledger, and a task worked in a session of its own.

You and a teammate change different tasks on two branches and publish the team ledger;
``git merge`` combines the two ledgers through the registered merge driver, and ``sync
import`` brings the teammate's change into your database. The agent then acquires a task
with ``ithaca session acquire`` and gets a Git worktree with ``.ithaca`` linked, a clean
``git status`` and a Worker Packet. Its tool use and the end of its turn renew the lease
through the real hook process, and the task completes only when the packet's digest is
echoed and the output file passes the packet's schema.

Hooks renew a lease at most once a minute, so the scene moves the clock of the processes
it starts forward (a ``sitecustomize`` on their ``PYTHONPATH`` that offsets
``time.time_ns``): forty minutes of work pass in a second, and the lease outlives the
thirty minutes it was first granted.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from ithaca.demo import Stage, expect, script
from ithaca.kernel import git as git_binary

CHANGE = "shout-greeting"
OURS = "T-3"
THEIRS = "T-4"
HOST_SESSION = "demo-team-session"
LEDGER = ".ithaca/tasks/tasks.json"
LEDGER_DRIVER = "ithaca-ledger"  # the merge driver `ithaca init` registers
OUR_BRANCH = "t3-shout"
THEIR_BRANCH = "t4-docs"
OUR_TITLE = "greet() takes shout=True"
THEIR_TITLE = "GREETING.md shows shout=True"
SHOUTING = (
    "def greet(name, shout=False):\n"
    '    text = f"Hello {name}"\n'
    "    return text.upper() if shout else text\n"
)

CLOCK_VARIABLE = "DEMO_CLOCK_AHEAD_S"
CLOCK_SHIM = f'''"""The Ithaca demo's clock: time.time_ns runs ${CLOCK_VARIABLE} seconds ahead."""
import os
import time

_AHEAD_NS = int(os.environ.get("{CLOCK_VARIABLE}", "0")) * 1_000_000_000
_real_time_ns = time.time_ns
time.time_ns = lambda: _real_time_ns() + _AHEAD_NS
'''
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "Ithaca Demo",
    "GIT_AUTHOR_EMAIL": "demo@example.invalid",
    "GIT_COMMITTER_NAME": "Ithaca Demo",
    "GIT_COMMITTER_EMAIL": "demo@example.invalid",
}
VERIFICATION = {"argv": ["python", "-m", "pytest", "-q"]}
PLAN = [
    {
        "kind": "change_contract",
        "action": "open",
        "idempotency_key": "demo-team-change",
        "data": {
            "id": CHANGE,
            "kind": "quick",
            "title": "Shout the greeting",
            "intent": "# Intent\n\nLet callers ask greet() to shout.\n",
            "contract": {"outcome": "greet(name, shout=True) returns HELLO NAME"},
        },
    },
    *(
        {
            "kind": "task_contract",
            "action": "define",
            "idempotency_key": f"demo-team-{task}",
            "data": {
                "id": task,
                "change_id": CHANGE,
                "title": title,
                "files_modified": [path],
                "verification": VERIFICATION,
            },
        }
        for task, title, path in (
            (OURS, "Shout the greeting", "greet.py"),
            (THEIRS, "Document the greeting", "GREETING.md"),
        )
    ),
]


def play(stage: Stage) -> None:
    stage = dataclasses.replace(stage, session_id=HOST_SESSION)
    stage.say("\n== Scene 5: a team on one ledger, a task in its own session ==")
    _merge_two_branches(stage)
    acquired = _acquire(stage)
    worktree = _check_worktree(stage, acquired)
    _keep_the_lease(stage, acquired, worktree)
    _complete(later(stage, 40), acquired, worktree)


# --- the ledger across two branches ----------------------------------------------------


def _merge_two_branches(stage: Stage) -> None:
    say, root = stage.say, stage.root
    plan = stage.home / "team-plan.json"
    plan.write_text(json.dumps({"entries": PLAN}))
    cli(stage, "record", "--batch", f"@{plan}")
    say(f"$ ithaca record --batch: change {CHANGE} with tasks {OURS} and {THEIRS}")
    installed = cli(stage, "sync", "install-driver")["changed"]
    say("$ ithaca sync install-driver")
    for line in installed or ["the merge driver was already registered"]:
        say(f"  {line}")
    first = cli(stage, "sync", "publish", "--key", "demo-team-publish-plan")
    git(stage, root, "add", "-A")
    git(stage, root, "commit", "-q", "-m", "Plan the shout change")
    git(stage, root, "checkout", "-q", "-b", OUR_BRANCH)
    say(
        f"$ ithaca sync publish -> generation {first['generation']}, {first['records']} records;"
        f" git commit; git checkout -b {OUR_BRANCH}"
    )

    mate = dataclasses.replace(stage, root=root.parent / "teammate")
    git(stage, root.parent, "clone", "-q", str(root), str(mate.root))
    git(stage, mate.root, "checkout", "-q", "-b", THEIR_BRANCH)
    done = mate.ithaca("init")
    expect(done.returncode == 0, f"ithaca init in the teammate's clone failed: {done.stderr}")
    say(
        f"\nteammate$ git clone; git checkout -b {THEIR_BRANCH};"
        " ithaca init (its own database, loaded from the cloned ledger)"
    )
    theirs = _retitle(mate, THEIRS, THEIR_TITLE)
    say(
        f"teammate$ ithaca record task_contract revise {THEIRS} (title {THEIR_TITLE!r});"
        f" sync publish -> generation {theirs['generation']}; git commit"
    )
    ours = _retitle(stage, OURS, OUR_TITLE)
    say(
        f"you$ ithaca record task_contract revise {OURS} (title {OUR_TITLE!r});"
        f" sync publish -> generation {ours['generation']}; git commit"
    )

    git(stage, root, "fetch", "-q", str(mate.root), THEIR_BRANCH)
    # Ithaca's own Git obeys no program the repository's settings name, so the demo's
    # merge, played as yours, names the driver your repository registered.
    driver = f"merge.{LEDGER_DRIVER}.driver"
    registered = git(stage, root, "config", "--get", driver).stdout.strip()
    merged = git(
        stage, root, "-c", f"{driver}={registered}", "merge", "--no-edit", "FETCH_HEAD", check=False
    )
    expect(merged.returncode == 0, f"git merge stopped: {merged.stdout} {merged.stderr}")
    ledger = json.loads((root / LEDGER).read_text())
    expect(
        "conflicts" not in ledger, f"the merged ledger lists conflicts: {ledger.get('conflicts')}"
    )
    sides = f"max({ours['generation']}, {theirs['generation']}) + 1"
    expect(
        ledger["generation"] == max(ours["generation"], theirs["generation"]) + 1
        and ledger["parent_digest"] == ours["state_digest"]
        and theirs["state_digest"] in ledger["ancestors"],
        f"the ledger was not merged by the ithaca-ledger driver: {ledger['generation']}",
    )
    tasks = {item["id"]: item for item in ledger["records"] if item["type"] == "task"}
    for task, title in ((OURS, OUR_TITLE), (THEIRS, THEIR_TITLE)):
        expect(tasks[task]["body"]["title"] == title, f"the merge lost {task}: {tasks[task]}")
    say(
        f"you$ git fetch ../teammate {THEIR_BRANCH}; git merge FETCH_HEAD -> merged cleanly:"
        f" the ithaca-ledger driver merged {LEDGER} record by record\n"
        f"  generation {ledger['generation']} = {sides}, no conflicts"
    )
    for task in (OURS, THEIRS):
        found = tasks[task]
        say(f"  {task} r{found['revision']}: {found['body']['title']}")

    applied = cli(stage, "sync", "import", "--key", "demo-team-import")
    expect(applied["applied"] == 1, f"import did not take the teammate's change: {applied}")
    say(
        f"you$ ithaca sync import -> applied {applied['applied']}: the teammate's {THEIRS}"
        f" joins your {OURS} in the database"
    )


def _retitle(stage: Stage, task: str, title: str) -> dict[str, Any]:
    """Revise a task's title, publish the ledger and commit it; returns the publish answer."""
    patch = {"id": task, "patch": {"title": title}}
    key = f"demo-team-{task}-title"
    cli(stage, "record", "task_contract", "revise", "--key", key, "--data", json.dumps(patch))
    published = cli(stage, "sync", "publish", "--key", f"demo-team-{task}-publish")
    git(stage, stage.root, "commit", "-q", "-a", "-m", f"{task}: {title}")
    return published


# --- the session -----------------------------------------------------------------------


def _acquire(stage: Stage) -> dict[str, Any]:
    """Admission, then acquire, as the agent runs them in its shell; the PostToolUse hook
    that follows binds the new session to the agent's host session."""
    say = stage.say
    admitted = cli(stage, "session", "admission", OURS)
    expect(admitted["verdict"] == "spawn", f"admission did not say spawn: {admitted}")
    say(f"\nagent> Bash: ithaca session admission {OURS} -> spawn")
    arguments = ("session", "acquire", OURS, "--strategy", "spawn", "--key", "demo-team-acquire")
    acquired = cli(stage, *arguments)
    command = f"ithaca {' '.join(arguments)} --json"
    held = acquired["session"]
    say(
        f"agent> Bash: {command}\n  -> {held['id']}, packet {acquired['packet']['id']},"
        f" lease until {_time(held['lease_expires_at'])} UTC"
    )
    stage.hook(
        "PostToolUse",
        tool_name="Bash",
        tool_input={"command": command},
        tool_response={
            "stdout": json.dumps(acquired, indent=2),
            "stderr": "",
            "interrupted": False,
        },
    )
    return acquired


def _check_worktree(stage: Stage, acquired: dict[str, Any]) -> Path:
    worktree = Path(acquired["worktree"])
    status = git(stage, worktree, "status", "--porcelain").stdout
    expect(status == "", f"the session's worktree is not clean: {status}")
    link = worktree / ".ithaca"
    central = (stage.root / ".ithaca").resolve()
    expect(link.is_symlink() and link.resolve() == central, f"{link} is not linked to {central}")
    say = stage.say
    say(f"  worktree {worktree.relative_to(stage.root)}/ on {acquired['session']['branch']}")
    say(f"  git status --porcelain -> clean; .ithaca -> {os.readlink(link)}")
    return worktree


def _keep_the_lease(stage: Stage, acquired: dict[str, Any], worktree: Path) -> None:
    say = stage.say
    granted = acquired["session"]["lease_expires_at"]
    (worktree / "greet.py").write_text(SHOUTING)
    edit = {"file_path": str(worktree / "greet.py"), "content": SHOUTING}
    say("\n(the demo moves its processes' clock 20 minutes ahead)")
    twenty = later(stage, 20)
    twenty.hook("PostToolUse", tool_name="Write", tool_input=edit, tool_response={})
    renewed = _lease(twenty)
    expect(renewed["lease_expires_at"] > granted, f"PostToolUse did not renew: {renewed}")
    expect(renewed["host_session_id"] == HOST_SESSION, f"the session is not bound: {renewed}")
    say(
        "agent> Write greet.py (in its worktree)\n"
        f"  PostToolUse -> heartbeat: lease until {_time(renewed['lease_expires_at'])}"
        f" (was {_time(granted)})\n  (the PostToolUse after the acquire bound the session to"
        f" {HOST_SESSION}; its hooks renew the lease)"
    )

    say(f"\n(40 minutes on: the first lease ran out at {_time(granted)})")
    forty = later(stage, 40)
    stop = forty.hook("Stop", stop_hook_active=False, last_assistant_message="Shouting works.")
    expect(stop.get("decision") != "block", f"Stop blocked: {stop}")
    kept = _lease(forty)
    expect(kept["lease_expires_at"] > renewed["lease_expires_at"], f"Stop did not renew: {kept}")
    until = _time(kept["lease_expires_at"])
    say(f"agent> (ends its turn)\n  Stop -> heartbeat: lease until {until}")
    say(
        f"$ ithaca session admission {OURS} -> abandon (not takeover): {kept['id']} holds"
        f" {OURS} until {until}, past its first 30 minutes"
    )


def _lease(stage: Stage) -> dict[str, Any]:
    """The task's running session as another caller's admission sees it: held (abandon)."""
    answer = cli(stage, "session", "admission", OURS)
    expect(answer["verdict"] == "abandon", f"the lease is not held: {answer}")
    found: dict[str, Any] = answer["session"]
    return found


def _complete(stage: Stage, acquired: dict[str, Any], worktree: Path) -> None:
    say = stage.say
    git(stage, worktree, "add", "greet.py")
    git(stage, worktree, "commit", "-q", "-m", f"{OURS}: {OUR_TITLE}")
    head = git(stage, worktree, "rev-parse", "HEAD").stdout.strip()
    packet = json.loads(Path(acquired["packet"]["path"]).read_text())
    output = {
        "task_id": OURS,
        "status": "completed",
        "summary": "greet() shouts when asked",
        "changed_files": ["greet.py"],
        "verification": {**VERIFICATION, "exit_code": 0},
    }
    Path(packet["output"]["path"]).write_text(json.dumps(output, indent=2) + "\n")
    say(
        "\n(the agent finishes as the Worker Packet's worker, in the worktree)\n"
        f"worker$ git commit greet.py ({head[:7]}); writes {Path(packet['output']['path']).name}"
        " as the packet's output schema asks"
    )
    digest = packet["digest"]
    wrong = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    refused = _record_complete(stage, worktree, acquired, wrong)
    expect(
        refused["code"] == "PACKET_DIGEST_MISMATCH", f"a wrong digest was not refused: {refused}"
    )
    say(
        "worker$ ithaca record task_outcome complete (packet digest one character off)"
        f" -> REFUSED: {refused['code']}"
    )
    done = _record_complete(stage, worktree, acquired, digest)
    expect(
        done["task"]["status"] == "completed" and done["session"]["status"] == "completed",
        f"the task did not complete: {done}",
    )
    expect(done["completion_commit"] == head, f"completion is not bound to {head}: {done}")
    say(
        f"worker$ ithaca record task_outcome complete (packet digest {digest[:12]}…)"
        f" -> {OURS} completed at {head[:7]}; session {done['session']['status']}"
    )

    ledger = json.loads((stage.root / LEDGER).read_text())
    status = next(item["body"]["status"] for item in ledger["records"] if item["id"] == OURS)
    expect(status == "completed", f"the completion was not published: {OURS} {status}")
    say(f"  the completion published the team ledger: {LEDGER} shows {OURS} {status}")


def _record_complete(
    stage: Stage, worktree: Path, acquired: dict[str, Any], digest: str
) -> dict[str, Any]:
    """``record task_outcome complete`` run from the worktree (the project is found through
    its ``.ithaca`` link); the result, or the error on refusal."""
    data = {"task_id": OURS, "session_id": acquired["session"]["id"], "packet_digest": digest}
    command = [script("ithaca"), "record", "task_outcome", "complete", "--json"]
    command += ["--key", f"demo-team-complete-{digest[:8]}", "--data", json.dumps(data)]
    done = subprocess.run(
        command, cwd=worktree, capture_output=True, text=True, env=stage.env(), timeout=60
    )
    if done.returncode != 0:
        error: dict[str, Any] = json.loads(done.stderr.strip().splitlines()[-1])["error"]
        return error
    result: dict[str, Any] = json.loads(done.stdout)["results"][0]["result"]
    return result


# --- helpers ---------------------------------------------------------------------------


def later(stage: Stage, minutes: int) -> Stage:
    """The stage whose processes see the clock ``minutes`` ahead."""
    shim = stage.home / "clock"
    shim.mkdir(exist_ok=True)
    (shim / "sitecustomize.py").write_text(CLOCK_SHIM)
    inherited = stage.env().get("PYTHONPATH")
    path = str(shim) if not inherited else f"{shim}{os.pathsep}{inherited}"
    ahead = {"PYTHONPATH": path, CLOCK_VARIABLE: str(minutes * 60)}
    return dataclasses.replace(stage, extra_env={**stage.extra_env, **ahead})


def cli(stage: Stage, *args: str) -> dict[str, Any]:
    """``ithaca ARGS --json`` in the stage's project; its answer."""
    done = stage.ithaca(*args, "--json")
    expect(done.returncode == 0, f"ithaca {' '.join(args[:2])} failed: {done.stderr.strip()}")
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def git(stage: Stage, where: Path, *args: str, check: bool = True) -> git_binary.TextResult:
    done = git_binary.run_text(
        ["-c", "commit.gpgsign=false", *args],
        cwd=str(where),
        env=stage.env(),
        git_env=GIT_IDENTITY,
        timeout=60,
    )
    if check:
        failure = (done.stderr or done.stdout).strip()
        expect(done.returncode == 0, f"git {' '.join(args[:2])} failed: {failure}")
    return done


def _time(stamp: str) -> str:
    """``HH:MM:SS`` of a stored UTC timestamp."""
    return stamp[11:19]
