"""Who may run which Ultragoal operation, and the shell-line check that applies it.

The service refuses an operation the caller may not run, but it judges the caller by its
terminal: a host that hands the agent a pseudo-terminal would pass as the user. So the
PreToolUse hook also reads the agent's shell line (docs/ultragoal.md, "The Bash guard") and denies,
before anything runs, what the current state reserves for the user or the hook, and any
write aimed at another session's pursuit. Operations that are the user's in every state
(``resume-pursuit``…) are denied earlier by the kernel guard, with every other part's
user-only commands; lines that hide which command they run are the kernel's too.

Imports only the standard library and the kernel: it runs inside the hook process.
"""

from __future__ import annotations

from ithaca.kernel.authority import command_words
from ithaca.kernel.call import DECLARATIONS, command_text
from ithaca.kernel.gates import ABSTAIN, Opinion

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.call import Call, SimpleCommand
    from ithaca.kernel.gates import GateContext

READ_OPERATIONS = frozenset(
    {
        "get",
        "status",
        "get_review_result",
        "serialize_review_context",
        "serialize_requirements",
        "list_others",
    }
)
USER_OPERATIONS = frozenset(
    {
        "approve_review_dispatch_renewal",
        "dismiss_review_finding",
        "resume_pursuit",
        "set_budget_limited",
    }
)
HOOK_OPERATIONS = frozenset({"claim_review_dispatch"})
REVIEWER_OPERATIONS = frozenset({"submit_review", "review_ticket"})
CONFIRMATIONS = frozenset({"confirm_story", "confirm_all_stories"})
BUDGET_OPTIONS = ("--max-iterations", "--max-wall-minutes")  # in the row's column order
SESSION_VARIABLE = "ITHACA_SESSION_ID"


def tool_opinion(call: Call, ctx: GateContext) -> Opinion:
    """PreToolUse for a shell line or an ``ultragoal`` MCP call: a deny, or abstain."""
    if call.commands or call.unparseable:
        return shell_opinion(call, ctx)
    if call.tool_input.get("operation") in REVIEWER_OPERATIONS:
        return _reviewer_only(ctx, call)
    return ABSTAIN


def shell_opinion(call: Call, ctx: GateContext) -> Opinion:
    """The Bash guard's answer for one shell line: a deny, or abstain."""
    if call.unparseable:
        if "ultragoal" in command_text(call):
            return _deny(
                "AUTHORITY_UNVERIFIABLE_COMMAND",
                "this line names ultragoal but its program is left to the shell, so Ithaca"
                " cannot verify which command runs. Spell `ithaca ultragoal …` out literally.",
            )
        return ABSTAIN
    from ithaca.kernel.shell_commands import ithaca_invocation

    line_session: str | None = None
    for command in call.commands:
        line_session = _declared_session(command, line_session)
        argv = ithaca_invocation(command)
        words = command_words(argv) if argv is not None else []
        if argv is None or words[:1] != ["ultragoal"]:
            continue
        operation = words[1].replace("-", "_") if len(words) > 1 else ""
        spelled = "ithaca ultragoal " + operation.replace("_", "-")
        if operation in HOOK_OPERATIONS:
            return _deny(
                "AUTHORITY_HOOK_ONLY",
                f"`{spelled}` is run by Ithaca's hook when you start the reviewer subagent;"
                " start the reviewer subagent instead.",
            )
        refused = _reviewer_only(ctx, call) if operation in REVIEWER_OPERATIONS else ABSTAIN
        if refused.effect == "deny":
            return refused
        why = _reserved_for_user(operation, argv, ctx)
        if why is not None:
            return _deny(
                "AUTHORITY_USER_ONLY",
                f"`{spelled}` is the user's to run here ({why}). Show the user the exact"
                " command and wait for them to run it in their own terminal.",
            )
        if operation in READ_OPERATIONS:
            continue
        named = option_value(argv, "--session") or _assigned_session(command) or line_session
        if named in (f"${SESSION_VARIABLE}", f"${{{SESSION_VARIABLE}}}"):
            named = line_session or ctx.session_id  # the variable our SessionStart exports
        if named is not None and ("$" in named or "`" in named):
            return _deny(
                "AUTHORITY_UNVERIFIABLE_COMMAND",
                f"`{spelled}` takes its session from the shell ({named}), so Ithaca cannot"
                " verify it is this one. Leave --session out: the session is found for you.",
            )
        if named is not None and named != ctx.session_id:
            return _deny(
                "SESSION_MISMATCH",
                f"`{spelled}` names session {named!r}, but this is session"
                f" {ctx.session_id!r}; a pursuit is changed only from its own session.",
            )
    return ABSTAIN


