"""``ithaca session admission|acquire|heartbeat|close|reset-circuit``.

Each command builds the request the MCP ``session`` tool takes and runs it through the
same service, so a refusal carries the same code. The caller's host session comes from
``ITHACA_SESSION_ID``; a worker's execution session from ``ITHACA_DELIVERY_SESSION``,
which ``heartbeat`` and ``close`` use when no session is named. ``acquire`` prints the
session's reserved variables as ``export`` lines, so a shell can adopt the session.

Two operations are the user's, at a terminal with a typed confirmation: ``acquire
--force`` (take over a lease that is still alive, stopping its worker) and
``reset-circuit`` (admit a task that failed three times in a row again).
"""

from __future__ import annotations

import os
import shlex
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, fail, json_option, show
from ithaca.delivery import CLOSE_REASONS, SESSION_VARIABLE
from ithaca.kernel import IthacaError, ids, require_user


@click.group("session")
def group() -> None:
    """Execution sessions: one task, one lease, one worktree, one Worker Packet."""


@group.command("admission")
@click.argument("task_id")
@click.option("--session-id", help="The running session you mean to resume.")
@click.option("--no-worktree", is_flag=True, help="Judge an acquire without a worktree.")
@json_option
@click.pass_context
def admission(
    ctx: click.Context, task_id: str, session_id: str | None, no_worktree: bool, as_json: bool
) -> None:
    """Say whether to spawn, resume, take over or abandon TASK_ID (reads only)."""
    request: dict[str, Any] = {"operation": "admission", "task_id": task_id}
    if session_id:
        request["session_id"] = session_id
    if no_worktree:
        request["worktree"] = "none"
    show(_run(ctx, request, as_json), as_json, _render_admission)


@group.command("acquire")
@click.argument("task_id")
@click.option(
    "--strategy",
    type=click.Choice(["spawn", "resume", "takeover"]),
    required=True,
    help="The verdict admission gave.",
)
@click.option("--session-id", help="The running session you resume.")
@click.option("--runtime", help="What works in the session (claude, codex, …).")
@click.option("--no-worktree", is_flag=True, help="Work in the main checkout.")
@click.option("--force", is_flag=True, help="User only: take over a lease that is alive.")
@click.option("--key", help="Idempotency key (made up and printed when omitted).")
@json_option
@click.pass_context
def acquire(
    ctx: click.Context,
    task_id: str,
    strategy: str,
    session_id: str | None,
    runtime: str | None,
    no_worktree: bool,
    force: bool,
    key: str | None,
    as_json: bool,
) -> None:
    """Acquire TASK_ID with the admitted strategy: lease, worktree, Worker Packet."""
    request: dict[str, Any] = {
        "operation": "acquire",
        "task_id": task_id,
        "strategy": strategy,
        "idempotency_key": _key(key),
    }
    if session_id:
        request["session_id"] = session_id
    if runtime:
        request["runtime"] = runtime
    if no_worktree:
        request["worktree"] = "none"
    if force:
        if strategy != "takeover":
            raise click.UsageError("--force goes with --strategy takeover")
        with errors_to_exit(as_json):
            require_user(f"take over the session working on {task_id}", task_id)
    show(_run(ctx, request, as_json, force=force), as_json, _render_acquired)


@group.command("heartbeat")
@click.argument("session_id", required=False)
@json_option
@click.pass_context
def heartbeat(ctx: click.Context, session_id: str | None, as_json: bool) -> None:
    """Renew SESSION_ID's lease (default: $ITHACA_DELIVERY_SESSION)."""
    request = {"operation": "heartbeat", "session_id": _session(session_id)}
    show(_run(ctx, request, as_json), as_json, _render_session)


@group.command("close")
@click.argument("session_id", required=False)
@click.option("--reason", type=click.Choice(list(CLOSE_REASONS)))
@click.option("--remove-worktree", is_flag=True, help="Remove it if clean and merged.")
@click.option("--key", help="Idempotency key (made up and printed when omitted).")
@json_option
@click.pass_context
def close(
    ctx: click.Context,
    session_id: str | None,
    reason: str | None,
    remove_worktree: bool,
    key: str | None,
    as_json: bool,
) -> None:
    """End SESSION_ID (default: $ITHACA_DELIVERY_SESSION)."""
    request: dict[str, Any] = {
        "operation": "close",
        "session_id": _session(session_id),
        "idempotency_key": _key(key),
    }
    if reason:
        request["reason"] = reason
    if remove_worktree:
        request["remove_worktree"] = True
    show(_run(ctx, request, as_json), as_json, _render_closed)


