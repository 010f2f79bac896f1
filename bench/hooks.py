"""Whole-process cost of the UserPromptSubmit and PreToolUse hooks against a bare interpreter.

Claude Code starts a fresh hook process for every prompt and every tool call, so what
the user waits for is interpreter start-up plus imports plus one store visit. The hooks
are timed as ``ithaca install claude`` writes them: ``/bin/sh -c`` running the portable
command (``ithaca-hook`` looked up on ``PATH``, then exec'd); the ``ithaca-hook`` console
script started directly is timed beside them, which shows what the shell adds.
The target (protocols reference §12) is a median of at most 2x a bare ``python -c pass``
started by the same interpreter binary. Runs alternate baseline / UserPromptSubmit /
baseline / PreToolUse so that background load hits all three alike. PreToolUse is timed
on an ``Edit`` and on a mutating ``Bash`` line, which also runs the shell parser.

The project holds the base set plus 50 user records, and a user ``config.toml``
(``user_id``) and a tracked one (``project_id``, ``client_id``) as a team would have, so
records selecting on those keys match. PreToolUse runs on a session whose
event is admitted and whose bundle is loaded, so an Edit or a Bash line takes the normal
allow path (bundle check, constraints, decision journaled). UserPromptSubmit runs on a second
session, so its admissions never unload the first session's bundle. As in a Claude Code
session, where the MCP server keeps its store connection open, one connection stays open
while the hooks are timed; without it each hook is the database's last connection and
pays SQLite's checkpoint-on-close (``--alone`` times that case).

Last, unless ``--no-host``, the same hooks are timed as the real Claude Code measures them
(``hooks_in_claude``), against a bare-interpreter hook in the same session.

    .venv/bin/python bench/hooks.py [--quick] [--imports] [--no-host]
"""

from __future__ import annotations

import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import hooks_in_claude
from _common import BIN, new_project, parser, percentile, protocol_records, scratch, verdict
from ithaca import open_project

TARGET_RATIO = 2.0
USER_RECORDS = 50
PROMPT_SESSION = "bench-prompts"
TOOL_SESSION = "bench-tools"
EVENT_ID = re.compile(r"evt_[0-9A-HJKMNP-TV-Z]{26}")
# The answers of the paths being timed: an admitted prompt, a silent allow.
EXPECTED: dict[str, Callable[[str], bool]] = {
    "baseline": lambda answer: answer == "",
    "UserPromptSubmit": lambda answer: "admitted this prompt as event" in answer,
    "PreToolUse": lambda answer: answer.strip() == "",
    "PreToolUse (Bash)": lambda answer: answer.strip() == "",
    "PreToolUse (script)": lambda answer: answer.strip() == "",
}
BASH_LINE = "python -m pytest -q tests && git add -A && git status --short"
# What every hook process needs: the paths, the JSON accelerator, SQLite.
FLOOR_IMPORTS = "import os, _json, _sqlite3"
# Times one hook's phases inside its own process (see _print_phases).
PHASES = """
import sys, time
started = time.perf_counter()
from ithaca.hosts import dispatch
imported = time.perf_counter()
stdin = sys.stdin.read()
dispatch.run("claude", sys.argv[1], stdin)
first = time.perf_counter()
dispatch.run("claude", sys.argv[1], stdin)
second = time.perf_counter()
print((imported - started) * 1e3, (first - imported) * 1e3, (second - first) * 1e3)
"""


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--imports", action="store_true", help="print -X importtime top entries")
    options.add_argument(
        "--alone", action="store_true", help="no other open connection (no MCP server)"
    )
    options.add_argument(
        "--no-host", action="store_true", help="skip the measurement inside the real Claude Code"
    )
    args = options.parse_args()
    runs = 15 if args.quick else 60
    hook = BIN / "ithaca-hook"
    with scratch() as root:
        prompt_input, tool_input, bash_input = _prepare(root, hook)
        server_side = None if args.alone else open_project(root / "project")
        if server_side is not None:
            server_side.store.connection()  # what the MCP server holds during a session
        commands = {
            "baseline": ([sys.executable, "-c", "pass"], b""),
            "UserPromptSubmit": (_installed("UserPromptSubmit"), prompt_input),
            "PreToolUse": (_installed("PreToolUse"), tool_input),
            "PreToolUse (Bash)": (_installed("PreToolUse"), bash_input),
            "PreToolUse (script)": ([str(hook), "claude", "PreToolUse"], tool_input),
        }
        for name in commands:  # warm the page cache, the bytecode cache and the store
            for _ in range(3):
                _run(*commands[name])
        timings: dict[str, list[float]] = {name: [] for name in commands}
        unexpected = 0
        for _ in range(runs):
            order = ("baseline", "UserPromptSubmit", "baseline", "PreToolUse")
            for name in (*order, "PreToolUse (Bash)", "PreToolUse (script)"):
                elapsed, answer = _run(*commands[name])
                timings[name].append(elapsed)
                unexpected += not EXPECTED[name](answer)
        if server_side is not None:
            server_side.close()
        _report(timings, runs)
        if unexpected:
            print(f"warning: {unexpected} runs answered differently from the setup check")
        if args.imports:
            _print_floor(10 if args.quick else 30)
            for event, stdin in (("UserPromptSubmit", prompt_input), ("PreToolUse", tool_input)):
                command = [sys.executable, "-X", "importtime", str(hook), "claude", event]
                _print_imports(event, command, stdin)
                _print_phases(event, stdin)
        if not args.no_host:
            hooks_in_claude.measure(10 if args.quick else 40, TARGET_RATIO)
    return 0


