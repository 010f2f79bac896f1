"""``ithaca ulysses``: the Ulysses protocol from a terminal (docs/ulysses.md, "The session").

Each command is one operation of the ``ulysses`` tool, with dashes for underscores, over
the same ``UlyssesService`` and its checks, so a refusal carries the same code here as
over MCP. JSON-valued fields take JSON text (``--observed '{"errors": 0}'``, ``-`` reads
standard input). ``rollback`` is the user's alone: it asks a person at a terminal to type
the checkpoint's label before it touches anything, because it discards the worktree.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel import invalid_field, require_user
from ithaca.ulysses import NOTE_KINDS, TERMINAL_STATES, UlyssesService


@click.group("ulysses")
def group() -> None:
    """Surprise-gated debugging: plan, let a validator judge, reflect, complete."""


def _service(ctx: click.Context, as_json: bool) -> UlyssesService:
    return opened(ctx, as_json).ulysses


def _perform(
    ctx: click.Context,
    as_json: bool,
    call: Callable[[UlyssesService], dict[str, Any]],
    render: Callable[[dict[str, Any]], None],
) -> None:
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        answer = call(service)
    show(answer, as_json, lambda value: _render(value, render))


def _json_value(name: str, text: str) -> Any:
    """A JSON option's value; ``-`` reads it from standard input."""
    if text == "-":
        text = sys.stdin.read()
    try:
        return json.loads(text)
    except ValueError as exc:
        raise invalid_field(f"/{name}", "INVALID_JSON", f"--{name} is not JSON: {exc}") from exc


def _json_arguments(as_json: bool, **values: str | None) -> dict[str, Any]:
    with errors_to_exit(as_json):
        return {name: _json_value(name, text) for name, text in values.items() if text is not None}


# --- commands ---------------------------------------------------------------------------


@group.command("init")
@click.argument("problem")
@click.option("--constraint", "constraints", multiple=True, help="A constraint (repeatable).")
@click.option("--supersede", is_flag=True, help="Abandon the active session and start anew.")
@json_option
@click.pass_context
def init_command(
    ctx: click.Context, problem: str, constraints: tuple[str, ...], supersede: bool, as_json: bool
) -> None:
    """Start a session for PROBLEM (records the initial checkpoint)."""
    arguments = {"problem": problem, "constraints": list(constraints), "supersede": supersede}

    def render(answer: dict[str, Any]) -> None:
        out = console()
        if "superseded_session" in answer:
            out.print(f"Superseded session {answer['superseded_session']}.", markup=False)
        out.print(f"Checkpoint initial: {_checkpoint_text(answer['checkpoint'])}", markup=False)
        for lesson in answer["related_lessons"]:
            out.print(f"Related lesson: {lesson['title']} ({lesson['path']})", markup=False)

    _perform(ctx, as_json, lambda service: service.init(arguments), render)


@group.command("plan")
@click.option("--primary", required=True, help="The action you will take.")
@click.option("--recovery", required=True, help="What you will do if it surprises you.")
@click.option("--irreversible", is_flag=True, help="The primary action cannot be undone.")
@click.option(
    "--primary-validator",
    nargs=2,
    required=True,
    metavar="NOTEBOOK_ID CELL_ID",
    help="The cell that judges the primary action.",
)
@click.option(
    "--recovery-validator",
    nargs=2,
    required=True,
    metavar="NOTEBOOK_ID CELL_ID",
    help="The cell that judges the recovery action.",
)
@json_option
@click.pass_context
def plan_command(
    ctx: click.Context,
    primary: str,
    recovery: str,
    irreversible: bool,
    primary_validator: tuple[str, str],
    recovery_validator: tuple[str, str],
    as_json: bool,
) -> None:
    """Record the next step, pinning both validators."""
    arguments = {
        "primary": primary,
        "recovery": recovery,
        "irreversible": irreversible,
        "primaryValidator": _cell_ref(primary_validator),
        "recoveryValidator": _cell_ref(recovery_validator),
    }

    def render(answer: dict[str, Any]) -> None:
        step = answer["active_step"]
        console().print(f"Planned {step['step_id']}: {step['primary']}", markup=False)

    _perform(ctx, as_json, lambda service: service.plan(arguments), render)


