"""spec-kit features: ``specs/<NNN-feature>/tasks.md`` (with ``spec.md``, ``plan.md`` …).

Each feature folder becomes one Ithaca change named like the folder (``001-photo-albums``):
``spec.md`` is its intent, ``plan.md``, ``data-model.md``, ``quickstart.md`` and
``contracts/`` are copied to ``documentation/``, ``research.md`` to ``research/``. Each
user-story phase's **Goal** and **Independent Test** become an acceptance criterion of the
change.

``tasks.md`` follows spec-kit's checklist format, ``- [ ] T012 [P] [US1] Create User model
in src/models/user.py``, under ``## Phase N: …`` headings. A task becomes
``<feature>.T012``; the file paths in its text become its declared files. Dependencies
are spec-kit's execution order:

- an explicit ``(depends on T012, T013)``;
- phases: Setup before Foundational, Foundational before every user-story phase (the
  stories may run side by side), all stories before the phase that follows them (Polish):
  each task depends on the tasks of the phase(s) it comes after;
- within a phase, tasks run in order except those marked ``[P]``: a task without ``[P]``
  depends on the tasks listed since the last task without ``[P]`` (that one included).

Tasks checked ``[X]`` are finished work, not imported.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ithaca.delivery.contract import diagnostic
from ithaca.delivery.imports import shared
from ithaca.delivery.imports.shared import Cuts, Source, Task, Unit

FORMAT = "speckit"
NAME = "spec-kit"

_TASK_LINE = re.compile(r"^\s*[-*]\s*\[([ xX])\]\s*(T\d+)\b[:.]?\s*(.*)$")
_ANY_BOX = re.compile(r"^\s*[-*]\s*\[[ xX]\]\s")
_LABEL = re.compile(r"^\[([^\]]+)\]\s*")
_DEPENDS = re.compile(
    r"\bdepend(?:s|ing)?\s+on:?\s+(T\d+(?:\s*(?:,|and|&)\s*T\d+)*)", re.IGNORECASE
)
_DEPENDS_NOTE = re.compile(r"\s*\(\s*depend(?:s|ing)?\s+on:?\s+[^)]*\)", re.IGNORECASE)
_FIELD = re.compile(r"^\*\*(Goal|Independent Test)\*\*\s*:\s*(.+)$", re.IGNORECASE)
_DOCUMENTS = (
    ("plan.md", "documentation", "documentation/plan.md"),
    ("research.md", "research", "research/research.md"),
    ("data-model.md", "documentation", "documentation/data-model.md"),
    ("quickstart.md", "documentation", "documentation/quickstart.md"),
)


@dataclass
class _Phase:
    heading: str
    tasks: list[Task] = field(default_factory=list)
    parallel: set[str] = field(default_factory=set)
    stories: dict[str, str] = field(default_factory=dict)  # task -> its US label
    story: bool = False
    goal: str = ""
    test: str = ""


def locate(path: str, forced: bool = False) -> str | None:
    """The ``specs`` folder, or the one feature folder, at or under ``path``."""
    if shared.is_file(path):
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.basename(path) != "tasks.md":
            return None
        if forced or os.path.basename(os.path.dirname(folder)) == "specs" or _sniff(path):
            return folder
        return None
    nested = os.path.join(path, "specs")
    if shared.is_dir(nested) and _features(nested):
        return nested
    if os.path.basename(os.path.normpath(path)) == "specs" and _features(path):
        return path
    if _is_feature(path) and (forced or not shared.is_file(os.path.join(path, "proposal.md"))):
        return path
    return path if forced and _features(path) else None


def _is_feature(folder: str) -> bool:
    return shared.is_file(os.path.join(folder, "tasks.md"))


def _features(folder: str) -> list[str]:
    return [name for name in shared.sorted_dirs(folder) if _is_feature(os.path.join(folder, name))]


def _sniff(path: str) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            return any(_TASK_LINE.match(line) for line in stream)
    except OSError:
        return False


def read(path: str) -> Source:
    folder = locate(path, forced=True)
    if folder is None:
        raise shared.nothing_found(
            path,
            NAME,
            "point at the specs/ folder, one feature folder (specs/001-…) or its tasks.md",
        )
    source = Source(FORMAT, NAME, _origin(folder))
    cuts = Cuts()
    if _is_feature(folder):
        source.units.append(_unit(folder, source.origin, source, cuts))
    else:
        for name in _features(folder):
            inner = os.path.join(folder, name)
            source.units.append(_unit(inner, f"{source.origin}/{name}", source, cuts))
    source.notes += cuts.note(NAME)
    return source


def _origin(folder: str) -> str:
    parts = os.path.abspath(folder).split(os.sep)
    if "specs" in parts:
        return "/".join(parts[len(parts) - 1 - parts[::-1].index("specs") :])
    return os.path.basename(os.path.abspath(folder))


def _unit(folder: str, origin: str, source: Source, cuts: Cuts) -> Unit:
    name = os.path.basename(os.path.abspath(folder))
    change = shared.change_id(name)
    text = shared.read_text(os.path.join(folder, "tasks.md"), NAME)
    spec_path = os.path.join(folder, "spec.md")
    spec = shared.read_text(spec_path, NAME) if shared.is_file(spec_path) else None
    heading = shared.first_heading(text) or ""
    feature = re.sub(r"^tasks\s*:\s*", "", heading, flags=re.IGNORECASE).strip()
    if not feature and spec:
        spec_heading = shared.first_heading(spec) or ""
        feature = re.sub(r"^feature specification\s*:\s*", "", spec_heading, flags=re.IGNORECASE)
    title, _ = shared.title_and_rest(feature or shared.humanize(name))
    line = f"Imported from spec-kit feature `{name}` (`{origin}/tasks.md`)."
    body = spec.strip() if spec else f"# {title}\n\nThis spec-kit feature has no spec.md."
    body = cuts.cut(body, shared.INTENT_CHARS - len(line) - 8, f"{name} spec.md")
    unit = Unit(name, change, title, f"{body}\n\n---\n{line}\n")
    phases, ignored = _phases(text)
    _link(phases)
    for number, phase in enumerate(phases):
        for task in phase.tasks:
            _finish(task, phase, name, change)
            unit.tasks.append(task)
        if phase.story and (phase.goal or phase.test):
            criterion = phase.goal or phase.heading
            item = {"id": f"story-{number + 1}", "criterion": criterion[:2000]}
            if phase.test:
                item["verification"] = phase.test[:2000]
            unit.contract.setdefault("acceptance", []).append(item)
    if ignored:
        source.notes.append(
            diagnostic(
                "IMPORT_LINES_IGNORED",
                "warning",
                f"{origin}/tasks.md has {ignored} checkbox line(s) without a task id (T001 …);"
                " spec-kit's format needs one, so they were not imported",
                change,
            )
        )
    contracts = os.path.join(folder, "contracts")
    files = list(_DOCUMENTS)
    if shared.is_dir(contracts):
        files += [
            (f"contracts/{rel}", "documentation", f"documentation/contracts/{rel}")
            for rel in shared.walk_files(contracts)
        ]
    unit.documents = shared.documents(folder, files, origin, NAME, cuts)
    if unit.tasks and all(task.finished for task in unit.tasks):
        unit.finished = f"every task of spec-kit feature {name} is checked off"
    return unit


def _phases(text: str) -> tuple[list[_Phase], int]:
    """The ``##`` sections that hold tasks, in order, and the task-like lines left out."""
    phases = [_Phase("")]
    ignored = 0
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("## "):
            phases.append(_Phase(line[3:].strip()))
            continue
        field_match = _FIELD.match(line.strip())
        if field_match:
            value = field_match.group(2).strip()
            if field_match.group(1).lower() == "goal":
                phases[-1].goal = value
            else:
                phases[-1].test = value
            continue
        match = _TASK_LINE.match(line)
        if match is None:
            ignored += 1 if _ANY_BOX.match(line) else 0
            continue
        box, peer_id, rest = match.groups()
        labels = []
        while (label := _LABEL.match(rest)) is not None:
            labels.append(label.group(1).strip())
            rest = rest[label.end() :]
        task = Task(
            peer_id=peer_id,
            id="",
            title=rest.strip(),
            status="done" if box.lower() == "x" else "pending",
            finished=box.lower() == "x",
        )
        task.deps = _explicit(rest)
        stories = [label for label in labels if re.fullmatch(r"US\d+", label, re.IGNORECASE)]
        if stories:
            phases[-1].stories[peer_id] = stories[0].upper()
        if "P" in labels:
            phases[-1].parallel.add(peer_id)
        phases[-1].tasks.append(task)
    found = [phase for phase in phases if phase.tasks]
    for phase in found:
        phase.story = "user story" in phase.heading.lower() or bool(phase.stories)
    return found, ignored