def _installed(event: str) -> list[str]:
    """The hook command ``ithaca install claude`` writes for ``event``, as argv."""
    from ithaca.hosts.claude.installer import hook_command

    return ["/bin/sh", "-c", hook_command(event)]


def _prepare(root: Path, hook: Path) -> tuple[bytes, bytes, bytes]:
    """Set up the project and both sessions; returns the stdin of the prompt, the Edit and
    the Bash call."""
    project = new_project(root)
    project_dir = root / "project"
    service = project.protocols
    for record in protocol_records(USER_RECORDS):
        service.create_protocol(record, actor="user")

    def prompt(session: str) -> bytes:
        return json.dumps(
            {
                "session_id": session,
                "cwd": str(project_dir),
                "hook_event_name": "UserPromptSubmit",
                "prompt": "Fix the failing date parser test.",
            }
        ).encode()

    answer = _check_output(hook, "UserPromptSubmit", prompt(TOOL_SESSION))
    found = EVENT_ID.search(answer)
    if found is None or not EXPECTED["UserPromptSubmit"](answer):
        raise SystemExit(f"UserPromptSubmit did not admit the prompt: {answer!r}")
    loaded = service.load_protocols({"eventId": found.group(0)})

    def tool(name: str, arguments: dict[str, str]) -> bytes:
        return json.dumps(
            {
                "session_id": TOOL_SESSION,
                "cwd": str(project_dir),
                "hook_event_name": "PreToolUse",
                "tool_name": name,
                "tool_input": arguments,
            }
        ).encode()

    tool_input = tool(
        "Edit",
        {
            "file_path": str(project_dir / "src" / "app.py"),
            "old_string": "return 1",
            "new_string": "return 2",
        },
    )
    bash_input = tool("Bash", {"command": BASH_LINE})
    for name, stdin in (("Edit", tool_input), ("Bash", bash_input)):
        answer = _check_output(hook, "PreToolUse", stdin)
        if not EXPECTED["PreToolUse"](answer):
            raise SystemExit(f"PreToolUse did not allow the {name} call: {answer!r}")
    count = len(service.list_protocols())
    project.close()
    print(
        f"setup: {count} stored protocols ({USER_RECORDS} user), bundle of"
        f" {len(loaded['protocols'])} loaded for the PreToolUse session"
    )
    return prompt(PROMPT_SESSION), tool_input, bash_input