def is_reviewer(agent_type: object, reviewer: str) -> bool:
    """Whether a delegate call's subagent type can start the reviewer: its name or the
    Ithaca plugin's (``ithaca:<name>``), in any case, as Claude Code resolves it."""
    from ithaca.ultragoal.reviewer_definition import resolves_to_reviewer

    return resolves_to_reviewer(agent_type, reviewer)


def _reviewer_only(ctx: GateContext, call: Call | None = None) -> Opinion:
    """Submitting or ticketing a review is the reviewer subagent's (docs/ultragoal.md, "Who
    may do what"), known by the host's agent identity in the payload (Claude Code and
    Codex both name the subagent: ``agent_id`` and ``agent_type``). A submission on a
    shell line must carry its artifact on the line, where the hook can bind its pass."""
    from ithaca.ultragoal.reviewer_definition import expected_agent_type, is_reviewer_caller

    if not is_reviewer_caller(ctx):
        from ithaca.ultragoal.prompts import not_reviewer

        return Opinion(
            "deny",
            "REVIEW_SUBMITTER_NOT_REVIEWER",
            not_reviewer(expected_agent_type(ctx)),
            gate="ultragoal",
        )
    if call is not None and call.commands:
        from ithaca.ultragoal.tool_hooks import shell_submissions, submitted_artifact

        if shell_submissions(call) and submitted_artifact(call, ctx) is None:
            return _deny(
                "REVIEW_SUBMISSION_UNVERIFIABLE",
                "Ithaca binds a review to the exact artifact its hook sees you submit, and"
                " this line does not show it (standard input, a file, or text that is not"
                " JSON). Submit with the `ultragoal` MCP tool (operation submit_review), or"
                " put the artifact on the line: `ithaca ultragoal submit-review --data"
                " '<json>'`.",
            )
    return ABSTAIN


def _reserved_for_user(operation: str, argv: tuple[str, ...], ctx: GateContext) -> str | None:
    """Why the current state makes ``operation`` the user's, or None."""
    if operation in CONFIRMATIONS:
        if ctx.config["ultragoal"]["strict_approval"]:
            return "strict approval is on"
        phase = _pursuit(ctx, "phase")
        return None if phase in (None, "planning") else "the pursuit has begun"
    budget = {option: option_value(argv, option) for option in BUDGET_OPTIONS}
    if operation != "set" or not any(budget.values()):
        return None
    row = _pursuit(ctx, "pursued_once, max_iterations, max_wall_minutes")
    if not isinstance(row, tuple) or not row[0]:
        return None
    for value, current in zip(budget.values(), row[1:], strict=True):
        if value and value.isdecimal() and current is not None and int(value) > int(current):
            return "only the user raises a budget once the pursuit has been pursued"
    return None


def _pursuit(ctx: GateContext, columns: str) -> object:
    if ctx.conn is None:
        return None
    found = ctx.conn.execute(
        f"SELECT {columns} FROM ultragoal_pursuit WHERE session_id = ?", (ctx.session_id,)
    ).fetchone()
    if found is None or "," in columns:
        return found
    return found[0]


def option_value(argv: tuple[str, ...], option: str) -> str | None:
    """The value of ``option`` (``--opt V`` or ``--opt=V``), the last one given."""
    value = None
    for index, word in enumerate(argv):
        if word == option and index + 1 < len(argv):
            value = argv[index + 1]
        elif word.startswith(option + "="):
            value = word[len(option) + 1 :]
    return value


def _assigned_session(command: SimpleCommand) -> str | None:
    """``ITHACA_SESSION_ID=…`` set for this command alone (a prefix or through ``env``)."""
    for word in reversed(command.assignments):
        name, _, value = word.partition("=")
        if name == SESSION_VARIABLE:
            return value
    return None


def _declared_session(command: SimpleCommand, current: str | None) -> str | None:
    """The session id the line's shell holds after ``command``: a bare assignment or an
    ``export ITHACA_SESSION_ID=…`` changes it for the commands that follow."""
    words = list(command.assignments) if not command.argv else []
    if command.program in DECLARATIONS:
        words = list(command.argv[1:])
    for word in words:
        name, equals, value = word.partition("=")
        if equals and name == SESSION_VARIABLE:
            current = value
    return current


def _deny(code: str, reason: str) -> Opinion:
    return Opinion("deny", code, f"Ultragoal: {reason}", gate="ultragoal")
