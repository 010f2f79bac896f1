"""``ithaca ultragoal``: the seed's state CLI over the ultragoal service
(docs/ultragoal.md, "Operations").

Each subcommand is one operation with the seed's name and flags, so the skill text runs
unchanged with ``ithaca ultragoal`` for its script. ``--session`` is accepted on the group
and on every subcommand. JSON-valued input goes through ``--data`` (or a flag of its own,
such as ``--observed``), inline or ``-`` for standard input (no command reads two); lists
such as ``--completion-evidence`` are comma-separated. Every subcommand prints text, or
JSON with ``--json``; a refusal is ``error CODE: …`` on standard error.

The commands marked ★ are the user's levers: they run only once the user has confirmed
them at their terminal (``ithaca.cli.ultragoal_consent``).
"""

from __future__ import annotations

import sys
from typing import Any

import click

from ithaca.cli.output import emit_json, errors_to_exit, render_tree, show
from ithaca.cli.ultragoal_calls import (
    call,
    comma_list,
    json_flag,
    present,
    remember_json,
    wants_json,
    write,
)
from ithaca.cli.ultragoal_consent import at_terminal, budget_effect, run_as_user
from ithaca.kernel import invalid_field
from ithaca.ultragoal import CLASSES

session_option = click.option(
    "--session", "session", help="The host session (default: resolved from the environment)."
)
read_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group("ultragoal")
@session_option
@click.pass_context
def group(ctx: click.Context, session: str | None) -> None:
    """Objective pursuit over confirmed stories that never false-completes."""
    ctx.ensure_object(dict)
    ctx.obj["ultragoal_session"] = session


# --- reads ------------------------------------------------------------------------------


@group.command("get")
@session_option
@read_json_option
@click.pass_context
def get_command(ctx: click.Context, session: str | None, as_json: bool) -> None:
    """The active pursuit's state (none when there is no pursuit)."""
    show(call(ctx, "get", session, {}, as_json=as_json)["state"], as_json, render_tree)


@group.command("status")
@session_option
@read_json_option
@click.pass_context
def status_command(ctx: click.Context, session: str | None, as_json: bool) -> None:
    """The phase token (or absent); --json for everything a gate reads."""
    answer = call(ctx, "status", session, {}, as_json=as_json)
    if as_json:
        emit_json(answer)
    else:
        click.echo(answer["status"])


@group.command("get-review-result")
@session_option
@read_json_option
@click.pass_context
def get_review_result_command(ctx: click.Context, session: str | None, as_json: bool) -> None:
    """The code-review result the reducer derives from the current artifact."""
    show(call(ctx, "get_review_result", session, {}, as_json=as_json), as_json, render_tree)


@group.command("serialize-review-context")
@session_option
@read_json_option
@click.pass_context
def serialize_review_context_command(
    ctx: click.Context, session: str | None, as_json: bool
) -> None:
    """The five fields the reviewer receives."""
    answer = call(ctx, "serialize_review_context", session, {}, as_json=as_json)
    show(answer, as_json, render_tree)


@group.command("serialize-requirements")
@session_option
@read_json_option
@click.pass_context
def serialize_requirements_command(ctx: click.Context, session: str | None, as_json: bool) -> None:
    """One requirement line per confirmed story."""
    text = call(ctx, "serialize_requirements", session, {}, as_json=as_json)["requirements"]
    if as_json:
        emit_json(text)
    elif text:
        click.echo(text)


@group.command("list-others")
@session_option
@read_json_option
@click.pass_context
def list_others_command(ctx: click.Context, session: str | None, as_json: bool) -> None:
    """Other sessions' live pursuits, to continue one with adopt."""
    others = call(ctx, "list_others", session, {}, as_json=as_json)["others"]
    if as_json:
        emit_json(others)
        return
    for other in others:
        click.echo(
            f"{other['short']}\t{other['sid']}\t{other['purpose']}\t{other['started_at']}"
            f"\t{other['idle_seconds']}s"
        )


# --- planning and stories ---------------------------------------------------------------