def _check_output(hook: Path, event: str, stdin: bytes) -> str:
    done = subprocess.run(
        [str(hook), "claude", event], input=stdin, capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{event} exited {done.returncode}: {done.stderr.decode()}")
    return done.stdout.decode()


def _run(command: list[str], stdin: bytes) -> tuple[float, str]:
    """Wall time of one process in milliseconds, and what it printed."""
    started = time.perf_counter_ns()
    done = subprocess.run(command, input=stdin, capture_output=True, check=False)
    return (time.perf_counter_ns() - started) / 1e6, done.stdout.decode()


def _report(timings: dict[str, list[float]], runs: int) -> None:
    base = statistics.median(timings["baseline"])
    print(f"\n{runs} runs per hook, {len(timings['baseline'])} baseline runs, alternating")
    print(f"baseline: {sys.executable} -c pass")
    print(f"{'':22}{'median ms':>10}{'p90 ms':>9}{'ratio':>8}")
    for name, values in timings.items():
        median = statistics.median(values)
        line = f"{name:22}{median:10.1f}{percentile(values, 90):9.1f}{median / base:8.2f}"
        if name in ("UserPromptSubmit", "PreToolUse", "PreToolUse (Bash)"):
            line += f"   target <= {TARGET_RATIO:.1f}x  {verdict(median / base <= TARGET_RATIO)}"
        print(line)


def _print_imports(event: str, command: list[str], stdin: bytes, top: int = 15) -> None:
    bare = _parse_importtime(
        _importtime_stderr([sys.executable, "-X", "importtime", "-c", "pass"], b"")
    )
    entries = _parse_importtime(_importtime_stderr(command, stdin))
    extra = {name: entry for name, entry in entries.items() if name not in bare}
    own = sum(entry[0] for name, entry in extra.items() if name.split(".")[0] == "ithaca")
    other = sum(entry[0] for name, entry in extra.items() if name.split(".")[0] != "ithaca")
    print(
        f"\n-X importtime, {event}: {len(entries)} modules; beyond a bare interpreter"
        f" {len(extra)} modules, {own / 1000:.1f} ms self in ithaca.*,"
        f" {other / 1000:.1f} ms self in other modules"
    )
    print(f"{'cumulative ms':>14}{'self ms':>9}  module")
    ranked = sorted(entries.items(), key=lambda item: item[1][1], reverse=True)
    for name, (self_us, cumulative_us, depth) in ranked[:top]:
        print(f"{cumulative_us / 1000:14.2f}{self_us / 1000:9.2f}  {'  ' * depth}{name}")


def _print_floor(runs: int) -> None:
    """How close to the baseline any hook can get: a process started like the installed
    hooks (``-S -P``) that only imports what every hook needs (the host's JSON, the store)."""
    bare = [sys.executable, "-c", "pass"]
    floor = [sys.executable, "-S", "-P", "-c", FLOOR_IMPORTS]
    timings: dict[str, list[float]] = {"bare": [], "floor": []}
    for _ in range(runs):
        timings["bare"].append(_run(bare, b"")[0])
        timings["floor"].append(_run(floor, b"")[0])
    bare_ms, floor_ms = (statistics.median(values) for values in timings.values())
    print(
        f'\nfloor: `python -S -P -c "{FLOOR_IMPORTS}"` median {floor_ms:.1f} ms,'
        f" {floor_ms / bare_ms:.2f}x a bare interpreter ({bare_ms:.1f} ms, {runs} runs each)"
    )


def _print_phases(event: str, stdin: bytes, runs: int = 5) -> None:
    """Split one hook process into its eager imports and two ``dispatch.run`` calls: the
    first also pays the lazy imports, the second is the work alone."""
    samples = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", PHASES, event], input=stdin, capture_output=True, check=True
        )
        samples.append([float(part) for part in done.stdout.split()])
    eager, first, second = (statistics.median(column) for column in zip(*samples, strict=True))
    print(
        f"in process, median of {runs}: eager imports {eager:.1f} ms, first dispatch.run"
        f" {first:.1f} ms (lazy imports ~{first - second:.1f} ms), second {second:.1f} ms"
    )


def _importtime_stderr(command: list[str], stdin: bytes) -> str:
    return subprocess.run(command, input=stdin, capture_output=True, check=False).stderr.decode()


def _parse_importtime(stderr: str) -> dict[str, tuple[int, int, int]]:
    """``module -> (self us, cumulative us, nesting depth)`` from ``-X importtime`` lines."""
    entries: dict[str, tuple[int, int, int]] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "imported package" in line:
            continue
        self_us, cumulative_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip())) // 2
        entries[name.strip()] = (int(self_us), int(cumulative_us), max(depth - 1, 0))
    return entries


if __name__ == "__main__":
    sys.exit(main())