def _explicit(text: str) -> list[str]:
    found = []
    for match in _DEPENDS.finditer(text):
        found += re.findall(r"T\d+", match.group(1))
    return found


def _link(phases: list[_Phase]) -> None:
    """Add the phase order and the in-phase order to each task's dependencies."""
    for index, phase in enumerate(phases):
        before = [task.peer_id for prior in _prerequisites(phases, index) for task in prior.tasks]
        since: list[str] = []
        for task in phase.tasks:
            inside = [] if task.peer_id in phase.parallel else list(since)
            task.deps = sorted({*task.deps, *before, *inside})
            if task.peer_id in phase.parallel:
                since.append(task.peer_id)
            else:
                since = [task.peer_id]


def _prerequisites(phases: list[_Phase], index: int) -> list[_Phase]:
    """The phases phase ``index`` comes after: a story phase after the last phase before
    it that is not a story; another phase after the run of stories just before it, or
    else the phase just before it."""
    if index == 0:
        return []
    if phases[index].story:
        for prior in reversed(phases[:index]):
            if not prior.story:
                return [prior]
        return []
    run = []
    for prior in reversed(phases[:index]):
        if not prior.story:
            break
        run.append(prior)
    return run or [phases[index - 1]]


def _finish(task: Task, phase: _Phase, name: str, change: str) -> None:
    """Give a parsed task its id, title, description, files and verification."""
    text = task.title
    task.id = shared.task_id(change, task.peer_id)
    task.title, long_title = shared.title_and_rest(
        _DEPENDS_NOTE.sub("", text).strip() or task.peer_id
    )
    facts = [
        long_title,
        f"Phase: {phase.heading}" if phase.heading else "",
        f"User story: {phase.stories[task.peer_id]}" if task.peer_id in phase.stories else "",
        "Parallel: marked [P] (different files, no open dependencies)"
        if task.peer_id in phase.parallel
        else "",
    ]
    line = f"Imported from spec-kit feature {name}, task {task.peer_id}."
    body = "\n".join(fact for fact in facts if fact)
    task.description = f"{body}\n\n{line}" if body else line
    task.files = shared.paths_in(text)
    task.verification = shared.placeholder_verification(NAME, task.id)
