"""The words Ultragoal's hooks put in front of the agent (docs/ultragoal.md, "In Claude Code").

Kept in one place so the texts read as a set: the continuation a blocked Stop hands back,
the pause, the background wait, the host-cap note, the error path, re-injection after a
capped or compacted turn, and the refusals of the review dispatch. The objective is the
user's text, so it is fenced as untrusted and cut to ``OBJECTIVE_CUT`` characters.
Standard library only: the hook process renders these.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

OBJECTIVE_CUT = 2000

RULES = (
    "Take the next concrete step now. Passing tests, a clean diff or a confident summary are "
    "proxy signals, not completion: only `ithaca ultragoal request-complete` completes the "
    "pursuit. To hand the turn to the user, end your message with <awaiting-user/>. If a real "
    "blocker leaves no actionable step, report it with `ithaca ultragoal set-blocked --reason`."
)
REVIEW_POINTER = (
    "Every story is approved: run the review lane (start the reviewer subagent, read "
    "get-review-result), then set-verdict and request-complete."
)
HOST_CAP_NOTE = (
    "(The host ends this turn after this many consecutive blocks; the pursuit resumes on "
    "the next turn.)"
)
WAIT = (
    "[ULTRAGOAL waiting] Background work you started is still running. Wait for it, then "
    "harvest its results before the next step. This wait does not count against the budget."
)


def continuation(row: dict[str, Any], story: dict[str, Any] | None) -> str:
    """Why a pursuing Stop is blocked: budget, objective, current story, the rules."""
    wall = f"{float(row['wall_used_s'] or 0) / 60:.0f}"
    limit = row["max_wall_minutes"]
    header = (
        f"[ULTRAGOAL {row['iteration']}/{row['max_iterations']} · wall {wall}/"
        f"{limit if limit is not None else '∞'} min]"
    )
    return "\n".join([header, fenced_objective(row["outcome"]), _story(story), RULES])


def fenced_objective(objective: object) -> str:
    return f"<untrusted_objective>{str(objective)[:OBJECTIVE_CUT]}</untrusted_objective>"


def limit(kind: str) -> str:
    """The one block that announces the pause (``kind``: iterations or wall_clock)."""
    return (
        f"[ULTRAGOAL paused: {kind.replace('_', '-')} budget spent] The pursuit is now "
        "budget_limited. Finish any in-flight work, dispatch nothing new, and ask the user to "
        "run `ithaca ultragoal resume-pursuit` in their own terminal to continue."
    )


def resumed(why: str, row: dict[str, Any], story: dict[str, Any] | None) -> str:
    return f"ULTRAGOAL RESUMED ({why}).\n" + continuation(row, story)


def active_pursuit_exists(phase: object, objective: object) -> str:
    return (
        f"ULTRAGOAL ACTIVE_PURSUIT_EXISTS phase={phase} objective={fenced_objective(objective)}"
        " — continue it (read `ithaca ultragoal get`) instead of starting a new one."
    )


def error_block(code: str) -> str:
    return f"Ithaca could not evaluate the ultragoal gate ({code}); keep pursuing."


def error_allow(count: int, code: str) -> str:
    return (
        f"ITHACA ULTRAGOAL GATE FAILED {count}× ({code}): stop allowed; the pursuit is NOT "
        "complete; run ithaca doctor"
    )


def not_reviewer(reviewer: str) -> str:
    return (
        f"Ultragoal: submit-review and review-ticket belong to the reviewer subagent "
        f"({reviewer}) that Ithaca's hook started; start it (Agent tool; Codex: spawn_agent)"
        " instead of calling them yourself. A review counts only when the hook sees the"
        " reviewer itself submit it."
    )


def claim_refused(claim: dict[str, Any]) -> str:
    """Why the hook refused to start the reviewer (a refused review-dispatch claim)."""
    reason = claim["reason"]
    if reason == "stories_pending":
        pending = ", ".join(claim.get("ids", []))
        return f"Ultragoal: approve every story before the code review (pending: {pending})."
    if reason == "completion_eligible":
        return (
            "Ultragoal: the current review already allows completion; run set-verdict "
            "and request-complete instead of another review."
        )
    if reason == "budget_exhausted":
        return (
            f"Ultragoal: the review dispatch budget is spent ({claim['used']}/{claim['cap']});"
            f" ask the user to run `{claim['renewal_command']}` in their own terminal."
        )
    if reason == "no_diff":
        return (
            "Ultragoal: Ithaca recorded no Git commit for this pursuit, so a review cannot be"
            " checked against the change and none is started. In a Git repository, set"
            " --phase planning and then pursuing again to record it."
        )
    return "Ultragoal: a review dispatch needs an active pursuing session."


def _story(story: dict[str, Any] | None) -> str:
    if story is None:
        return REVIEW_POINTER
    criteria = "; ".join(str(item) for item in story["acceptance_criteria"] or [])
    return (
        f"Current story {story['id']}: {story['story']}\n"
        f"Acceptance criteria: {criteria}\n"
        f"Verification surface: {story['verification_surface']}"
    )
