"""What every peer reader produces, the helpers they share, and the settling of tasks.

A reader turns the peer's files into a ``Source``: ``Unit`` s (each becomes one Ithaca
change; a unit without an ``id`` holds tasks that belong to no change), their ``Task`` s,
and for Ultra Builder Pro its ``Decision`` s and ``Checkpoint`` s. Readers give every
item its Ithaca id by a fixed rule (``change_id``, ``task_id``), so the same source maps
to the same ids on every run, and keep dependencies as the peer's own ids. ``settle``
then resolves those: a dependency on a task the source does not hold is
``IMPORT_DEP_UNKNOWN``, a cycle ``IMPORT_DEP_CYCLE``; a dependency on work the peer has
finished is met already and left out.

Finished work (a task the peer marks done or cancelled, an archived change) is not
imported: Ithaca completes a task only with a session's evidence, so it could only hold
it as open work. It is listed as skipped, and the mapping records it.

Every problem with the source is an ``IthacaError`` whose message says what to fix; a
traceback would mean a bug here, never a bad file.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.schemas import ids
from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, IthacaError, NotFound

# The largest peer file read, and the caps of the Ithaca fields the peer text goes into
# (``ithaca.delivery.schemas.record``); longer text is cut, and the cut reported.
MAX_FILE_BYTES = 16 * 1024 * 1024
TITLE_CHARS = 200
DESCRIPTION_CHARS = 8000
CRITERION_CHARS = 2000
INTENT_CHARS = 65536
DOCUMENT_BYTES = 256 * 1024
MAX_ACCEPTANCE = 100
MAX_FILES = 500

TASK_ID = re.compile(ids.TASK_ID["pattern"])  # what the task schema accepts


@dataclass
class Task:
    """One peer task, about to become a task contract."""

    peer_id: str
    id: str
    title: str
    description: str = ""
    deps: list[str] = field(default_factory=list)  # the peer's ids
    parent: str | None = None  # the peer's id
    status: str = "pending"  # the peer's own word, shown to the user
    finished: bool = False
    acceptance: list[tuple[str, str]] = field(default_factory=list)
    verification: list[str] | None = None
    files: list[str] = field(default_factory=list)
    type: str | None = None
    priority: str | None = None
    # Filled by ``settle``: Ithaca ids, and the dependencies left out because they are met.
    dep_ids: list[str] = field(default_factory=list)
    parent_id: str | None = None
    met: list[str] = field(default_factory=list)


@dataclass
class Document:
    """A peer document copied into the change folder as an artifact (``kind``, ``path``
    under the change folder, e.g. ``documentation/design.md``)."""

    kind: str
    path: str
    text: str
    origin: str


@dataclass
class Unit:
    """One peer unit (a Task Master tag, an OpenSpec change, a spec-kit feature, an Ultra
    change), about to become one Ithaca change; ``id`` None holds tasks of no change."""

    peer_id: str
    id: str | None
    title: str
    intent: str
    kind: str = "standard"
    contract: dict[str, Any] = field(default_factory=dict)
    classification: dict[str, Any] = field(default_factory=dict)
    research_disposition: str | None = None
    tasks: list[Task] = field(default_factory=list)
    documents: list[Document] = field(default_factory=list)
    finished: str | None = None  # why the unit is not imported


@dataclass
class Decision:
    """An accepted peer decision (Ultra Builder Pro), about to become a Decision Record."""

    peer_id: str
    id: str
    unit: str | None  # the unit's peer id; None for the baseline
    question: str
    recommendation: str
    choice: str
    rationale: str
    owner: str
    source: str  # owner | delegated | agent
    effects: list[str] = field(default_factory=list)
    non_goals: list[str] = field(default_factory=list)
    applied_refs: list[str] = field(default_factory=list)
    evidence_refs: list[str] = field(default_factory=list)
    supersedes: str | None = None  # the peer's id


@dataclass
class Checkpoint:
    """An accepted peer stage checkpoint (Ultra Builder Pro). ``scope`` is
    ``("task", peer task id)``, ``("change", unit peer id)``, ``("baseline", None)`` or
    ``("project", None)``."""

    peer_id: str
    stage: str
    scope: tuple[str, str | None]
    summary: str
    data: dict[str, Any] | None = None


@dataclass
class Source:
    """Everything one peer source holds, in the shared model."""

    format: str
    name: str  # the peer's name for people ("Task Master")
    origin: str  # the file or folder read, as shown
    units: list[Unit] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    notes: list[Diagnostic] = field(default_factory=list)
    # Whether task ids are unique across the whole source (Ultra) or only in their unit.
    global_task_ids: bool = False
    # The peer's own way to find and fix broken dependencies, named in the error.
    dep_hint: str = ""


# --- reading the peer's files ------------------------------------------------------------


def read_bytes(path: str, name: str) -> bytes:
    """A peer file's bytes, or a coded error that names the file."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise InvalidInput(
                "IMPORT_SOURCE_TOO_LARGE",
                f"{path} is {size} bytes, more than the {MAX_FILE_BYTES} a {name} import"
                " reads; import a smaller part of it",
                {"path": path, "bytes": size},
            )
        with open(path, "rb") as stream:
            return stream.read()
    except FileNotFoundError as exc:
        raise NotFound(
            "IMPORT_SOURCE_MISSING",
            f"{path} does not exist; check the path and run the import again",
            {"path": path},
        ) from exc
    except OSError as exc:
        raise InvalidInput(
            "IMPORT_SOURCE_UNREADABLE",
            f"cannot read {path}: {exc.strerror or exc}; check its permissions and run the"
            " import again",
            {"path": path},
        ) from exc


