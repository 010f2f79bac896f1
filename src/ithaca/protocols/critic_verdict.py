"""The critic's verdict at Stop: may a turn that changed the project end?

It may when the project's content is what the turn began with; when Ithaca's own run of
the project as it is now passed and kept the tests and runner configuration the turn
began with (``verification.judgement``); or when the agent ended honestly with
``UNVERIFIED: <why>``. Without such a run the critic runs the tests itself, but only
when the last run took less time than the host lets this hook live (``kernel.deadline``);
else, and after a failing run, the turn is held with what to do, at most
``verification.max_blocks`` times. ``ithaca.protocols.critic`` follows the turn and loads
this module only for a Stop after a change. Standard library and light modules only.
"""

from __future__ import annotations

from ithaca.kernel.gates import GateContext, Opinion
from ithaca.protocols import critic
from ithaca.verification import digest, judgement, records, runners, turn

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.kernel.blobs import BlobStore

TOOL_HINT = "call Ithaca's `verify` MCP tool (it runs the project's tests itself, in its sandbox)"


def verdict(ctx: GateContext, event_id: str, state: dict[str, Any]) -> Opinion:
    """Whether the turn ``event_id``, which changed the project, may end (``state`` is the
    critic's for the turn, changed in place for the critic's commit)."""
    from ithaca.kernel.blobs import BlobStore

    assert ctx.project is not None and ctx.conn is not None
    settings = critic.settings(ctx, state)
    try:
        tree = turn.current_tree(ctx.project, settings, _until())
    except digest.Unfinished:
        return _unread(ctx, state, event_id)
    if tree.digest == state.get("turn_digest"):
        return _end(ctx, state, event_id, "unchanged", {})
    declared = _declared(ctx.payload.get("last_assistant_message"))
    runner = runners.detect(ctx.project.root, settings)
    if runner is None:
        why = declared or "no test runner is known"
        message = (
            f"Ithaca: this turn ended UNVERIFIED ({why}). Ithaca found no test runner in this"
            " project: set [verification] runner or commands in .ithaca/config.toml."
        )
        return _end(ctx, state, event_id, "unverified", {"why": why}, message)
    blobs = BlobStore(ctx.project.blobs_dir)
    now_config = turn.configuration(tree.files, runner.config)
    then_config = turn.runner_config(state, runner)
    config_digest = turn.configuration_digest(then_config or now_config)
    run = records.settled_for(ctx.conn, tree.digest, runner.name, config_digest)
    pending = None
    why_not_run = ""
    if run is None and declared is None:
        from ithaca.protocols import critic_run

        laid = turn.overlay(then_config, now_config, blobs.get) if then_config else {}
        pending, why_not_run = critic_run.run_here(
            ctx, runner, settings, tree.digest, config_digest, laid, blobs
        )
        run = pending
    if run is not None and run["status"] == "passed":
        found = judgement.problems(
            ctx.conn, blobs, state, run, then_config, now_config, ctx.project.root
        )
        if not any(found.values()):
            details = {"run": run["id"], "counts": run["counts"], "runner": runner.name}
            weaker = None
            if state.get("start_unknown"):
                weaker = (
                    "Ithaca: verified by its own run, but the turn's start could not be read in"
                    " time (a first digest of a large project), so its changes to the test"
                    " runner's configuration and tests were not checked."
                )
            return _end(ctx, state, event_id, "verified", details, weaker, pending)
        told = judgement.describe(found)
        message = f"Ithaca: this turn ended UNVERIFIED: {told}."
        details = {"why": "weakened", "run": run["id"], **found}
        return _end(ctx, state, event_id, "unverified", details, message, pending=pending)
    if declared is not None:
        message = f"Ithaca: this turn ended UNVERIFIED, as the agent said: {declared}"
        return _end(ctx, state, event_id, "unverified", {"why": declared}, message, pending)
    if state["blocks"] >= _max_blocks(ctx):
        message = (
            f"Ithaca: this turn ended UNVERIFIED: no run of {runner.name} passed on the project"
            f" as it is now, and the critic stopped holding the turn after {state['blocks']}"
            " tries."
        )
        details = {"why": "block cap", "runner": runner.name}
        return _end(ctx, state, event_id, "unverified", details, message, pending)
    return _block(ctx, state, event_id, runner, run, why_not_run, pending, blobs)


def _until() -> float | None:
    """When the digest at Stop must be done: a second before the hook's deadline."""
    from time import monotonic

    from ithaca.kernel import deadline

    left = deadline.remaining()
    return None if left is None else monotonic() + left - 1.0