@group.command("outcome")
@click.option("--observed", required=True, metavar="JSON", help="What you observed, as JSON.")
@click.option("--details", help="Free-form notes for the history.")
@json_option
@click.pass_context
def outcome_command(ctx: click.Context, observed: str, details: str | None, as_json: bool) -> None:
    """Let the open step's validator judge OBSERVED."""
    arguments = _json_arguments(as_json, observed=observed)
    if details is not None:
        arguments["details"] = details

    def render(answer: dict[str, Any]) -> None:
        validation = answer["validation"]
        console().print(
            f"{answer['assessment']}: {validation['reason']}"
            + (f" ({validation['cause']})" if validation["cause"] else ""),
            markup=False,
        )
        console().print(answer["message"], markup=False)

    _perform(ctx, as_json, lambda service: service.outcome(arguments), render)


@group.command("bind-final-validator")
@click.argument("notebook_id")
@click.argument("cell_id")
@click.option(
    "--observed",
    help="JSON: the problem as it stands, which a judge cell must fail on (default: the"
    " first failing outcome's).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="★ The user's: bind after the first outcome, or replace the bound validator.",
)
@json_option
@click.pass_context
def bind_final_validator_command(
    ctx: click.Context,
    notebook_id: str,
    cell_id: str,
    observed: str | None,
    replace: bool,
    as_json: bool,
) -> None:
    """Pin the cell that gates complete --resolved, once it is seen failing on the problem."""
    arguments: dict[str, Any] = {"notebookId": notebook_id, "cellId": cell_id}
    if observed is not None:
        arguments["observed"] = _json_value("--observed", observed)
    if replace:
        with errors_to_exit():
            require_user("bind the final validator", cell_id)

    def render(answer: dict[str, Any]) -> None:
        final = answer["finalValidator"]
        console().print(
            f"Final validator: {final['cellId']} v{final['cellVersion']}"
            f" ({final['snapshotHash'][:16]})",
            markup=False,
        )

    def bind(service: UlyssesService) -> dict[str, Any]:
        if replace:
            return service.replace_final_validator(arguments)
        return service.bind_final_validator(arguments)

    _perform(ctx, as_json, bind, render)


@group.command("reflect")
@click.option("--hypothesis", required=True, help="A falsifiable explanation.")
@click.option("--falsification", required=True, help="What observation would disprove it.")
@json_option
@click.pass_context
def reflect_command(ctx: click.Context, hypothesis: str, falsification: str, as_json: bool) -> None:
    """Record a hypothesis after both moves failed."""
    arguments = {"hypothesis": hypothesis, "falsification": falsification}

    def render(answer: dict[str, Any]) -> None:
        console().print(f"Hypothesis {answer['hypothesis_seq']} recorded.", markup=False)

    _perform(ctx, as_json, lambda service: service.reflect(arguments), render)


@group.command("note")
@click.argument("thought")
@click.option("--kind", type=click.Choice(NOTE_KINDS), help="observation unless given.")
@click.option("--data", metavar="JSON", help="Structured data, as JSON.")
@json_option
@click.pass_context
def note_command(
    ctx: click.Context, thought: str, kind: str | None, data: str | None, as_json: bool
) -> None:
    """Add a note to the session's trace (changes no state)."""
    arguments = {"thought": thought, **_json_arguments(as_json, data=data)}
    if kind is not None:
        arguments["kind"] = kind

    def render(answer: dict[str, Any]) -> None:
        console().print(f"Note {answer['note_seq']} recorded.", markup=False)

    _perform(ctx, as_json, lambda service: service.note(arguments), render)


@group.command("status")
@json_option
@click.pass_context
def status_command(ctx: click.Context, as_json: bool) -> None:
    """The active session, or the last closed one."""
    _perform(ctx, as_json, lambda service: service.status({}), _render_status)


@group.command("resume")
@click.option("--session-id", help="The session you expect to be active.")
@json_option
@click.pass_context
def resume_command(ctx: click.Context, session_id: str | None, as_json: bool) -> None:
    """The status plus the latest notes and history, to pick up the thread."""
    arguments = {} if session_id is None else {"session_id": session_id}

    def render(answer: dict[str, Any]) -> None:
        _render_status(answer)
        out = console()
        for event in answer["history"]:
            out.print(f"  #{event['seq']} {event['at']} {event['kind']}", markup=False)
        for note in answer["notes"]:
            out.print(f"  note {note['note_seq']} [{note['kind']}] {note['thought']}", markup=False)

    _perform(ctx, as_json, lambda service: service.resume(arguments), render)


