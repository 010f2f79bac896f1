"""A change's execution plan: which tasks may run side by side, and plan.json
(docs/delivery.md, "checkpoint").

Tasks are first layered by their longest dependency path, so a task always lands after
everything it waits for. Within a layer, tasks taken in id order fill consecutive waves
greedily: a task joins the first wave whose tasks touch none of its declared files.
Paths overlap when they are equal or when one is a folder (trailing ``/``) holding the
other; a task that declares no files might touch anything, so it overlaps every task and
runs alone. The result depends only on the tasks, never on the order they were given in,
so the same plan renders the same bytes everywhere.

``split_into_waves`` itself ignores dependencies on ids that are not among the given tasks;
``plan_change`` decides which of those are fine and which stop the plan. Only open tasks
(pending, in progress, blocked) are planned: a completed dependency or one in another
change does not count, waiting for an expanded parent means waiting for its open
children, and a dependency on a task that does not exist (or was removed) is a
``PLAN_DEP_UNKNOWN`` hard conflict, as a cycle is ``PLAN_DEP_CYCLE``. ``plan.json``
(``ithaca.plan/1``) pins each task's contract digest, so a run can tell when the plan
went stale; ``plan.md`` renders it for people. Neither holds a time: the same tasks give
the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery import documents, layout
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.units.plans import TrackedWrite
from ithaca.kernel import canon

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

PLAN_SCHEMA = "ithaca.plan/1"
OPEN_STATUSES = ("pending", "in_progress", "blocked")


@dataclass(frozen=True)
class Node:
    """One task as waves see it: its id, what it waits for, which files it changes."""

    id: str
    deps: tuple[str, ...] = ()
    files: tuple[str, ...] = ()


class DependencyCycle(Exception):
    """The tasks wait on each other in a circle; ``cycle`` lists it, first id repeated."""

    def __init__(self, cycle: list[str]):
        super().__init__(" -> ".join(cycle))
        self.cycle = cycle


def paths_overlap(first: str, second: str) -> bool:
    """Whether two declared paths may name the same file (a folder ends with ``/``)."""
    if first.rstrip("/") == second.rstrip("/"):
        return True
    return (first.endswith("/") and second.startswith(first)) or (
        second.endswith("/") and first.startswith(second)
    )


def tasks_overlap(first: Node, second: Node) -> bool:
    """Whether two tasks may touch a common file; undeclared files overlap everything."""
    if not first.files or not second.files:
        return True
    return any(paths_overlap(a, b) for a in first.files for b in second.files)


def layers(nodes: Iterable[Node]) -> list[list[Node]]:
    """The tasks grouped by longest dependency path (layer 0 waits for nothing), each
    layer sorted by id; ``DependencyCycle`` when some tasks wait on each other."""
    by_id = {node.id: node for node in nodes}
    depth: dict[str, int] = {}
    for start in sorted(by_id):
        if start not in depth:
            _measure(start, by_id, depth)
    grouped: list[list[Node]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for task_id in sorted(by_id):
        grouped[depth[task_id]].append(by_id[task_id])
    return grouped


def split_into_waves(nodes: Iterable[Node]) -> list[list[str]]:
    """Task ids per wave, in run order; tasks of one wave never overlap."""
    found: list[list[str]] = []
    for layer in layers(nodes):
        filled: list[list[Node]] = []
        for node in layer:
            wave = next((w for w in filled if not any(tasks_overlap(node, o) for o in w)), None)
            if wave is None:
                filled.append([node])
            else:
                wave.append(node)
        found += [[node.id for node in wave] for wave in filled]
    return found


def _measure(start: str, by_id: dict[str, Node], depth: dict[str, int]) -> None:
    """Fill ``depth`` for ``start`` and everything below it: a depth-first walk without
    recursion (plans may be long chains), with the current path kept to name a cycle."""
    stack: list[tuple[str, list[str]]] = [(start, _known_deps(by_id[start], by_id))]
    path = [start]
    on_path = {start}
    while stack:
        current, pending = stack[-1]
        if pending:
            dep = pending.pop()
            if dep in depth:
                continue
            if dep in on_path:
                raise DependencyCycle([*path[path.index(dep) :], dep])
            stack.append((dep, _known_deps(by_id[dep], by_id)))
            on_path.add(dep)
            path.append(dep)
            continue
        deps = _known_deps(by_id[current], by_id)
        depth[current] = 1 + max((depth[dep] for dep in deps), default=-1)
        stack.pop()
        on_path.discard(current)
        path.pop()


def _known_deps(node: Node, by_id: dict[str, Node]) -> list[str]:
    return sorted({dep for dep in node.deps if dep in by_id})


# --- a change's plan --------------------------------------------------------------------------


@dataclass(frozen=True)
class Planned:
    """A change's open tasks as plan.json lists them, their waves, and what stops the plan
    being accepted (hard conflicts)."""

    tasks: list[dict[str, Any]]
    waves: list[list[str]]
    conflicts: list[Diagnostic] = field(default_factory=list)


def plan_change(conn: sqlite3.Connection, change_id: str) -> Planned:
    rows = {
        found[0]: {
            "status": found[1],
            "parent_id": found[2],
            "contract": json.loads(found[3]),
            "contract_digest": found[4],
        }
        for found in conn.execute(
            "SELECT id, status, parent_id, contract, contract_digest FROM delivery_tasks"
            " WHERE change_id = ?",
            (change_id,),
        )
    }
    children: dict[str, list[str]] = {}
    for task_id, row in rows.items():
        if row["parent_id"] is not None:
            children.setdefault(row["parent_id"], []).append(task_id)
    conflicts: list[Diagnostic] = []

    def counted(task_id: str, dep: str) -> set[str]:
        """The open tasks of this change that waiting for ``dep`` means waiting for."""
        known = rows.get(dep)
        status = known["status"] if known else _status_elsewhere(conn, dep)
        if known is not None and status in OPEN_STATUSES:
            return {dep}
        if known is not None and status == "expanded":
            return set().union(*(counted(task_id, child) for child in children.get(dep, [])))
        if status is None or status == "removed":
            conflicts.append(
                diagnostic(
                    "PLAN_DEP_UNKNOWN",
                    "hard_conflict",
                    f"task {task_id} depends on {dep}, which is not a task",
                    task_id,
                )
            )
        return set()

    open_ids = sorted(task_id for task_id, row in rows.items() if row["status"] in OPEN_STATUSES)
    nodes = []
    for task_id in open_ids:
        contract = rows[task_id]["contract"]
        deps = set().union(*(counted(task_id, dep) for dep in contract["deps"]))
        nodes.append(Node(task_id, tuple(sorted(deps)), tuple(contract["files_modified"])))
    found_waves: list[list[str]] = []
    try:
        found_waves = split_into_waves(nodes)
    except DependencyCycle as cycle:
        conflicts.append(
            diagnostic(
                "PLAN_DEP_CYCLE",
                "hard_conflict",
                f"tasks wait on each other: {' -> '.join(cycle.cycle)}",
                cycle.cycle[0],
            )
        )
    listed = [
        {
            "id": task_id,
            "title": rows[task_id]["contract"]["title"],
            "deps": rows[task_id]["contract"]["deps"],
            "files_modified": rows[task_id]["contract"]["files_modified"],
            "contract_digest": rows[task_id]["contract_digest"],
        }
        for task_id in open_ids
    ]
    return Planned(listed, found_waves, conflicts)


def tasks_fingerprint(conn: sqlite3.Connection, change_id: str) -> str:
    """What a plan was computed from: the change's tasks, their status and contracts."""
    return canon.digest(
        [
            list(found)
            for found in conn.execute(
                "SELECT id, status, contract_digest FROM delivery_tasks WHERE change_id = ?"
                " ORDER BY id",
                (change_id,),
            )
        ]
    )