@group.command("set")
@session_option
@click.option("--phase", required=True, help="planning or pursuing.")
@click.option("--outcome")
@click.option("--verification-surface")
@click.option("--constraints")
@click.option("--boundaries")
@click.option("--non-goals", help="'- <non-goal> | decider: <who>' lines.")
@click.option("--max-iterations", type=click.IntRange(min=1))
@click.option("--max-wall-minutes", type=click.IntRange(min=1))
@click.option("--blocked-stop")
@click.option("--plan-path")
@click.option("--resume-summary")
@click.option("--completion-evidence", metavar="P1,P2", help="Evidence paths (pursuing).")
@click.option("--codex-goal-objective", metavar="TEXT|-", help="'-' reads standard input.")
@click.pass_context
def set_command(ctx: click.Context, session: str | None, **flags: Any) -> None:
    """Seed or advance the phase, carrying the slot values."""
    fields = present(flags)
    if "completion_evidence" in fields:
        fields["completion_evidence"] = comma_list(fields["completion_evidence"])
    if fields.get("codex_goal_objective") == "-":
        text = sys.stdin.read()
        fields["codex_goal_objective"] = text[:-1] if text.endswith("\n") else text
    raises_budget = "max_iterations" in fields or "max_wall_minutes" in fields
    if raises_budget and at_terminal():
        run_as_user(
            ctx, "set", session, fields, "change the pursuit's budget", budget_effect(fields)
        )
        return
    show(call(ctx, "set", session, fields), wants_json(ctx), render_tree)


@group.command("set-stories")
@session_option
@click.option("--data", "stories", metavar="JSON|-", help="The story array.")
@click.option("--single", is_flag=True, help="Derive and confirm the one story.")
@click.pass_context
def set_stories_command(
    ctx: click.Context, session: str | None, stories: str | None, single: bool
) -> None:
    """Replace the story set (planning)."""
    value = json_flag("data", stories)
    write(ctx, "set_stories", session, stories=value, single=single or None)


@group.command("reorder-stories")
@session_option
@click.option("--order", required=True, metavar="ID1,ID2")
@click.pass_context
def reorder_stories_command(ctx: click.Context, session: str | None, order: str) -> None:
    """Reorder the stories to an exact permutation of their ids (planning)."""
    write(ctx, "reorder_stories", session, order=[part.strip() for part in order.split(",")])


def _confirm(ctx: click.Context, operation: str, session: str | None, **fields: Any) -> None:
    if at_terminal():
        run_as_user(ctx, operation, session, fields, "confirm stories", "confirm the stories")
    else:
        write(ctx, operation, session, **fields)


@group.command("confirm-story")
@session_option
@click.argument("story_id")
@click.pass_context
def confirm_story_command(ctx: click.Context, session: str | None, story_id: str) -> None:
    """Approve one story."""
    _confirm(ctx, "confirm_story", session, id=story_id)


@group.command("confirm-all-stories")
@session_option
@click.pass_context
def confirm_all_stories_command(ctx: click.Context, session: str | None) -> None:
    """Approve every unconfirmed story in one step."""
    _confirm(ctx, "confirm_all_stories", session)


_evidence_text = click.option("--evidence", help="What shows the story set must change.")
_rationale = click.option("--rationale", help="Why this change.")


@group.command("add-story")
@session_option
@click.option("--data", "story", required=True, metavar="JSON|-")
@_evidence_text
@_rationale
@click.pass_context
def add_story_command(
    ctx: click.Context, session: str | None, story: str, evidence: str, rationale: str
) -> None:
    """Append a story (unconfirmed)."""
    value = json_flag("data", story)
    write(ctx, "add_story", session, story=value, evidence=evidence, rationale=rationale)


@group.command("revise-story")
@session_option
@click.argument("story_id")
@click.option("--data", "patch", required=True, metavar="JSON|-")
@_evidence_text
@_rationale
@click.pass_context
def revise_story_command(
    ctx: click.Context,
    session: str | None,
    story_id: str,
    patch: str,
    evidence: str,
    rationale: str,
) -> None:
    """Patch a story; it returns to unconfirmed."""
    value = json_flag("data", patch)
    write(
        ctx,
        "revise_story",
        session,
        id=story_id,
        patch=value,
        evidence=evidence,
        rationale=rationale,
    )