@group.command("complete")
@click.argument("terminal_state", type=click.Choice(TERMINAL_STATES))
@click.option("--summary", help="The transferable lesson.")
@click.option("--observed", metavar="JSON", help="For resolved: what the final validator judges.")
@click.option("--missing", multiple=True, help="For insufficient_information (repeatable).")
@json_option
@click.pass_context
def complete_command(
    ctx: click.Context,
    terminal_state: str,
    summary: str | None,
    observed: str | None,
    missing: tuple[str, ...],
    as_json: bool,
) -> None:
    """Close the session (resolved is gated by the final validator)."""
    arguments: dict[str, Any] = {
        "terminalState": terminal_state,
        **_json_arguments(as_json, observed=observed),
    }
    if summary is not None:
        arguments["summary"] = summary
    if missing:
        arguments["missing"] = list(missing)

    def render(answer: dict[str, Any]) -> None:
        out = console()
        out.print(f"Session {answer['session_id']} closed: {answer['status']}.", markup=False)
        if "lesson" in answer:
            out.print(f"Lesson: {answer['lesson']['path']}", markup=False)

    _perform(ctx, as_json, lambda service: service.complete(arguments), render)


@group.command("rollback")
@click.argument("label")
@click.option("--session", "session_id", help="A session other than the active one.")
@click.pass_context
def rollback_command(ctx: click.Context, label: str, session_id: str | None) -> None:
    """★ Restore the worktree to checkpoint LABEL (discards current changes)."""
    with errors_to_exit():
        require_user(f"roll back to {label}", label)
    arguments = {"label": label}
    if session_id is not None:
        arguments["session_id"] = session_id

    def render(answer: dict[str, Any]) -> None:
        out = console()
        out.print(
            f"Rolled back to {answer['checkpoint']['label']}; the previous worktree is"
            f" {answer['pre_rollback']['label']}.",
            markup=False,
        )
        out.print(
            f"{len(answer['restored'])} restored, {len(answer['deleted'])} deleted.",
            markup=False,
        )
        for warning in answer["warnings"]:
            out.print(f"warning: {warning}", markup=False)

    _perform(ctx, False, lambda service: service.rollback(arguments), render)


# --- rendering --------------------------------------------------------------------------


def _cell_ref(pair: tuple[str, str]) -> dict[str, str]:
    return {"notebookId": pair[0], "cellId": pair[1]}


def _checkpoint_text(checkpoint: dict[str, Any]) -> str:
    head = checkpoint["git_head"]
    return f"HEAD {head[:12]}" if head else "no Git commit"


def _render(answer: dict[str, Any], specific: Callable[[dict[str, Any]], None]) -> None:
    """The operation's own lines, then where the session stands and any diagnostics."""
    specific(answer)
    out = console()
    if "phase" in answer:
        out.print(
            f"Session {answer['session_id']}: {answer['phase']} (S={answer['S']});"
            f" next: {answer['required_action']}.",
            markup=False,
        )
    for diagnostic in answer.get("diagnostics", []):
        out.print(f"note: {diagnostic['code']}: {diagnostic['message']}", markup=False)


def _render_status(answer: dict[str, Any]) -> None:
    out = console()
    if not answer["active"]:
        last = answer.get("last_session")
        if last is None:
            out.print("No Ulysses session.")
        else:
            out.print(
                f"No active session; last: {last['session_id']} ({last['status']}):"
                f" {last['problem']}",
                markup=False,
            )
        return
    out.print(f"Problem: {answer['problem']}", markup=False)
    step = answer["active_step"]
    if step is not None:
        out.print(f"Active step {step['step_id']}: {step['primary']}", markup=False)
    for move in answer["forbidden_moves"]:
        out.print(f"Forbidden: {move['text']} ({move['reason']})", markup=False)
    out.print(
        f"{answer['hypothesis_count']} hypotheses, {answer['checkpoint_count']} checkpoints.",
        markup=False,
    )
