"""The delivery gate's judgement of a call's writes (PreToolUse): into the work folder,
where each execution session's places are its own, and into delivery's managed files.
Both are loaded together, once, for the calls that write (every import costs every hook
call).

**The work folder.** ``.ithaca-work/`` holds one worktree (``worktrees/<sid>/``, and
run-plan's ``worktrees/plan-<change>/``) and one output folder (``outputs/<sid>/``) per
session; a session's write allowances (``write_allowances`` rows owned by
``delivery:<sid>``) are its worktree and its output. A write there — a file tool's target
or a shell write target, as the classifier reports it — is allowed only inside an
allowance of a session acting for this call (``ithaca.delivery.gate``); anything else
there is ``SESSION_WRITE_DENIED``, naming whose folder it is. A target the shell decides
(``$X/…``) is judged by the literal part after ``.ithaca-work/`` when it names one, else
where the call stands when that is in the work folder; a glob by the folder it starts in
(``..`` after it followed); an existing symlink by itself and by where it leads. These
checks read the call's text, like the guard: an inline script (``python -c``) that writes
there is not seen.

**Managed files.** The kernel guard already denies every agent write under ``.ithaca/``;
the delivery gate adds, for delivery's managed files (the team ledger, archived changes,
Decision Records, an accepted plan, a change contract), which file it is and which tool
changes it. It denies with the same effect (``DELIVERY_MANAGED_FILE``), so the host sees
both reasons. Bash is judged command by command: a command naming a managed file, as a
write target or any argument, is denied unless it is read-only or a Git operation that
merges or records (the merge driver keeps the ledger whole).

On the hook path: standard library and the kernel only.
"""

from __future__ import annotations

import os

from ithaca.kernel import allowances, ids
from ithaca.kernel.gates import ABSTAIN, Opinion
from ithaca.kernel.project import STATE_DIR_NAME, WORK_DIR_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.call import Call, SimpleCommand
    from ithaca.kernel.gates import GateContext

_SESSION = "SELECT task_id, status FROM delivery_sessions WHERE id = ?"
_SHELL_DECIDED = ("$", "`")
_GLOB = ("*", "?", "[")
_ANY_DECIDED = (*_SHELL_DECIDED, *_GLOB)
SESSION_WRITE_DENIED = "SESSION_WRITE_DENIED"


def judge_work_folder(call: Call, ctx: GateContext) -> Opinion | None:
    """Deny a write into the work folder outside the places of the sessions acting for
    this call; None when every target is elsewhere or allowed."""
    assert ctx.project is not None
    work = ctx.project.work_dir
    allowed: list[str] | None = None
    for target in call.write_targets:
        for reach in _work_reaches(target, call.cwd, ctx.project.root, work):
            if allowed is None:
                allowed = allowances.counted(ctx)
            if not any(_inside(reach, place) for place in allowed):
                why = _not_yours(target, reach, work, ctx)
                return Opinion("deny", SESSION_WRITE_DENIED, why)
    return None


def _work_reaches(target: str, cwd: str, root: str, work: str) -> list[str]:
    """The places in the work folder that ``target`` may write: a path, or the folder a
    glob or an unknown part could spread over, and for an existing symlink also where it
    leads (writing through it writes there); none when it lies outside the work folder."""
    here = os.path.realpath(cwd) if cwd else root
    if _decided(target, _SHELL_DECIDED):
        named = target.rfind(WORK_DIR_NAME)
        if named < 0:
            return [here] if _inside(here, work) else []
        path = work + target[named + len(WORK_DIR_NAME) :]
    elif _decided(target, _GLOB):
        path = os.path.join(here, target)  # kept as written: the shell expands it in cwd
    else:
        path = os.path.join(root, target)
        if os.path.islink(path):  # the link itself, and where it leads
            found = (_reach(path, work), _reach(os.path.realpath(path), work))
            return [place for place in found if place is not None]
    reach = _reach(path, work)
    return [] if reach is None else [reach]


def _reach(path: str, work: str) -> str | None:
    """The place in the work folder an absolute ``path`` may write, None when outside.

    ``..`` is followed component by component: after a glob component it climbs one level
    (a glob never spans a ``/``), after a substitution it may climb anywhere below the
    work folder, since it was named. The place is the path's literal part, up to its
    first glob or substitution."""
    kept: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part != "..":
            kept.append(part)
        elif any(_decided(found, _SHELL_DECIDED) for found in kept):
            return work
        elif kept:
            kept.pop()
    cut = next((i for i, part in enumerate(kept) if _decided(part, _ANY_DECIDED)), len(kept))
    literal = "/" + "/".join(kept[:cut])
    if cut < len(kept) and literal == os.path.dirname(work):
        from ithaca.kernel.globmatch import fnmatchcase

        first = kept[cut]
        if first.startswith(".") and fnmatchcase(WORK_DIR_NAME, first):
            return work  # `.ithaca-w*`: the whole work folder
    return literal if _inside(literal, work) else None


def _decided(part: str, marks: tuple[str, ...]) -> bool:
    return any(mark in part for mark in marks)


def _not_yours(target: str, reach: str, work: str, ctx: GateContext) -> str:
    parts = os.path.relpath(reach, work).split(os.sep)
    kind = {"worktrees": "worktree", "outputs": "output folder"}.get(parts[0])
    name = parts[1] if kind is not None and len(parts) > 1 else None
    ours = "a host session writes only in the worktree and output folder of the execution"
    ours += " session it works in"
    if name is not None and name.startswith("plan-") and kind == "worktree":
        return (
            f"Ithaca delivery: {target} is in the integration worktree of run-plan for change"
            f" {name[len('plan-') :]}, which only `ithaca run-plan` writes; {ours}."
        )
    row = None
    if name is not None and ids.matches("ses", name) and ctx.conn is not None:
        row = ctx.conn.execute(_SESSION, (name,)).fetchone()
    if row is not None:
        return (
            f"Ithaca delivery: {target} is in the {kind} of execution session {name} (task"
            f" {row[0]}, {row[1]}), which does not act for this call: {ours}. Work on your own"
            " task (`session admission`, then `session acquire`), or ask the user."
        )
    return (
        f"Ithaca delivery: {target} reaches into {WORK_DIR_NAME}/, where Ithaca keeps each"
        " execution session's worktree and output folder, and no session acting for this call"
        " owns it;"
        f" {ours} (`session acquire` gives them)."
    )


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


# --- Managed files -------------------------------------------------------------------

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


def judge_managed_files(call: Call, ctx: GateContext) -> Opinion:
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