def read_text(path: str, name: str) -> str:
    """A peer text file as ``str`` (UTF-8, a byte-order mark dropped, ``\\n`` lines)."""
    data = read_bytes(path, name)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            "IMPORT_SOURCE_UNREADABLE",
            f"{path} is not UTF-8 text (byte {exc.start}); save it as UTF-8 and run the"
            " import again",
            {"path": path, "offset": exc.start},
        ) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n")


def read_json(path: str, name: str) -> Any:
    """A peer JSON file, or ``IMPORT_JSON_INVALID`` with the line and column."""
    text = read_text(path, name)
    try:
        return json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", None)
        column = getattr(exc, "colno", None)
        where = f" at line {line}, column {column}" if line is not None else ""
        raise InvalidInput(
            "IMPORT_JSON_INVALID",
            f"{path} is not valid JSON{where} ({getattr(exc, 'msg', exc)}); fix the file the"
            f" way {name} writes it and run the import again",
            {"path": path, "line": line, "column": column},
        ) from exc


def invalid(path: str, where: str, problem: str, name: str) -> InvalidInput:
    """``IMPORT_SOURCE_INVALID``: the file parses but is not what the peer writes."""
    return InvalidInput(
        "IMPORT_SOURCE_INVALID",
        f"{path}: {where} {problem}; this is not how {name} writes it. Fix the file and run"
        " the import again",
        {"path": path, "at": where, "problem": problem},
    )


def nothing_found(path: str, name: str, hint: str) -> NotFound:
    """``IMPORT_SOURCE_EMPTY``: ``--from`` named a format the path does not hold."""
    return NotFound(
        "IMPORT_SOURCE_EMPTY",
        f"no {name} source at {path}; {hint}",
        {"path": path, "format": name},
    )


def documents(
    folder: str, files: list[tuple[str, str, str]], origin: str, name: str, cuts: Cuts
) -> list[Document]:
    """The peer documents ``(path under folder, kind, path in the change folder)`` that
    exist, as artifacts to copy; one larger than an artifact may be is left out."""
    found = []
    for relative, kind, target in files:
        full = os.path.join(folder, *relative.split("/"))
        if not os.path.isfile(full) or os.path.islink(full):
            continue
        text = read_text(full, name)
        if len(text.encode("utf-8")) > DOCUMENT_BYTES:
            cuts.where.append(f"{origin}/{relative} (left out: over {DOCUMENT_BYTES} bytes)")
            continue
        found.append(Document(kind, target, text, f"{origin}/{relative}"))
    return found


def is_file(path: str) -> bool:
    return os.path.isfile(path)


def is_dir(path: str) -> bool:
    return os.path.isdir(path)


def sorted_dirs(folder: str) -> list[str]:
    """The sub-folders of ``folder`` (names, sorted), none if it cannot be listed."""
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name for name in names if os.path.isdir(os.path.join(folder, name)))


def walk_files(folder: str) -> list[str]:
    """Every regular file under ``folder`` (paths relative to it, sorted), symlinks not
    followed."""
    found = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(here, d)))
        for name in files:
            full = os.path.join(here, name)
            if os.path.isfile(full) and not os.path.islink(full):
                found.append(os.path.relpath(full, folder).replace(os.sep, "/"))
    return sorted(found)


