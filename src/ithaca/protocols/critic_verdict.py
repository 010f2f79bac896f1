"""The critic's verdict at Stop: may a turn that changed the project end?

It may when the working tree is the one it started from, or the one a verification
passed on, or when the agent ended honestly with ``UNVERIFIED: <why>``; else the turn is
held with the exact command to run (on Codex, which reports no outcomes, the critic first
runs it itself), at most ``verification.max_blocks`` times. ``ithaca.protocols.critic``
follows the turn and loads this module only for a Stop after a change. Standard library
and the kernel only.
"""

from __future__ import annotations

from ithaca.kernel import worktree
from ithaca.kernel.gates import GateContext, Opinion
from ithaca.protocols import critic

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def verdict(ctx: GateContext, event_id: str, state: dict[str, Any]) -> Opinion:
    """Whether the turn ``event_id``, which changed the project, may end (``state`` is the
    critic's for the turn, changed in place for the critic's commit)."""

    assert ctx.project is not None
    tree = worktree.fingerprint(ctx.project.root)
    commands = critic.commands(ctx, state)
    command = commands[0] if commands else None
    if tree is not None and tree == state["turn_tree"]:
        return _end(ctx, state, event_id, "unchanged", {})
    verified = tree == state["green_tree"] if tree is not None else not state["dirty"]
    if verified:
        return _end(ctx, state, event_id, "verified", {"command": command})
    declared = _declared(ctx.payload.get("last_assistant_message"))
    if declared is not None:
        message = f"Ithaca: this turn ended UNVERIFIED, as the agent said: {declared}"
        return _end(ctx, state, event_id, "unverified", {"why": declared}, message)
    if command is None:
        message = (
            "Ithaca: this turn changed the project, but no verification command is known:"
            " set [verification] commands in .ithaca/config.toml. It ended UNVERIFIED."
        )
        return _end(ctx, state, event_id, "unverified", {"why": "no command"}, message)
    if state["blocks"] >= _max_blocks(ctx):
        message = (
            f"Ithaca: this turn ended UNVERIFIED: `{command}` did not pass after the last"
            f" change, and the critic stopped holding the turn after {state['blocks']} tries."
        )
        details = {"why": "block cap", "command": command}
        return _end(ctx, state, event_id, "unverified", details, message)
    detail = ""
    if ctx.host not in critic.OUTCOME_HOSTS:
        from ithaca.protocols.critic_run import run_verification

        passed, detail = run_verification(ctx, command)
        if passed:
            state.update(green_tree=tree, dirty=False)
            details = {"command": command, "measured": "ithaca"}
            return _end(ctx, state, event_id, "verified", details)
    return _block(ctx, state, event_id, command, detail)


def _block(
    ctx: GateContext, state: dict[str, Any], event_id: str, command: str, detail: str
) -> Opinion:
    state["blocks"] += 1
    reason = (
        f"Ithaca's critic [VERIFICATION_REQUIRED]: this turn changed the project after its"
        f" last passing verification. Run `{command}` on its own (not in a pipeline or a"
        " list) and make it pass before you stop, or,"
        f" if you cannot, end your report with a line `{critic.DECLARATION} <what is unverified"
        " and why>`."
    )
    own = (state.get("constraint") or {}).get("reason")
    if own:
        reason += f" {own}"
    if detail:
        reason += f"\nIthaca ran `{command}` itself and it failed:\n{detail}"
    payload = {
        "event": event_id,
        "verdict": "blocked",
        "command": command,
        "block": state["blocks"],
    }
    ctx.scratch[critic.NAME] = (state, "critic.verdict", payload)
    return Opinion("block", "VERIFICATION_REQUIRED", reason, gate=critic.NAME)


def _end(
    ctx: GateContext,
    state: dict[str, Any],
    event_id: str,
    verdict: str,
    details: dict[str, Any],
    message: str | None = None,
) -> Opinion:
    """Let the turn end with ``verdict``, journaled once per turn and verdict."""
    if state.get("verdict") != verdict:
        state["verdict"] = verdict
        payload = {"event": event_id, "verdict": verdict, **details}
        ctx.scratch[critic.NAME] = (state, "critic.verdict", payload)
    return Opinion("allow", system_message=message, gate=critic.NAME)


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