def plan_files(
    change_id: str, revision: int, planned: Planned
) -> tuple[list[TrackedWrite], dict[str, Any]]:
    """plan.json and plan.md of a change at checkpoint ``revision``, and the document."""
    body = {
        "schema": PLAN_SCHEMA,
        "change_id": change_id,
        "checkpoint_revision": revision,
        "tasks": planned.tasks,
        "waves": [
            {"index": number, "parallel": len(members) > 1, "tasks": members}
            for number, members in enumerate(planned.waves, start=1)
        ],
    }
    document = {**body, "digest": canon.digest(body)}
    folder = layout.change_folder(change_id)
    writes = [
        TrackedWrite(
            f"{folder}/plan.json", documents.pretty_json(document), "plan", "change", change_id
        ),
        TrackedWrite(
            f"{folder}/plan.md",
            documents.markdown(plan_markdown(document)),
            "plan",
            "change",
            change_id,
        ),
    ]
    return writes, document


def plan_markdown(document: dict[str, Any]) -> str:
    """plan.md: the plan document for people, wave by wave."""
    by_id = {task["id"]: task for task in document["tasks"]}
    lines = [
        f"# Plan: {document['change_id']}",
        "",
        f"Checkpoint revision {document['checkpoint_revision']}, plan digest"
        f" `{document['digest'][:16]}`. Written by Ithaca from plan.json; do not edit.",
        "",
    ]
    if not document["waves"]:
        lines += ["No open tasks.", ""]
    for wave in document["waves"]:
        mode = "in parallel" if wave["parallel"] else "alone"
        lines += [f"## Wave {wave['index']} ({mode})", ""]
        for task_id in wave["tasks"]:
            task = by_id[task_id]
            files = ", ".join(f"`{path}`" for path in task["files_modified"]) or "not declared"
            lines += [f"- `{task_id}` {task['title']}", f"  - files: {files}"]
            if task["deps"]:
                lines.append(f"  - after: {', '.join(task['deps'])}")
        lines.append("")
    return "\n".join(lines)


def _status_elsewhere(conn: sqlite3.Connection, task_id: str) -> str | None:
    found = conn.execute("SELECT status FROM delivery_tasks WHERE id = ?", (task_id,)).fetchone()
    return None if found is None else str(found[0])