# --- text into Ithaca's fields ---------------------------------------------------------------


class Cuts:
    """Counts the peer texts cut to fit an Ithaca field, for one summary note."""

    def __init__(self) -> None:
        self.where: list[str] = []

    def cut(self, text: str, limit: int, where: str) -> str:
        if len(text) <= limit:
            return text
        self.where.append(where)
        return text[: limit - 1].rstrip() + "…"

    def cut_bytes(self, text: str, limit: int, where: str) -> str:
        """``text`` within ``limit`` UTF-8 bytes (for fields capped in bytes)."""
        data = text.encode("utf-8")
        if len(data) <= limit:
            return text
        self.where.append(where)
        return data[: limit - 3].decode("utf-8", "ignore").rstrip() + "…"

    def note(self, name: str) -> list[Diagnostic]:
        if not self.where:
            return []
        shown = ", ".join(self.where[:5]) + (" …" if len(self.where) > 5 else "")
        return [
            diagnostic(
                "IMPORT_TEXT_CUT",
                "warning",
                f"{len(self.where)} {name} text(s) were longer than Ithaca's field and were cut"
                f" ({shown}); the full text stays in the {name} source",
            )
        ]


def title_and_rest(text: str) -> tuple[str, str]:
    """A one-line title (cut to fit) and, when it had to be cut, the whole text, which
    the caller keeps in the description, so the cut loses nothing."""
    line = " ".join(text.split())
    if len(line) <= TITLE_CHARS:
        return line, ""
    return line[: TITLE_CHARS - 1].rstrip() + "…", line


