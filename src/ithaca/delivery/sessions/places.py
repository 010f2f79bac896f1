"""Each execution session's places are its own: the delivery gate's judgement of writes
into the work folder (PreToolUse).

The work folder ``.ithaca-work/`` holds one worktree (``worktrees/<sid>/``, and run-plan's
``worktrees/plan-<change>/``) and one output folder (``outputs/<sid>/``) per session; a
session's write allowances (``write_allowances`` rows owned by ``delivery:<sid>``) are
its worktree and its output. A write there — a file tool's target or a shell write
target, as the classifier reports it — is allowed only inside an allowance of a session
acting for this call (``ithaca.delivery.gate``); anything else there is
``SESSION_WRITE_DENIED``, naming whose folder it is. A target the shell decides (``$X/…``)
is judged by the literal part after ``.ithaca-work/`` when it names one, else where the
call stands when that is in the work folder; a glob by the folder it starts in (``..``
after it followed); an existing symlink by itself and by where it leads. These checks read
the call's text, like the guard: an inline script (``python -c``) that writes there is not
seen.

On the hook path: standard library and the kernel only.
"""

from __future__ import annotations

import os

from ithaca.kernel import allowances, ids
from ithaca.kernel.gates import Opinion
from ithaca.kernel.project import WORK_DIR_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.call import Call
    from ithaca.kernel.gates import GateContext

_SESSION = "SELECT task_id, status FROM delivery_sessions WHERE id = ?"
_SHELL_DECIDED = ("$", "`")
_GLOB = ("*", "?", "[")
_ANY_DECIDED = (*_SHELL_DECIDED, *_GLOB)
SESSION_WRITE_DENIED = "SESSION_WRITE_DENIED"


def judge(call: Call, ctx: GateContext) -> Opinion | None:
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
