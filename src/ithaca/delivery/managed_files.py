"""Delivery's managed files: which file under ``.ithaca/`` an agent's call would change,
and which tool changes it instead (the delivery gate's PreToolUse judgement).

The kernel guard already denies every agent write under ``.ithaca/``; the delivery gate
adds, for delivery's managed files (the team ledger, archived changes, Decision Records,
an accepted plan, a change contract), which file it is and which tool changes it. It
denies with the same effect (``DELIVERY_MANAGED_FILE``), so the host sees both reasons.
Bash is judged command by command: a command naming a managed file, as a write target or
any argument, is denied unless it is read-only or a Git operation that merges or records
(the merge driver keeps the ledger whole).

On the hook path: standard library and the kernel only.
"""

from __future__ import annotations

import os

from ithaca.kernel.gates import ABSTAIN, Opinion
from ithaca.kernel.project import STATE_DIR_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.call import Call, SimpleCommand
    from ithaca.kernel.gates import GateContext

# Git operations that may touch managed files: merges run the ledger's merge driver,
# and staging or committing changes no file in the checkout.
GIT_PASSING = frozenset({"merge", "pull", "rebase", "add", "commit"})
_GIT_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def managed_reason(relpath: str, shown: str) -> str | None:
    """Why the file at ``relpath`` (POSIX, relative to the state root) is Ithaca's to
    write and which tool changes it; None for paths delivery does not manage."""
    parts = relpath.split("/")
    if relpath == "tasks/tasks.json":
        return (
            f"Ithaca delivery: {shown} is the team ledger; tasks change through `record`"
            " and the ledger only through the `sync` tool (`ithaca sync`)."
        )
    if parts[:2] == ["changes", "archive"]:
        return f"Ithaca delivery: {shown} belongs to an archived change, which is immutable."
    decision_folder = parts[:2] == ["decisions", "baseline"] or (
        parts[:2] == ["changes", "active"] and len(parts) >= 4 and parts[3] == "decisions"
    )
    if decision_folder:
        return (
            f"Ithaca delivery: {shown} holds Decision Records, written once by `record`"
            " decision (accept or defer); to change a decision, record one that supersedes it."
        )
    if parts[:2] == ["changes", "active"] and len(parts) == 4:
        if parts[3] in ("plan.json", "plan.md"):
            return (
                f"Ithaca delivery: {shown} is written by the `checkpoint` tool when a plan is"
                " accepted; change the tasks with `record` and accept a new plan checkpoint."
            )
        if parts[3] in ("intent.md", "diagnosis.md"):
            return (
                f"Ithaca delivery: {shown} is the change contract; change it with `record`"
                " change_contract (revise)."
            )
    return None


def judge(call: Call, ctx: GateContext) -> Opinion:
    """Deny an edit or shell call that would change a managed file, naming each file's
    tool; abstain when it changes none (the gate asks only for those two classes)."""
    targets = list(call.write_targets)
    if call.tool_class == "shell":
        targets.extend(_named_paths(call, ctx))
    reasons: list[str] = []
    for target in targets:
        reason = _reason_for(target, ctx)
        if reason is not None and reason not in reasons:
            reasons.append(reason)
    if not reasons:
        return ABSTAIN
    return Opinion("deny", "DELIVERY_MANAGED_FILE", "\n".join(reasons))


def _reason_for(target: str, ctx: GateContext) -> str | None:
    assert ctx.project is not None
    state_root = ctx.project.state_root
    path = os.path.normpath(os.path.join(ctx.project.root, target))
    if not path.startswith(state_root.rstrip(os.sep) + os.sep):
        return None
    relpath = os.path.relpath(path, state_root).replace(os.sep, "/")
    shown = f"{os.path.basename(state_root) or STATE_DIR_NAME}/{relpath}"
    return managed_reason(relpath, shown)


def _named_paths(call: Call, ctx: GateContext) -> list[str]:
    """Every argument of a shell command that may change what it names, as a path the
    classifier would report; read-only commands and passing Git operations name nothing."""
    from ithaca.kernel.classify import resolve_target
    from ithaca.kernel.shell_commands import ithaca_invocation
    from ithaca.kernel.shell_effects import is_read_only
    from ithaca.kernel.shell_parse import ParsedShell

    assert ctx.project is not None
    settings = ctx.config["ulysses"]
    root = ctx.project.root
    named: list[str] = []
    for command in call.commands:
        if ithaca_invocation(command) is not None or _git_passes(command):
            continue
        if is_read_only(
            ParsedShell((command._replace(redirects=()),)),  # redirects are write targets
            tests_are_read_only=settings["tests_are_read_only"],
            extra_read_only=tuple(settings["read_only_commands"]),
        ):
            continue
        for word in command.argv[1:]:
            if word and not word.startswith("-"):
                named.append(resolve_target(word, call.cwd, root))
    return named


def _git_passes(command: SimpleCommand) -> bool:
    if command.program != "git":
        return False
    argv = command.argv
    index = 1
    while index < len(argv) and argv[index].startswith("-"):
        index += 2 if argv[index] in _GIT_GLOBAL_VALUES else 1
    return index < len(argv) and argv[index] in GIT_PASSING