@group.command("reset-circuit")
@click.argument("task_id")
@json_option
@click.pass_context
def reset_circuit(ctx: click.Context, task_id: str, as_json: bool) -> None:
    """User only: close TASK_ID's circuit breaker so it may run again."""
    with errors_to_exit(as_json):
        require_user(f"reset the circuit of task {task_id}", task_id)
    project = opened(ctx, as_json)
    with errors_to_exit(as_json):
        answer = project.delivery.reset_circuit(task_id)
    show(answer, as_json, _render_reset)


def _run(
    ctx: click.Context, request: dict[str, Any], as_json: bool, *, force: bool = False
) -> dict[str, Any]:
    project = opened(ctx, as_json)
    try:
        answer = project.delivery.session(request, force=force)
    except IthacaError as exc:
        fail(exc, as_json)
    return answer


def _key(given: str | None) -> str:
    if given is not None:
        return given
    made = f"cli-{ids.ulid()}"
    click.echo(f"idempotency key: {made}", err=True)
    return made


def _session(given: str | None) -> str:
    found = given or os.environ.get(SESSION_VARIABLE)
    if not found:
        raise click.UsageError(f"name a session, or set {SESSION_VARIABLE}")
    return found


# --- rendering -----------------------------------------------------------------------


def _render_admission(answer: dict[str, Any]) -> None:
    out = console()
    out.print(f"verdict: {answer['verdict']}", markup=False)
    if "session" in answer:
        _print_session(answer["session"])
    for blocker in answer["blockers"]:
        out.print(f"  blocked {blocker['code']}: {blocker['message']}", markup=False)
    _print_notes(answer["diagnostics"])


def _render_acquired(answer: dict[str, Any]) -> None:
    out = console()
    done = "replayed" if answer.get("replayed") else answer["verdict"]
    out.print(f"{done}: session {answer['session']['id']}", markup=False)
    _print_session(answer["session"])
    out.print(f"  packet {answer['packet']['id']} ({answer['packet']['path']})", markup=False)
    for name, value in answer["env"].items():
        out.print(f"export {name}={shlex.quote(value)}", markup=False)
    _print_notes(answer["diagnostics"])


def _render_session(answer: dict[str, Any]) -> None:
    _print_session(answer["session"])


def _render_closed(answer: dict[str, Any]) -> None:
    out = console()
    session = answer["session"]
    out.print(f"{session['id']}: {session['status']}", markup=False)
    out.print(f"  task {answer['task']['id']}: {answer['task']['status']}", markup=False)
    if answer["circuit"]["open"]:
        out.print("  circuit open: the task will not be admitted again", markup=False)
    worktree = answer["worktree"]
    if worktree is not None:
        state = "removed" if worktree["removed"] else f"kept ({worktree.get('preserved')})"
        out.print(f"  worktree {state}: {worktree['path']}", markup=False)
    _print_notes(answer["diagnostics"])


def _render_reset(answer: dict[str, Any]) -> None:
    done = "reset" if answer["reset"] else "already closed"
    console().print(f"circuit of task {answer['task_id']}: {done}", markup=False)


def _print_session(found: dict[str, Any]) -> None:
    out = console()
    out.print(
        f"  {found['id']} {found['status']} task {found['task_id']}"
        f" lease until {found['lease_expires_at']} (epoch {found['lease_epoch']})",
        markup=False,
    )
    if found["worktree"]:
        out.print(f"  worktree {found['worktree']} on {found['branch']}", markup=False)


def _print_notes(notes: list[dict[str, Any]]) -> None:
    out = console()
    for note in notes:
        about = f" [{note['subject']}]" if "subject" in note else ""
        out.print(f"  {note['severity']} {note['code']}{about}: {note['message']}", markup=False)
