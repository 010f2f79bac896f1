"""The critic's own verification run at Stop, inside the time the host gives the hook.

When no run of the project as it is now exists, the critic runs the project's tests
itself (``verification.run``: the validator sandbox, Ithaca's environment, counts from
the runner's report), so an agent that edits, tests and stops needs no extra step. It
never starts a run it cannot finish before the host's hook timeout: not when the last
run of the same runner took longer than the time left (``kernel.deadline``), and any run
it starts is killed in time. The run is recorded, with its journal event, in the
critic's commit. Imported only for that run.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel import canon, clock, deadline
from ithaca.kernel.errors import IthacaError
from ithaca.kernel.gates import GateContext
from ithaca.verification import records

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.verification import runners

# Left for the hook to record the run and answer once the run ends.
AFTER_RUN_S = 1.0


def run_here(
    ctx: GateContext,
    runner: runners.Runner,
    settings: dict[str, Any],
    tree_digest: str,
    config_digest: str,
    laid: dict[str, bytes | None],
    blobs: Any,
) -> tuple[dict[str, Any] | None, str]:
    """The run the critic made (not yet recorded), or None and why it did not run."""
    from ithaca.verification import run

    assert ctx.project is not None and ctx.conn is not None
    sandbox = dict(ctx.config["validators"])
    timeout_s = float(settings["timeout_s"])
    left = deadline.remaining()
    if left is not None:
        timeout_s = min(timeout_s, left - sandbox["grace_s"] - AFTER_RUN_S)
    last = records.latest(ctx.conn, runner.name)
    if last is not None and last["duration_ms"] / 1000 >= timeout_s:
        took = last["duration_ms"] / 1000
        return None, (
            f"the last run of {runner.name} took {took:.0f} s, longer than the Stop hook may"
            f" run ({max(timeout_s, 0):.0f} s)"
        )
    if timeout_s < 1:
        deadline.mark_cut_short()
        return None, "no time was left to run it before the host's hook timeout"
    started = clock.now()
    try:
        outcome = run.in_sandbox(
            ctx.project.root, runner, timeout_s=timeout_s, settings=sandbox, overlay=laid
        )
    except IthacaError as exc:
        return None, f"Ithaca could not run it: {exc.code}: {exc.message}"
    tests_blob = blobs.put(canon.canonical(outcome.tests)) if outcome.tests else None
    return {
        "id": None,
        "runner": runner.name,
        "spec": runner,
        "outcome": outcome,
        "status": outcome.status,
        "counts": outcome.counts,
        "reason": outcome.reason,
        "tail": "" if outcome.status == "passed" else outcome.tail,
        "tests_blob": tests_blob,
        "tree_digest": tree_digest,
        "config_digest": config_digest,
        "started_at": started,
        "finished_at": clock.now(),
    }, ""


def keep(conn: Any, payload: dict[str, Any], ctx: GateContext, pending: dict[str, Any]) -> None:
    """Record the critic's run, inside the hook's write transaction, and name it in the
    verdict's ``payload``."""
    from ithaca.kernel.blobs import BlobStore

    assert ctx.project is not None
    recorded = records.record(
        conn,
        BlobStore(ctx.project.blobs_dir),
        runner=pending["spec"],
        outcome=pending["outcome"],
        tree_digest=pending["tree_digest"],
        config_digest=pending["config_digest"],
        started_at=pending["started_at"],
        finished_at=pending["finished_at"],
        session_id=ctx.session_id,
        actor="hook",
    )
    pending["id"] = payload["run"] = recorded["id"]