@group.command("retire-story")
@session_option
@click.argument("story_id")
@_evidence_text
@_rationale
@click.pass_context
def retire_story_command(
    ctx: click.Context, session: str | None, story_id: str, evidence: str, rationale: str
) -> None:
    """Retire a story."""
    write(ctx, "retire_story", session, id=story_id, evidence=evidence, rationale=rationale)


@group.command("split-story")
@session_option
@click.argument("story_id")
@click.option("--data", "replacements", required=True, metavar="JSON|-")
@_evidence_text
@_rationale
@click.pass_context
def split_story_command(
    ctx: click.Context,
    session: str | None,
    story_id: str,
    replacements: str,
    evidence: str,
    rationale: str,
) -> None:
    """Retire a story in favour of two or more replacements."""
    value = json_flag("data", replacements)
    write(
        ctx,
        "split_story",
        session,
        id=story_id,
        replacements=value,
        evidence=evidence,
        rationale=rationale,
    )


@group.command("run-story-validator")
@session_option
@click.argument("story_id")
@click.option("--observed", metavar="JSON|-")
@click.pass_context
def run_story_validator_command(
    ctx: click.Context, session: str | None, story_id: str, observed: str | None
) -> None:
    """Run a story's bound validator on OBSERVED (default null)."""
    fields: dict[str, Any] = {"id": story_id}
    if observed is not None:
        fields["observed"] = json_flag("observed", observed)
    show(call(ctx, "run_story_validator", session, fields), wants_json(ctx), render_tree)


# --- objective lane and completion ------------------------------------------------------


@group.command("record-story-verdict")
@session_option
@click.option("--data", "verdict", required=True, metavar="JSON|-")
@click.pass_context
def record_story_verdict_command(ctx: click.Context, session: str | None, verdict: str) -> None:
    """Record {id, verdict, evidence_refs, verifier} for a story."""
    value = json_flag("data", verdict)
    with errors_to_exit(wants_json(ctx)):
        if not isinstance(value, dict):
            raise invalid_field("/data", "WRONG_TYPE", "--data must be a JSON object")
        for reserved in ("operation", "session"):
            if reserved in value:
                raise invalid_field(f"/{reserved}", "UNKNOWN_FIELD", f"{reserved} is not a field")
    show(call(ctx, "record_story_verdict", session, value), wants_json(ctx), render_tree)


@group.command("set-verdict")
@session_option
@click.option(
    "--verdict",
    required=True,
    type=click.Choice(["APPROVE", "REQUEST_CHANGES", "COMMENT", "absent"]),
)
@click.pass_context
def set_verdict_command(ctx: click.Context, session: str | None, verdict: str) -> None:
    """Write objective_verdict (from planning, first enters pursuit)."""
    write(ctx, "set_verdict", session, verdict=verdict)


@group.command("request-complete")
@session_option
@click.option("--codex-goal-json", metavar="-|JSON|PATH", help="A get_goal snapshot.")
@click.pass_context
def request_complete_command(
    ctx: click.Context, session: str | None, codex_goal_json: str | None
) -> None:
    """The only path to complete: every gate is checked."""
    snapshot = codex_goal_json
    if snapshot == "-":
        snapshot = sys.stdin.read()
    write(ctx, "request_complete", session, codex_goal_json=snapshot)


@group.command("set-blocked")
@session_option
@click.option("--reason", required=True)
@click.pass_context
def set_blocked_command(ctx: click.Context, session: str | None, reason: str) -> None:
    """Report a real blocker (stops the loop; the user resumes)."""
    write(ctx, "set_blocked", session, reason=reason)


@group.command("adopt")
@session_option
@click.option("--src", required=True, help="The session whose pursuit to continue.")
@click.pass_context
def adopt_command(ctx: click.Context, session: str | None, src: str) -> None:
    """Continue another session's live pursuit (the user's explicit choice)."""
    write(ctx, "adopt", session, src=src)


# --- review lane ------------------------------------------------------------------------


@group.command("claim-review-dispatch")
@session_option
@click.pass_context
def claim_review_dispatch_command(ctx: click.Context, session: str | None) -> None:
    """Hook only: the PreToolUse hook claims dispatches in-process."""
    write(ctx, "claim_review_dispatch", session)


