"""An OpenSpec ``changes/`` folder (``openspec/changes/<change-id>/``), or one change.

Each change folder becomes one Ithaca change with the folder's name as its id:
``proposal.md`` (Why, What Changes, Impact) is its intent, ``design.md`` is copied to
``documentation/design.md`` and the delta specs ``specs/<capability>/spec.md`` to
``delta/specs/…``. ``changes/archive/`` holds delivered changes and is not imported.

``tasks.md`` is read the way OpenSpec reads it: every ``- [ ]`` / ``- [x]`` line is a
task (indented ones are subtasks of the task above them), numbered ``1.1`` under ``## 1.
…`` groups; a ``— verify: …`` clause becomes the acceptance criterion. The task id is
``<change>.<number>``. OpenSpec has no dependency notation; it asks that tasks be
"ordered by dependency" and applied in order, so each task depends on the one listed
before it (its own parent excepted). Checked tasks are finished work, not imported.
"""

from __future__ import annotations

import os
import re

from ithaca.delivery.imports import shared
from ithaca.delivery.imports.shared import Cuts, Source, Task, Unit

FORMAT = "openspec"
NAME = "OpenSpec"

# OpenSpec's own task line (src/utils/task-progress.ts): a bullet with a checkbox,
# leading whitespace allowed so nested subtasks count.
_TASK_LINE = re.compile(r"^(\s*)[-*]\s*\[([\sxX])\]\s*(.*)")
_NUMBER = re.compile(r"^(\d+(?:\.\d+)*)\.?\s+(.*)$")
_VERIFY = re.compile(r"\s+[—–-]{1,2}\s+verify:\s+", re.IGNORECASE)


def locate(path: str, forced: bool = False) -> str | None:
    """The ``changes`` folder, or the single change folder, at or under ``path``."""
    if shared.is_file(path):
        folder = os.path.dirname(os.path.abspath(path))
        named = os.path.basename(path) in ("proposal.md", "tasks.md", "design.md")
        if named and _is_change(folder) and (forced or _in_changes(folder)):
            return folder
        return None
    base = os.path.basename(os.path.normpath(path))
    nested = os.path.join(path, "openspec", "changes")
    if shared.is_dir(nested):
        return nested
    if base == "openspec" and shared.is_dir(os.path.join(path, "changes")):
        return os.path.join(path, "changes")
    if base == "changes" and (
        os.path.basename(os.path.dirname(os.path.abspath(path))) == "openspec"
        or any(_is_change(os.path.join(path, name)) for name in shared.sorted_dirs(path))
    ):
        return path
    if _is_change(path) and (forced or shared.is_file(os.path.join(path, "proposal.md"))):
        return path
    return None


def _is_change(folder: str) -> bool:
    return shared.is_file(os.path.join(folder, "proposal.md")) or (
        shared.is_file(os.path.join(folder, "tasks.md"))
        and shared.is_file(os.path.join(folder, ".openspec.yaml"))
    )


def _in_changes(folder: str) -> bool:
    return os.path.basename(os.path.dirname(folder)) == "changes"


def read(path: str) -> Source:
    folder = locate(path, forced=True)
    if folder is None:
        raise shared.nothing_found(
            path,
            NAME,
            "point at the openspec/ folder, its changes/ folder or one change folder"
            " (with proposal.md)",
        )
    source = Source(FORMAT, NAME, _origin(folder))
    cuts = Cuts()
    if _is_change(folder) and not _holds_changes(folder):
        source.units.append(_unit(folder, source.origin, cuts))
    else:
        for name in shared.sorted_dirs(folder):
            inner = os.path.join(folder, name)
            if name == "archive":
                for archived in shared.sorted_dirs(inner):
                    source.skipped.append(
                        {
                            "kind": "change",
                            "peer_id": archived,
                            "reason": "archived in OpenSpec (delivered)",
                        }
                    )
            elif _is_change(inner) or shared.is_file(os.path.join(inner, "tasks.md")):
                source.units.append(_unit(inner, f"{source.origin}/{name}", cuts))
    source.notes += cuts.note(NAME)
    return source


def _holds_changes(folder: str) -> bool:
    return any(_is_change(os.path.join(folder, name)) for name in shared.sorted_dirs(folder))


def _origin(folder: str) -> str:
    parts = os.path.abspath(folder).split(os.sep)
    if "openspec" in parts:  # from the last folder named so: OpenSpec's own root
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("openspec") :])
    return os.path.basename(os.path.abspath(folder))


