"""Hook latency as the real Claude Code measures it, against a bare-interpreter hook.

Claude Code's debug log records every hook it ran with its duration ("Hooks: PreToolUse:Bash
[command] finished with status 0 (38ms)"): the time the user waits, spawn and pipes
included. A scripted model drives one headless session of the pinned binary
(``tests/hosts_real``): it loads the protocols, then makes a run of read-only ``Bash`` calls
and a run of ``Write`` calls. Beside Ithaca's installed hooks, the test user's settings
register a hook that only starts the same interpreter binary (``python -c pass``) for the
same events, so each event has both durations from the same host in the same run, and
the ratio is taken between them.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import BIN, percentile, verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the real-host bench's harness
from tests.hosts_real.claude_host import DEFAULT_ALLOW, ClaudeHost  # noqa: E402
from tests.hosts_real.messages_api import MessagesWire  # noqa: E402
from tests.hosts_real.scripted import Script, ScriptedModel  # noqa: E402

BARE = f"{sys.executable} -c pass"
FINISHED = re.compile(r"Hooks: (\w+)(?::\S+)? \[(.*)\] finished with status (\d+) \((\d+)ms\)")
EVENTS = ("UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")


def measure(calls: int, target: float) -> None:
    """Play one session of ``calls`` reads and ``calls`` writes and print the table."""
    with tempfile.TemporaryDirectory(prefix="ithaca-bench-claude-") as folder:
        root = Path(folder)
        with ScriptedModel(MessagesWire()) as model:
            host = ClaudeHost(root, model, BIN / "ithaca")
            host.install()
            bare = [{"hooks": [{"type": "command", "command": BARE}]}]
            host.user_settings(allow=DEFAULT_ALLOW, hooks={event: bare for event in EVENTS})
            steps = [
                *host.protocols_loaded(),
                *(host.shell(f"test -d src{n} || true") for n in range(calls)),
                *(host.write(f"note{n}.txt", "bench\n") for n in range(calls)),
            ]
            run = host.run("Measure the hooks", Script(main=steps), timeout=600)
            if run.exit_code != 0:
                raise SystemExit(f"claude exited {run.exit_code}: {run.stderr[-2000:]}")
            durations = _durations(run.debug_log.read_text())
            missing = [n for n in range(calls) if not (host.repo / f"note{n}.txt").exists()]
            if missing:  # the writes were refused: this would time refusals, not the path
                raise SystemExit(f"{len(missing)} of the session's writes were refused")
    print(f"\nin Claude Code {host.binary.name} (debug log, {calls} reads + {calls} writes)")
    print(f"bare hook: {BARE}")
    print(f"{'':22}{'ithaca ms':>10}{'p90 ms':>9}{'bare ms':>9}{'ratio':>8}")
    for event in EVENTS:
        ours, base = durations[event, "ithaca"], durations[event, "bare"]
        if not ours or not base:
            print(f"{event:22}{'(not run)':>10}")
            continue
        ratio = statistics.median(ours) / statistics.median(base)
        line = (
            f"{event:22}{statistics.median(ours):10.1f}{percentile(ours, 90):9.1f}"
            f"{statistics.median(base):9.1f}{ratio:8.2f}"
        )
        if event in ("UserPromptSubmit", "PreToolUse"):
            line += f"   target <= {target:.1f}x  {verdict(ratio <= target)}"
        print(line)


def _durations(log: str) -> dict[tuple[str, str], list[float]]:
    """``{(event, "ithaca" | "bare"): [ms, …]}`` of every hook the log shows finishing."""
    found: dict[tuple[str, str], list[float]] = defaultdict(list)
    for event, command, status, ms in FINISHED.findall(log):
        if status != "0":
            raise SystemExit(f"a {event} hook exited {status}: {command}")
        who = "bare" if command == BARE else "ithaca" if "ithaca-hook" in command else ""
        if who:
            found[event, who].append(float(ms))
    return found