def ascii_slug(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", plain.lower()).strip("-")


def short_hash(text: str, length: int = 6) -> str:
    return canon.digest_bytes(text.encode("utf-8"))[:length]


def change_id(text: str, prefix: str = "") -> str:
    """The Ithaca change id for a peer unit: a lowercase slug (``add-2fa``), the same on
    every run; a name with no usable letters gets a short hash of itself."""
    base = ascii_slug(text)
    if not base:
        base = short_hash(text)
    found = f"{prefix}{base}"
    if len(found) > 63:
        found = f"{found[:56].rstrip('-')}-{short_hash(text)}"
    if len(found) < 2:
        found = f"{found}-{short_hash(text)}"
    return found


def task_id(change: str | None, local: str) -> str:
    """The Ithaca task id ``<change>.<peer id>`` (the peer id alone for tasks of no
    change), kept within 64 characters by a short hash when it would not fit."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", local).strip("-.") or short_hash(local)
    found = cleaned if change is None else f"{change}.{cleaned}"
    if TASK_ID.match(found):
        return found
    if len(cleaned) > 40:
        cleaned = f"{cleaned[:33]}-{short_hash(local)}"
    if change is None:
        return cleaned if TASK_ID.match(cleaned) else f"t{short_hash(local)}-{cleaned}"[:64]
    room = 64 - len(cleaned) - 8
    return f"{change[:room].rstrip('-')}-{short_hash(change)}.{cleaned}"


def humanize(slug: str) -> str:
    """``add-two-factor`` → ``Add two factor``."""
    words = re.sub(r"[-_]+", " ", slug).strip()
    return words[:1].upper() + words[1:] if words else slug


_PATH = re.compile(
    r"(?<![\w/.:-])((?:[A-Za-z0-9_.-]+/)+(?:[A-Za-z0-9_-][A-Za-z0-9_.-]*\.[A-Za-z0-9]{1,10}"
    r"(?![\w/])|(?![\w.-])))"
)


def paths_in(text: str) -> list[str]:
    """The file paths a task's text names (``src/models/user.py``, ``docs/``), as safe
    relative paths: spec-kit asks for "exact file paths in descriptions", and declared
    files let Ithaca's plan run tasks side by side. URLs and absolute paths are left out."""
    found = set()
    for match in _PATH.finditer(text):
        candidate = match.group(1)
        if candidate in ("./", "../") or candidate.startswith("//"):
            continue
        try:
            found.add(layout.relative(candidate, ""))
        except IthacaError:
            continue
    return sorted(found)[:MAX_FILES]


def first_heading(text: str) -> str | None:
    """The first ``# `` heading of a Markdown text, if it has one."""
    for line in text.split("\n"):
        if line.startswith("# "):
            return line[2:].strip() or None
    return None


def placeholder_verification(peer: str, task: str) -> list[str]:
    """The verification of a task its peer gave none: a command that fails and says why,
    so no worker can pass it without a real check being set first."""
    return [
        "sh",
        "-c",
        f"echo 'ithaca import: {peer} gave task {task} no verification command; set one"
        f" with ithaca record task_contract revise' >&2; exit 1",
    ]


# --- settling the tasks ------------------------------------------------------------------------


def settle(source: Source) -> list[tuple[Unit, Task]]:
    """Resolve every dependency and parent to Ithaca ids and return the tasks to import
    in an order where each follows its parent and what it depends on.

    ``IMPORT_DEP_UNKNOWN`` names every dependency on a task the source does not hold;
    ``IMPORT_DEP_CYCLE`` the first cycle found. Dependencies on finished work are met and
    left out (``Task.met``); so is one on the task's own parent, which in Ithaca completes
    only when its children have."""
    index: dict[tuple[str, str], tuple[Unit, Task]] = {}
    ithaca_ids: dict[str, str] = {}
    changes: dict[str, str] = {}
    for unit in source.units:
        if unit.id is not None:
            if unit.id in changes:
                raise _same_id("change", unit.id, [changes[unit.id], unit.peer_id], source)
            changes[unit.id] = unit.peer_id
        for task in unit.tasks:
            key = _key(source, unit, task.peer_id)
            if key in index:
                raise InvalidInput(
                    "IMPORT_SOURCE_INVALID",
                    f"{source.origin}: task {task.peer_id} appears twice in {unit.peer_id};"
                    f" give each task its own id in {source.name} and run the import again",
                    {"task": task.peer_id, "unit": unit.peer_id},
                )
            index[key] = (unit, task)
            if not _skipped(unit, task):
                if task.id in ithaca_ids:
                    raise _same_id("task", task.id, [ithaca_ids[task.id], task.peer_id], source)
                ithaca_ids[task.id] = task.peer_id
    missing: list[dict[str, str]] = []
    chosen: list[tuple[Unit, Task]] = []
    for unit in source.units:
        for task in unit.tasks:
            if _skipped(unit, task):
                continue
            chosen.append((unit, task))
            _resolve_parent(source, index, unit, task, missing)
            _resolve_deps(source, index, unit, task, missing)
    if missing:
        shown = "; ".join(f"{item['task']} → {item['depends_on']}" for item in missing[:10])
        named = "dependency names" if len(missing) == 1 else "dependencies name"
        raise InvalidInput(
            "IMPORT_DEP_UNKNOWN",
            f"{source.origin}: {len(missing)} {named}"
            f" a task the source does not hold ({shown}); fix the dependency in"
            f" {source.name} (or add the task){source.dep_hint} and run the import again",
            {"missing": missing},
        )
    by_id = {task.id: (unit, task) for unit, task in chosen}
    _refuse_cycles(source, by_id)
    return _ordered(chosen, by_id)


def _key(source: Source, unit: Unit, peer_id: str) -> tuple[str, str]:
    return ("", peer_id) if source.global_task_ids else (unit.peer_id, peer_id)


def _skipped(unit: Unit, task: Task) -> bool:
    return unit.finished is not None or task.finished


def _same_id(kind: str, found: str, peers: list[str], source: Source) -> InvalidInput:
    return InvalidInput(
        "IMPORT_SOURCE_INVALID",
        f"{source.origin}: {kind}s {peers[0]!r} and {peers[1]!r} both map to the Ithaca id"
        f" {found!r}; rename one of them in {source.name} and run the import again",
        {"kind": kind, "id": found, "peer_ids": peers},
    )


def _label(source: Source, unit: Unit, task: Task) -> str:
    return task.peer_id if source.global_task_ids else f"{unit.peer_id}/{task.peer_id}"


def _resolve_parent(
    source: Source,
    index: dict[tuple[str, str], tuple[Unit, Task]],
    unit: Unit,
    task: Task,
    missing: list[dict[str, str]],
) -> None:
    if task.parent is None:
        return
    found = index.get(_key(source, unit, task.parent))
    if found is None:
        missing.append({"task": _label(source, unit, task), "depends_on": task.parent})
        return
    parent_unit, parent = found
    if parent_unit is not unit:
        raise InvalidInput(
            "IMPORT_SOURCE_INVALID",
            f"{source.origin}: task {task.peer_id} is a subtask of {parent.peer_id}, which"
            " belongs to another change; in Ithaca a subtask shares its parent's change."
            f" Move one of them in {source.name} and run the import again",
            {"task": task.peer_id, "parent": parent.peer_id},
        )
    if not _skipped(parent_unit, parent):
        task.parent_id = parent.id


def _resolve_deps(
    source: Source,
    index: dict[tuple[str, str], tuple[Unit, Task]],
    unit: Unit,
    task: Task,
    missing: list[dict[str, str]],
) -> None:
    ancestors = _ancestors(source, index, unit, task)
    resolved = set()
    for dep in task.deps:
        found = index.get(_key(source, unit, dep))
        if found is None:
            missing.append({"task": _label(source, unit, task), "depends_on": dep})
            continue
        dep_unit, dep_task = found
        if dep_task is task:
            raise InvalidInput(
                "IMPORT_DEP_CYCLE",
                f"{source.origin}: task {_label(source, unit, task)} depends on itself; remove"
                f" that dependency in {source.name} and run the import again",
                {"cycle": [task.peer_id, task.peer_id]},
            )
        if _skipped(dep_unit, dep_task) or dep_task.peer_id in ancestors:
            task.met.append(dep)
            continue
        resolved.add(dep_task.id)
    task.dep_ids = sorted(resolved)


def _ancestors(
    source: Source, index: dict[tuple[str, str], tuple[Unit, Task]], unit: Unit, task: Task
) -> set[str]:
    found: set[str] = set()
    parent = task.parent
    while parent is not None and parent not in found:
        found.add(parent)
        hit = index.get(_key(source, unit, parent))
        parent = None if hit is None else hit[1].parent
    return found


def _refuse_cycles(source: Source, by_id: dict[str, tuple[Unit, Task]]) -> None:
    """``IMPORT_DEP_CYCLE`` naming the first dependency cycle, in the peer's ids."""
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    for start in sorted(by_id):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(by_id[start][1].dep_ids)]
        state[start] = 1
        while stack:
            step = next(stack[-1], None)
            if step is None:
                state[path.pop()] = 2
                stack.pop()
                continue
            if state.get(step) == 1:
                loop = path[path.index(step) :] + [step]
                peers = [by_id[item][1].peer_id for item in loop]
                raise InvalidInput(
                    "IMPORT_DEP_CYCLE",
                    f"{source.origin}: the dependencies go round in a circle"
                    f" ({' → '.join(peers)}); a task in a cycle can never start. Break the"
                    f" cycle in {source.name} and run the import again",
                    {"cycle": peers},
                )
            if state.get(step) is None:
                state[step] = 1
                path.append(step)
                stack.append(iter(by_id[step][1].dep_ids))