def _unread(ctx: GateContext, state: dict[str, Any], event_id: str) -> Opinion:
    """Hold a turn whose project could not be read in time (its digest goes on next time)."""
    if state["blocks"] >= _max_blocks(ctx):
        message = "Ithaca: this turn ended UNVERIFIED: the project could not be read in time."
        return _end(ctx, state, event_id, "unverified", {"why": "unread"}, message)
    state["blocks"] += 1
    reason = (
        "Ithaca's critic [VERIFICATION_REQUIRED]: Ithaca could not read the whole project"
        f" before the hook's deadline (a first digest of a large project); {TOOL_HINT}, which"
        " reads it without that limit."
    )
    payload = {"event": event_id, "verdict": "blocked", "why": "unread", "block": state["blocks"]}
    ctx.scratch[critic.NAME] = (state, "critic.verdict", payload, None)
    return Opinion("block", "VERIFICATION_REQUIRED", reason, gate=critic.NAME)


def _block(
    ctx: GateContext,
    state: dict[str, Any],
    event_id: str,
    runner: runners.Runner,
    run: dict[str, Any] | None,
    why_not_run: str,
    pending: dict[str, Any] | None,
    blobs: BlobStore,
) -> Opinion:
    state["blocks"] += 1
    if run is None:
        said = f"no run of the project as it is now exists ({why_not_run}): {TOOL_HINT}"
    else:
        counts = _counts(run)
        said = f"Ithaca's run of {runner.name} {run['status']} ({counts}): {run['reason']}"
        tail = (pending or {}).get("tail")
        if tail:
            said += f"\n{tail}"
        said += f"\nFix it, then {TOOL_HINT}"
    reason = (
        "Ithaca's critic [VERIFICATION_REQUIRED]: this turn changed the project, and no"
        f" passing verification by Ithaca covers it as it is now; {said}. If you cannot make"
        f" it pass, end your report with a line that starts `{critic.DECLARATION}` and says"
        " what is unverified and why."
    )
    own = (state.get("constraint") or {}).get("reason")
    if own:
        reason += f" {own}"
    payload = {
        "event": event_id,
        "verdict": "blocked",
        "runner": runner.name,
        "run": None if run is None else run["id"],
        "block": state["blocks"],
    }
    ctx.scratch[critic.NAME] = (state, "critic.verdict", payload, _keeper(ctx, pending))
    return Opinion("block", "VERIFICATION_REQUIRED", reason, gate=critic.NAME)


def _end(
    ctx: GateContext,
    state: dict[str, Any],
    event_id: str,
    verdict: str,
    details: dict[str, Any],
    message: str | None = None,
    pending: dict[str, Any] | None = None,
) -> Opinion:
    """Let the turn end with ``verdict``, journaled once per turn and verdict."""
    if state.get("verdict") != verdict or pending is not None:
        state["verdict"] = verdict
        payload = {"event": event_id, "verdict": verdict, **details}
        ctx.scratch[critic.NAME] = (state, "critic.verdict", payload, _keeper(ctx, pending))
    return Opinion("allow", system_message=message, gate=critic.NAME)


def _keeper(ctx: GateContext, pending: dict[str, Any] | None) -> Any:
    """What the critic's commit does first: record the run it made here, if any."""
    if pending is None:
        return None
    from ithaca.protocols.critic_run import keep

    return lambda conn, payload: keep(conn, payload, ctx, pending)


def _counts(run: dict[str, Any]) -> str:
    counts = run.get("counts")
    if not counts:
        return "tests not counted"
    return f"{counts['passed']} passed, {counts['failed']} failed of {counts['collected']}"


def _declared(message: object) -> str | None:
    """The reason of the agent's ``UNVERIFIED: …`` line, or None."""
    if not isinstance(message, str):
        return None
    for line in message.splitlines():
        text = line.strip().lstrip("*_ ")
        if text.startswith(critic.DECLARATION):
            reason = text[len(critic.DECLARATION) :].strip(" *_")
            if reason:
                return reason[:500]
    return None


def _max_blocks(ctx: GateContext) -> int:
    wanted = int(ctx.config["verification"]["max_blocks"])
    if ctx.host != "claude":
        return wanted
    import os

    from ithaca.ultragoal import hostcap

    assert ctx.project is not None
    cap = hostcap.stop_cap(ctx.project.root, os.environ)
    return wanted if cap == 0 else max(0, min(wanted, cap - 1))
