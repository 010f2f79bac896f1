"""The user's consent for an ``ithaca ultragoal`` lever.

The budget levers, the review-budget renewal and finding dismissal are the user's: they
show the session, the objective and the exact effect, then need an interactive terminal
without a coding agent's environment and the typed session token (the kernel's
``require_user``). Its refusal reasons map to the reference's codes: ``no_terminal`` →
``AUTHORITY_USER_ONLY``, ``agent_environment`` → ``AUTHORITY_AGENT_ENVIRONMENT``,
``confirmation_mismatch`` → ``USER_CONFIRMATION_MISMATCH``. Story confirmations and budget
raises are the user's when a person runs them at a terminal, otherwise the agent's
relayed call, which the service allows only where the reference does.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from ithaca.cli.output import console, errors_to_exit, render_tree, show
from ithaca.cli.ultragoal_calls import call, chosen_session, present, wants_json
from ithaca.kernel import AGENT_ENVIRONMENT, Refused, require_user

USER_ONLY_CODES = {
    "no_terminal": "AUTHORITY_USER_ONLY",
    "agent_environment": "AUTHORITY_AGENT_ENVIRONMENT",
    "confirmation_mismatch": "USER_CONFIRMATION_MISMATCH",
}


def at_terminal() -> bool:
    """Whether a person seems to be running this command (the confirmation decides)."""
    return (
        sys.stdin.isatty()
        and sys.stdout.isatty()
        and not any(os.environ.get(name) for name in AGENT_ENVIRONMENT)
    )


def _confirm_as_user(ctx: click.Context, session: str | None, action: str, effect: str) -> None:
    """Show what the user is about to allow, then require their typed confirmation."""
    status = call(ctx, "status", session, {}, as_json=False)
    state = status["state"] or {}
    session_id = (state.get("ithaca") or {}).get("session_id") or chosen_session(ctx, session) or ""
    token = session_id[:8] or "ultragoal"
    out = console()
    out.print(f"Session:   {session_id or '(none)'}", markup=False)
    out.print(f"Objective: {state.get('outcome') or '(none)'}", markup=False)
    out.print(f"Phase:     {status['status']}", markup=False)
    out.print(f"Effect:    {effect}", markup=False)
    with errors_to_exit():
        try:
            require_user(action, token)
        except Refused as exc:
            reason = exc.details.get("reason", "")
            raise Refused(
                USER_ONLY_CODES.get(reason, "AUTHORITY_USER_ONLY"),
                exc.message,
                {**exc.details, "kernel_code": exc.code},
            ) from exc


def run_as_user(
    ctx: click.Context,
    operation: str,
    session: str | None,
    fields: dict[str, Any],
    action: str,
    effect: str,
) -> None:
    """Once the user confirmed, perform ``operation`` as the user and print the answer."""
    _confirm_as_user(ctx, session, action, effect)
    answer = call(ctx, operation, session, present(fields), actor="user")
    show(answer, wants_json(ctx), render_tree)


def budget_effect(fields: dict[str, Any]) -> str:
    """The budget change ``fields`` make, in words."""
    parts = [
        f"{name.replace('_', ' ')} = {fields[name]}"
        for name in ("max_iterations", "max_wall_minutes")
        if name in fields
    ]
    return "set " + ", ".join(parts) if parts else "change the pursuit's slots"
