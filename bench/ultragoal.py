"""What an Ultragoal pursuit costs at the moments the agent feels it.

Ultragoal's reference (§9) sets two targets, measured here in one throwaway git project
whose session is pursuing two stories (protocols admitted and loaded, so every gate
really decides):

1. **Hooks, whole process.** The hook command ``ithaca install claude`` writes, fed
   Claude Code's JSON, against ``python -c pass`` of the same interpreter, interleaved,
   median of the runs after 3 warm-ups each. Three calls:
   - ``Stop`` while pursuing: the persistent gate reads the row, the progress fingerprint
     (HEAD from the git files, story statuses, evidence, validator passes) and blocks,
     writing its bookkeeping;
   - ``PreToolUse`` Bash ``ithaca ultragoal status``: the Bash guard parses and allows;
   - ``PreToolUse`` Task for the reviewer: the review-dispatch claim (a write, and the
     nonce added to the prompt). The dispatch counter is reset between runs, outside the
     timing, so every timed claim succeeds.
   Prints each median ratio; target ≤ 2.0.
2. **CLI, whole process.** ``ithaca ultragoal get``, ``set-stories`` (a second session,
   planning) and ``record-story-verdict`` (REQUEST_CHANGES, repeatable), each as a fresh
   process. Prints the medians; target ≤ 300 ms (no validator runs).

    .venv/bin/python bench/ultragoal.py [--quick]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import BIN, new_project, parser, percentile, scratch, verdict
from ithaca.hosts.claude.installer import hook_command
from ithaca.ultragoal.service import UltragoalService

HOOK_TARGET = 2.0
CLI_TARGET_MS = 300.0
SESSION = "bench-pursuit"
PLANNING_SESSION = "bench-planning"
STORIES = [
    {
        "id": f"S{n}",
        "story": f"Bench story {n}",
        "acceptance_criteria": [f"criterion {n}"],
        "verification_surface": f"test_{n} passes",
    }
    for n in (1, 2)
]


def main() -> int:
    args = parser(__doc__.splitlines()[0]).parse_args()
    runs = 8 if args.quick else 30
    with scratch() as root:
        project_dir = root / "project"
        _git(project_dir, "init", "-q")
        (project_dir / "README.md").write_text("bench\n", encoding="utf-8")
        _git(project_dir, "add", "README.md")
        _git(project_dir, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "start")
        project = new_project(root)
        try:
            service = _pursuing(project, project_dir)
            _hooks(service, project_dir, runs)
            _cli(project_dir, runs)
        finally:
            project.close()
    return 0


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True)


def _pursuing(project: Any, project_dir: Path) -> UltragoalService:
    event = project.protocols.admit_event(
        connector="test", workflow="coding", host_session_id=SESSION
    )
    project.protocols.load_protocols({"eventId": event["id"], "session": SESSION})
    service = UltragoalService(project.project, project.store, project.config)
    evidence = project_dir / "evidence" / "final.txt"
    evidence.parent.mkdir()
    evidence.write_text("done\n", encoding="utf-8")

    def call(operation: str, session: str = SESSION, **fields: Any) -> None:
        service.dispatch({"operation": operation, "session": session, **fields})

    for session in (SESSION, PLANNING_SESSION):
        service.seed(session, user_typed=True)
        call("set", session, phase="planning", outcome="Bench objective", verification_surface="x")
        call("set_stories", session, stories=STORIES)
    call("confirm_all_stories")
    # A budget no run of this benchmark reaches, so every Stop takes the blocking path.
    call("set", phase="pursuing", completion_evidence=["evidence/final.txt"], max_iterations=10**4)
    for story in STORIES:
        call(
            "record_story_verdict",
            id=story["id"],
            verdict="APPROVE",
            evidence_refs=["evidence/final.txt"],
            verifier="bench",
        )
    return service


def _hooks(service: UltragoalService, project_dir: Path, runs: int) -> None:
    base = {"session_id": SESSION, "cwd": str(project_dir), "transcript_path": "/dev/null"}
    payloads: dict[str, dict[str, Any]] = {
        "Stop": {**base, "hook_event_name": "Stop", "stop_hook_active": True},
        "PreToolUse Bash": {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": f"ithaca ultragoal status --session {SESSION}"},
        },
        "PreToolUse claim": {
            **base,
            "hook_event_name": "PreToolUse",
            "tool_name": "Task",
            "tool_input": {
                "description": "review",
                "prompt": "Review the whole diff.",
                "subagent_type": "code-reviewer",
            },
        },
    }
    commands: dict[str, tuple[list[str], bytes]] = {
        "baseline": ([sys.executable, "-c", "pass"], b"")
    }
    for name, payload in payloads.items():
        event = payload["hook_event_name"]
        commands[name] = (["/bin/sh", "-c", hook_command(str(event))], json.dumps(payload).encode())
    conn = service.store.connection()

    def reset_claims() -> None:
        with service.store.write() as tx:
            tx.execute("UPDATE ultragoal_pursuit SET review_dispatch_used = 0")

    for command, stdin in commands.values():
        for _ in range(3):
            reset_claims()
            _timed(command, stdin)
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, stdin) in commands.items():
            reset_claims()
            elapsed, answer = _timed(command, stdin)
            _check(name, answer)
            timings[name].append(elapsed)
    phase = conn.execute("SELECT phase FROM ultragoal_pursuit WHERE session_id = ?", (SESSION,))
    if phase.fetchone()[0] != "pursuing":
        raise SystemExit("the pursuit left pursuing during the benchmark")
    floor = statistics.median(timings["baseline"])
    print(f"hooks on a pursuing session, {runs} runs each, interleaved, after 3 warm-ups")
    print(f"baseline {sys.executable} -c pass: median {floor:.1f} ms")
    print(f"{'':18}{'p50 ms':>8}{'p90 ms':>8}{'ratio':>7}")
    for name in payloads:
        median = statistics.median(timings[name])
        print(
            f"{name:18}{median:8.1f}{percentile(timings[name], 90):8.1f}{median / floor:7.2f}"
            f"   target <= {HOOK_TARGET}  {verdict(median / floor <= HOOK_TARGET)}"
        )
    print()


def _check(name: str, answer: str) -> None:
    """Each timed call must have done its job, or the timing means nothing."""
    if name == "Stop" and '"decision": "block"' not in answer.replace('":"', '": "'):
        raise SystemExit(f"Stop did not block while pursuing: {answer}")
    if name == "PreToolUse Bash" and "deny" in answer:
        raise SystemExit(f"the Bash guard denied a read: {answer}")
    if name == "PreToolUse claim" and "nonce=" not in answer:
        raise SystemExit(f"the reviewer dispatch was not claimed: {answer}")


def _cli(project_dir: Path, runs: int) -> None:
    ithaca = str(BIN / "ithaca")
    verdict_json = json.dumps(
        {
            "id": "S1",
            "verdict": "REQUEST_CHANGES",
            "evidence_refs": ["evidence/final.txt"],
            "verifier": "bench",
        }
    )
    commands = {
        "get": [ithaca, "ultragoal", "get", "--session", SESSION],
        "set-stories": [
            ithaca,
            "ultragoal",
            "set-stories",
            "--session",
            PLANNING_SESSION,
            "--json",
            json.dumps(STORIES),
        ],
        "record-story-verdict": [
            ithaca,
            "ultragoal",
            "record-story-verdict",
            "--session",
            SESSION,
            "--json",
            verdict_json,
        ],
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "CODEX"))}
    for command in commands.values():
        _run_cli(command, project_dir, env)
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            timings[name].append(_run_cli(command, project_dir, env))
    print(f"ithaca ultragoal subcommands, whole process, {runs} runs each")
    print(f"{'':22}{'p50 ms':>8}{'p90 ms':>8}")
    for name, values in timings.items():
        median = statistics.median(values)
        print(
            f"{name:22}{median:8.1f}{percentile(values, 90):8.1f}   target <= {CLI_TARGET_MS:.0f}"
            f" ms  {verdict(median <= CLI_TARGET_MS)}"
        )


def _run_cli(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter_ns()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = (time.perf_counter_ns() - started) / 1e6
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[1:4])} failed: {done.stderr or done.stdout}")
    return elapsed


def _timed(command: list[str], stdin: bytes) -> tuple[float, str]:
    started = time.perf_counter_ns()
    done = subprocess.run(command, input=stdin, capture_output=True)
    elapsed = (time.perf_counter_ns() - started) / 1e6
    if done.returncode != 0:
        raise SystemExit(f"{command[-2:]} exited {done.returncode}: {done.stderr.decode()}")
    return elapsed, done.stdout.decode()


if __name__ == "__main__":
    sys.exit(main())