def _ordered(
    chosen: list[tuple[Unit, Task]], by_id: dict[str, tuple[Unit, Task]]
) -> list[tuple[Unit, Task]]:
    """The tasks with each after its parent and its dependencies, else in source order."""
    placed: set[str] = set()
    visiting: set[str] = set()
    found: list[tuple[Unit, Task]] = []

    def place(item: tuple[Unit, Task]) -> None:
        task = item[1]
        if task.id in placed or task.id in visiting:
            return  # a child listed as its parent's dependency: the parent comes first
        visiting.add(task.id)
        before = ([task.parent_id] if task.parent_id else []) + task.dep_ids
        for other in before:
            if other in by_id:
                place(by_id[other])
        visiting.discard(task.id)
        placed.add(task.id)
        found.append(item)

    for item in chosen:
        place(item)
    return _parents_first(found)


def _parents_first(items: list[tuple[Unit, Task]]) -> list[tuple[Unit, Task]]:
    """``items`` with every child moved after its parent (defining a child needs the
    parent; a dependency that pointed the other way only costs a warning)."""
    emitted: set[str] = set()
    waiting: dict[str, list[tuple[Unit, Task]]] = {}
    found: list[tuple[Unit, Task]] = []

    def emit(item: tuple[Unit, Task]) -> None:
        found.append(item)
        emitted.add(item[1].id)
        for child in waiting.pop(item[1].id, []):
            emit(child)

    for item in items:
        parent = item[1].parent_id
        if parent is None or parent in emitted:
            emit(item)
        else:
            waiting.setdefault(parent, []).append(item)
    return found
