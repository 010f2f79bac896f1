"""The critic's own verification run, for hosts that do not report a command's outcome.

Codex 0.169 hands PostToolUse the output text of a shell command and not its exit status,
so the critic cannot know from the hook whether the agent's test run passed. At Stop it
runs the first verification command itself, as a shell probe in the validator sandbox
(``validators.runner``): in the project root, which it reads and cannot change, with no
network, under ``verification.timeout_s``. Ithaca measured the result, so the agent's
word plays no part in it. Imported only for that run.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel import deadline
from ithaca.kernel.errors import IthacaError
from ithaca.kernel.gates import GateContext
from ithaca.validators import runner, runtimes
from ithaca.validators import snapshot as cell_snapshot

TAIL_LINES = 20
# The Codex Stop hook runs for at most 90 s (``hosts.codex.TIMEOUTS``): the run must end
# before, and before the hook's own deadline (``kernel.deadline``) less this much.
MAX_RUN_S = 75
AFTER_RUN_S = 1.0
TAIL_CHARS = 1500
SCRIPT = """\
. "$ITHACA_RUN_DIR/tb-validate.sh"
{command}
status=$?
if [ "$status" -eq 0 ]; then tb_pass "exit 0"; else tb_fail "exit $status"; fi
"""


def run_verification(ctx: GateContext, command: str) -> tuple[bool, str]:
    """Whether ``command`` passed in the sandbox, and the tail of its output when not."""
    assert ctx.project is not None
    settings = dict(ctx.config["validators"])
    timeout_s = min(ctx.config["verification"]["timeout_s"], MAX_RUN_S)
    left = deadline.remaining()
    if left is not None:  # killed (with its grace) before the hook must answer
        timeout_s = min(timeout_s, left - settings["grace_s"] - AFTER_RUN_S)
        if timeout_s < 1:
            deadline.mark_cut_short()
            return False, "no time was left to run it before the host's hook timeout"
    settings["timeout_s"] = max(settings["timeout_s"], timeout_s)
    try:
        snapshot: dict[str, Any] = {
            "schema": cell_snapshot.SCHEMA,
            "language": "shell",
            "mode": "probe",
            "entrypoint": "verify.sh",
            "source": SCRIPT.format(command=command),
            "timeout_s": timeout_s,
            "runtime": runtimes.measure("shell", settings),
            "manifests": [],
        }
        result = runner.run_snapshot(snapshot, {}, settings, project_root=ctx.project.root)
    except IthacaError as exc:
        return False, f"Ithaca could not run it ({exc.code}: {exc.message})"
    if result["pass"]:
        return True, ""
    output = f"{result['stdout']}{result['stderr']}".rstrip()
    tail = "\n".join(output.splitlines()[-TAIL_LINES:])[-TAIL_CHARS:]
    return False, f"({result['reason']})\n{tail}" if tail else f"({result['reason']})"
