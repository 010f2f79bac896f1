"""Task Master's ``tasks.json`` (``.taskmaster/tasks/tasks.json``; ``tasks/tasks.json``
before Task Master moved it).

The file is either tagged, ``{"master": {"tasks": [...], "metadata": {...}}, "<tag>":
...}``, or the legacy ``{"tasks": [...]}``, which Task Master itself reads as the tag
``master``. Each tag becomes one change, ``tm-<tag>``; each task ``tm-<tag>.<id>`` and
each subtask ``tm-<tag>.<id>.<sub>``, defined under its parent. Dependencies keep Task
Master's meaning: a task's ``dependencies`` name top-level ids (or ``"3.2"`` for a
subtask); a subtask's bare number names a sibling subtask, a dotted string any subtask
and a plain string a top-level task.

Fields: ``title``; ``description`` and ``details`` become the description;
``testStrategy`` and ``acceptanceCriteria`` the acceptance criteria; ``priority`` and
``type`` are kept; ``status`` ``done`` and ``cancelled`` are finished work, not imported.
Task Master has no verification command, so each task gets the failing placeholder
until one is set.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ithaca.delivery.imports import shared
from ithaca.delivery.imports.shared import Cuts, Source, Task, Unit

FORMAT = "taskmaster"
NAME = "Task Master"
FINISHED = frozenset({"done", "cancelled", "completed"})


def locate(path: str, forced: bool = False) -> str | None:
    """The ``tasks.json`` at or under ``path`` that this reader would import."""
    if shared.is_file(path):
        return path if forced or _looks_like(path) else None
    base = os.path.basename(os.path.normpath(path))
    candidates = [os.path.join(path, ".taskmaster", "tasks", "tasks.json")]
    if base == ".taskmaster":
        candidates.append(os.path.join(path, "tasks", "tasks.json"))
    candidates += [os.path.join(path, "tasks", "tasks.json"), os.path.join(path, "tasks.json")]
    for candidate in candidates:
        if shared.is_file(candidate) and (_under_taskmaster(candidate) or _looks_like(candidate)):
            return candidate
    return None


def _under_taskmaster(path: str) -> bool:
    return ".taskmaster" in os.path.abspath(path).split(os.sep)


def _looks_like(path: str) -> bool:
    """A Task Master file: named ``tasks.json`` below ``.taskmaster``, or JSON of its
    shape (a file that does not parse counts when it has Task Master's file name, so its
    JSON error is reported rather than an unknown format)."""
    if not path.endswith(".json"):
        return False
    if os.path.basename(path) == "tasks.json" and _under_taskmaster(path):
        return True
    try:
        with open(path, "rb") as stream:
            head = stream.read(shared.MAX_FILE_BYTES)
        value = json.loads(head.decode("utf-8-sig"))
    except (OSError, ValueError):
        return os.path.basename(path) == "tasks.json"
    return _tags_of(value) is not None


def _tags_of(value: Any) -> dict[str, Any] | None:
    if not isinstance(value, dict) or not value:
        return None
    if value.get("kind") is not None:
        return None  # a ledger (Ultra Builder Pro's, Ithaca's), not Task Master
    if isinstance(value.get("tasks"), list):
        return {"master": {"tasks": value["tasks"], "metadata": value.get("metadata")}}
    if all(
        isinstance(item, dict) and isinstance(item.get("tasks"), list) for item in value.values()
    ):
        return dict(value)
    return None


def read(path: str) -> Source:
    file = locate(path, forced=True)
    if file is None:
        raise shared.nothing_found(
            path,
            NAME,
            "point at its tasks.json (.taskmaster/tasks/tasks.json) or the project folder"
            " that holds it",
        )
    value = shared.read_json(file, NAME)
    tags = _tags_of(value)
    if tags is None:
        raise shared.invalid(
            file,
            "the top level",
            'is neither {"tasks": [...]} nor tagged lists like {"master": {"tasks": [...]}}',
            NAME,
        )
    origin = _origin(file)
    source = Source(
        FORMAT,
        NAME,
        origin,
        dep_hint=" (`task-master validate-dependencies` lists such dependencies,"
        " `task-master fix-dependencies` removes them)",
    )
    cuts = Cuts()
    for tag, body in tags.items():
        source.units.append(_unit(file, origin, str(tag), body, cuts))
    source.notes += cuts.note(NAME)
    return source


def _origin(file: str) -> str:
    parts = os.path.abspath(file).split(os.sep)
    if ".taskmaster" in parts:
        return "/".join(parts[parts.index(".taskmaster") :])
    return os.path.basename(file)


def _unit(file: str, origin: str, tag: str, body: dict[str, Any], cuts: Cuts) -> Unit:
    change = shared.change_id(tag, "tm-")
    metadata = body.get("metadata") if isinstance(body.get("metadata"), dict) else {}
    about = metadata.get("description") if isinstance(metadata, dict) else None
    intent = f"# Task Master tag `{tag}`\n\n"
    if isinstance(about, str) and about.strip():
        intent += f"{about.strip()}\n\n"
    intent += f"---\nImported from Task Master: `{origin}`, tag `{tag}`.\n"
    unit = Unit(tag, change, f"Task Master tag {tag}", intent)
    for index, raw in enumerate(body["tasks"]):
        where = f"tag {tag!r}, tasks[{index}]"
        parent = _task(file, tag, change, raw, where, None, cuts)
        unit.tasks.append(parent)
        subtasks = raw.get("subtasks") or []
        if not isinstance(subtasks, list):
            raise shared.invalid(file, f"{where}.subtasks", "is not a list", NAME)
        for number, sub in enumerate(subtasks):
            unit.tasks.append(
                _task(file, tag, change, sub, f"{where}.subtasks[{number}]", parent, cuts)
            )
    if unit.tasks and all(task.finished for task in unit.tasks):
        unit.finished = f"every task of tag {tag} is done or cancelled in Task Master"
    return unit


def _task(
    file: str,
    tag: str,
    change: str,
    raw: Any,
    where: str,
    parent: Task | None,
    cuts: Cuts,
) -> Task:
    if not isinstance(raw, dict):
        raise shared.invalid(file, where, "is not an object", NAME)
    local = _id(raw.get("id"))
    if local is None:
        raise shared.invalid(file, f"{where}.id", "is missing or not a number", NAME)
    peer_id = local if parent is None else f"{parent.peer_id}.{local}"
    title_text = raw.get("title")
    if not isinstance(title_text, str) or not title_text.strip():
        raise shared.invalid(file, f"{where}.title", "is missing", NAME)
    title, long_title = shared.title_and_rest(title_text)
    texts = [long_title] + [
        raw[name].strip()
        for name in ("description", "details")
        if isinstance(raw.get(name), str) and raw[name].strip()
    ]
    line = f"Imported from Task Master task {peer_id} (tag {tag})."
    body = cuts.cut(
        "\n\n".join(text for text in texts if text),
        shared.DESCRIPTION_CHARS - len(line) - 2,
        f"task {peer_id} description",
    )
    found_status = raw.get("status")
    status = (
        found_status.strip()
        if isinstance(found_status, str) and found_status.strip()
        else "pending"
    )
    return Task(
        peer_id=peer_id,
        id=shared.task_id(change, peer_id),
        title=title,
        description=f"{body}\n\n{line}" if body else line,
        deps=_deps(file, raw.get("dependencies"), f"{where}.dependencies", parent),
        parent=None if parent is None else parent.peer_id,
        status=status,
        finished=status.lower() in FINISHED,
        acceptance=_acceptance(raw, peer_id, cuts),
        verification=shared.placeholder_verification(NAME, shared.task_id(change, peer_id)),
        files=shared.paths_in("\n".join([title_text, *texts])),
        type=_short(raw.get("type"), 40),
        priority=_short(raw.get("priority"), 32),
    )


def _id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value.strip()
    return None


def _deps(file: str, value: Any, where: str, parent: Task | None) -> list[str]:
    """The dependencies as peer ids (``"3"``, ``"3.2"``), in Task Master's meaning."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise shared.invalid(file, where, "is not a list", NAME)
    found = []
    for index, dep in enumerate(value):
        if isinstance(dep, bool) or not isinstance(dep, (int, str)) or str(dep).strip() == "":
            raise shared.invalid(file, f"{where}[{index}]", "is not a task id", NAME)
        if isinstance(dep, int) and parent is not None:
            found.append(f"{parent.peer_id}.{dep}")  # a sibling subtask
        else:
            found.append(str(dep).strip())
    return found