@group.command("review-ticket")
@session_option
@click.pass_context
def review_ticket_command(ctx: click.Context, session: str | None) -> None:
    """Reviewer: the oldest claimed dispatch and its nonce (a label; it authorises nothing)."""
    write(ctx, "review_ticket", session)


@group.command("submit-review")
@session_option
@click.option("--nonce", default=None, help="Optional: the dispatch's nonce, checked if given.")
@click.option("--data", "artifact", required=True, metavar="JSON|-")
@click.pass_context
def submit_review_command(
    ctx: click.Context, session: str | None, nonce: str | None, artifact: str
) -> None:
    """Reviewer subagent: store the review artifact under the open dispatch. Accepted only
    when Ithaca's hook saw the reviewer run this very command with the artifact on it."""
    value = json_flag("data", artifact)
    write(ctx, "submit_review", session, nonce=nonce, artifact=value)


@group.command("record-comment-resolution")
@session_option
@click.option("--artifact-sha256", required=True)
@click.option("--evidence", required=True, metavar="P1,P2")
@click.pass_context
def record_comment_resolution_command(
    ctx: click.Context, session: str | None, artifact_sha256: str, evidence: str
) -> None:
    """Bind hash-checked evidence to the MEDIUM repairs of a COMMENT review."""
    write(
        ctx,
        "record_comment_resolution",
        session,
        artifact_sha256=artifact_sha256,
        evidence=comma_list(evidence),
    )


# --- the user's levers ------------------------------------------------------------------


@group.command("approve-review-dispatch-renewal")
@session_option
@click.pass_context
def approve_review_dispatch_renewal_command(ctx: click.Context, session: str | None) -> None:
    """★ Add 5 review dispatches (the user's)."""
    run_as_user(
        ctx,
        "approve_review_dispatch_renewal",
        session,
        {},
        "renew the review-dispatch budget",
        "add exactly 5 to the review-dispatch cap and approve the current artifact's hash",
    )


@group.command("dismiss-review-finding")
@session_option
@click.option("--ref", required=True, metavar="FILE:LINE")
@click.option("--class", "finding_class", required=True, type=click.Choice(CLASSES))
@click.option("--rationale", required=True)
@click.pass_context
def dismiss_review_finding_command(
    ctx: click.Context, session: str | None, ref: str, finding_class: str, rationale: str
) -> None:
    """★ Remove one wrong admitted finding from the completion gate (the user's)."""
    run_as_user(
        ctx,
        "dismiss_review_finding",
        session,
        {"ref": ref, "class": finding_class, "rationale": rationale},
        "dismiss a review finding",
        f"dismiss the {finding_class} finding at {ref} for the current review artifact",
    )


@group.command("resume-pursuit")
@session_option
@click.option("--max-iterations", type=click.IntRange(min=1))
@click.option("--max-wall-minutes", type=click.IntRange(min=1))
@click.pass_context
def resume_pursuit_command(ctx: click.Context, session: str | None, **budgets: Any) -> None:
    """★ Resume a budget-limited pursuit (the user's)."""
    fields = present(budgets)
    effect = "set the pursuit pursuing again with iteration 0" + (
        f"; {budget_effect(fields)}" if fields else ""
    )
    run_as_user(ctx, "resume_pursuit", session, fields, "resume the pursuit", effect)


@group.command("set-budget-limited")
@session_option
@click.pass_context
def set_budget_limited_command(ctx: click.Context, session: str | None) -> None:
    """★ Pause the pursuit as budget_limited (the user's; the Stop gate does it too)."""
    run_as_user(
        ctx, "set_budget_limited", session, {}, "pause the pursuit", "pause it as budget_limited"
    )


# Every subcommand prints JSON with --json; the reads above declare it themselves.
for _command in group.commands.values():
    if not any(param.name == "as_json" for param in _command.params):
        _command.params.append(
            click.Option(
                ["--json", "as_json"],
                is_flag=True,
                expose_value=False,
                callback=remember_json,
                help="Print JSON instead of text.",
            )
        )