def _unit(folder: str, origin: str, cuts: Cuts) -> Unit:
    name = os.path.basename(os.path.abspath(folder))
    change = shared.change_id(name)
    proposal_path = os.path.join(folder, "proposal.md")
    proposal = shared.read_text(proposal_path, NAME) if shared.is_file(proposal_path) else None
    heading = shared.first_heading(proposal or "")
    if heading:
        heading = re.sub(r"^(change|proposal)\s*:\s*", "", heading, flags=re.IGNORECASE)
    title, _ = shared.title_and_rest(heading or shared.humanize(name))
    line = f"Imported from OpenSpec change `{name}` (`{origin}`)."
    body = (
        proposal.strip() if proposal else f"# {title}\n\nThis OpenSpec change has no proposal.md."
    )
    body = cuts.cut(body, shared.INTENT_CHARS - len(line) - 8, f"{name} proposal.md")
    unit = Unit(name, change, title, f"{body}\n\n---\n{line}\n")
    tasks_path = os.path.join(folder, "tasks.md")
    if shared.is_file(tasks_path):
        unit.tasks = _tasks(shared.read_text(tasks_path, NAME), name, change, cuts)
    specs = os.path.join(folder, "specs")
    files = [("design.md", "documentation", "documentation/design.md")]
    if shared.is_dir(specs):
        files += [
            (f"specs/{rel}", "delta", f"delta/specs/{rel}")
            for rel in shared.walk_files(specs)
            if rel.endswith(".md")
        ]
    unit.documents = shared.documents(folder, files, origin, NAME, cuts)
    if unit.tasks and all(task.finished for task in unit.tasks):
        unit.finished = f"every task of OpenSpec change {name} is checked off (archive it there)"
    return unit


def _tasks(text: str, name: str, change: str, cuts: Cuts) -> list[Task]:
    found: list[Task] = []
    group = ""
    stack: list[tuple[int, Task]] = []  # (indent, task) of the open parents
    extra: dict[str, list[str]] = {}
    for line in text.split("\n"):
        if line.startswith("## "):
            group = line[3:].strip()
            stack = []
            continue
        match = _TASK_LINE.match(line)
        if match is None:
            if stack and line.strip() and _indent(line) > stack[-1][0]:
                extra[stack[-1][1].peer_id].append(line.strip())
            continue
        indent = _indent(match.group(1))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else None
        task = _task(
            match.group(3).strip(), match.group(2), len(found), group, parent, name, change, cuts
        )
        _depend_on_previous(task, found)
        found.append(task)
        extra[task.peer_id] = []
        stack.append((indent, task))
    for task in found:
        if extra.get(task.peer_id):
            notes = "\n".join(extra[task.peer_id])
            task.files = sorted({*task.files, *shared.paths_in(notes)})
            head, _, line = task.description.rpartition("\n\n")
            body = cuts.cut(
                "\n\n".join(part for part in (head, notes) if part),
                shared.DESCRIPTION_CHARS - len(line) - 2,
                f"{name} task {task.peer_id}",
            )
            task.description = f"{body}\n\n{line}"
    return found


def _indent(text: str) -> int:
    return len(text.expandtabs(4)) - len(text.expandtabs(4).lstrip())


def _task(
    text: str,
    box: str,
    position: int,
    group: str,
    parent: Task | None,
    name: str,
    change: str,
    cuts: Cuts,
) -> Task:
    numbered = _NUMBER.match(text)
    peer_id, words = (
        (numbered.group(1), numbered.group(2)) if numbered else (f"t{position + 1}", text)
    )
    words = words.strip() or peer_id
    wording, verify = (_VERIFY.split(words, maxsplit=1) + [""])[:2]
    title, long_title = shared.title_and_rest(wording)
    parts = [long_title, f"Group: {group}" if group else ""]
    line = f"Imported from OpenSpec change {name}, task {peer_id}."
    body = "\n\n".join(part for part in parts if part)
    task_id = shared.task_id(change, peer_id)
    acceptance = []
    if verify.strip():
        criterion = cuts.cut(
            verify.strip(), shared.CRITERION_CHARS, f"{name} task {peer_id} verify"
        )
        acceptance.append(("verify", criterion))
    return Task(
        peer_id=peer_id,
        id=task_id,
        title=title,
        description=f"{body}\n\n{line}" if body else line,
        parent=None if parent is None else parent.peer_id,
        status="done" if box.lower() == "x" else "pending",
        finished=box.lower() == "x",
        acceptance=acceptance,
        verification=shared.placeholder_verification(NAME, task_id),
        files=shared.paths_in(words),
    )


def _depend_on_previous(task: Task, earlier: list[Task]) -> None:
    """The task depends on the one listed before it, skipping its own ancestors."""
    ancestors = set()
    by_id = {item.peer_id: item for item in earlier}
    parent = task.parent
    while parent is not None and parent not in ancestors:
        ancestors.add(parent)
        parent = by_id[parent].parent if parent in by_id else None
    for previous in reversed(earlier):
        if previous.peer_id not in ancestors:
            task.deps = [previous.peer_id]
            return