def _acceptance(raw: dict[str, Any], peer_id: str, cuts: Cuts) -> list[tuple[str, str]]:
    found = []
    strategy = raw.get("testStrategy")
    if isinstance(strategy, str) and strategy.strip():
        text = cuts.cut(strategy.strip(), shared.CRITERION_CHARS, f"task {peer_id} testStrategy")
        found.append(("test-strategy", text))
    criteria = raw.get("acceptanceCriteria")
    items: list[str] = []
    if isinstance(criteria, list):
        items = [item.strip() for item in criteria if isinstance(item, str) and item.strip()]
    elif isinstance(criteria, str) and criteria.strip():
        lines = [line.strip() for line in criteria.strip().split("\n") if line.strip()]
        bullets = [line[1:].strip() for line in lines if line[:1] in ("-", "*")]
        items = bullets if len(bullets) == len(lines) else [criteria.strip()]
    for number, item in enumerate(items, 1):
        text = cuts.cut(item, shared.CRITERION_CHARS, f"task {peer_id} acceptanceCriteria")
        found.append((f"ac-{number}", text))
    return found[: shared.MAX_ACCEPTANCE]


def _short(value: Any, limit: int) -> str | None:
    if isinstance(value, str) and value.strip():
        return value.strip()[:limit]
    return None
