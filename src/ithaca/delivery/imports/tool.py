"""Planning an import against the store and running it through the delivery service.

``import_peer`` reads the source (``shared.Source``), settles its tasks, and turns every
item into the request an agent would send: ``record change_contract open``, ``record
task_contract define`` (dependencies and parents as Ithaca ids), ``record decision
accept``, ``record artifact bind`` for the peer's documents and the mapping file, and
``checkpoint`` accept. Each request carries an idempotency key made from the format, the
peer unit and the peer item's id — not from where the file lies, so a moved or freshly
cloned source is still recognised — and the plan looks every key up first:

- a key never used, and no record at that id → ``created``;
- the key used for this very request → ``unchanged`` (nothing is sent);
- the key used for another request: the source changed since it was imported → the
  item ``differs``; the fields that differ from Ithaca's record are listed and nothing
  is changed (Ithaca's contract may have moved on; a revise is the user's call);
- no key, but an equal record already there (a teammate imported it and the team
  ledger brought it) → ``present``; an unequal one → ``IMPORT_ID_TAKEN``, before
  anything is written.

Documents and the mapping file are keyed by their content too, so a changed one is bound
again (``updated``: the artifact supersedes the old one, which stays in the history).

The mapping from peer ids to Ithaca ids is recorded where the reference gives a change
its own files: ``changes/active/<change>/delivery/import-map.json``, an artifact of kind
``delivery_note`` bound with its digest, travelling with the change into its archive.
Every task contract's description and every decision's ``provenance.evidence_refs`` also
name their peer origin, so the record itself says where it came from.

``dry_run`` stops after the plan: the same answer, with ``would_create`` and
``would_update``, and nothing written. Otherwise the requests run in order (changes,
tasks, decisions, documents, checkpoints, mappings), each its own journaled transaction
through ``DeliveryService.record`` and ``checkpoint``; a failure part-way stops there
with the error, and running the import again replays what was done.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from ithaca.delivery import documents, layout
from ithaca.delivery.checkpoints import request as checkpoint_request
from ithaca.delivery.checkpoints import rows as checkpoint_rows
from ithaca.delivery.contract import MAX_ENTRIES, Diagnostic, diagnostic
from ithaca.delivery.idempotency import request_digest
from ithaca.delivery.imports import openspec, shared, speckit, taskmaster, ultra
from ithaca.delivery.imports.shared import Source, Task, Unit
from ithaca.delivery.ledger.projection import checkpoint_record_id
from ithaca.delivery.records import artifacts, changes, decisions, tasks
from ithaca.delivery.records import tool_batch as record_batch
from ithaca.delivery.schemas.dialect import check, obj, text
from ithaca.delivery.units import registry
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, InvalidInput, IthacaError, NotFound, Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

    from ithaca.delivery.service import DeliveryService

PEERS: dict[str, ModuleType] = {
    "ultra": ultra,
    "taskmaster": taskmaster,
    "openspec": openspec,
    "speckit": speckit,
}
FORMATS = tuple(PEERS)
# What the peer calls the thing that becomes one change, for people.
UNIT_WORDS = {"ultra": "change", "taskmaster": "tag", "openspec": "change", "speckit": "feature"}
MAP_PATH = "delivery/import-map.json"
# A ``record`` request may hold 50 entries and 1 MiB; batches stay well inside both.
BATCH_BYTES = 768 * 1024
MAP_SCHEMA = "ithaca.import-map/1"

ARGUMENTS = obj(
    {"source": text(4096)},
    {
        "from": {"type": "string", "enum": list(FORMATS)},
        "dry_run": {"type": "boolean", "default": False},
    },
)

# The order items run in: what a later item needs exists by then.
_ORDER = ("change", "task", "decision", "document", "checkpoint", "map")
_TO_DO = ("new", "update")


@dataclass
class Item:
    """One request of the import, with what the plan found for it."""

    kind: str  # change | task | decision | document | checkpoint | map
    peer_id: str
    id: str  # the Ithaca id (a path for documents and maps, a slot for checkpoints)
    group: str | None  # the Ithaca change it shows under; None: outside any change
    tool: str  # record | checkpoint
    request: dict[str, Any]
    digest: str
    view: dict[str, Any] = field(default_factory=dict)
    status: str = "new"  # new | update | unchanged | present | differs
    differs: list[str] = field(default_factory=list)
    taken: list[str] = field(default_factory=list)
    local: str = ""  # the peer id within its unit, for the mapping file


def import_peer(service: DeliveryService, arguments: Any) -> dict[str, Any]:
    """``{source, from?, dry_run?}`` → what was (or would be) created, item by item."""
    if not isinstance(arguments, dict):
        raise InvalidInput(
            "VALIDATION_ERROR",
            "/: expected an object with source",
            {"pointer": "", "problem": "WRONG_TYPE"},
        )
    request = check(ARGUMENTS, arguments)
    path = os.path.normpath(os.path.join(service.project.root, request["source"]))
    fmt = _format(path, request.get("from"))
    source: Source = PEERS[fmt].read(path)
    ordered = shared.settle(source)
    plan = _Plan(service, source, ordered)
    plan.build()
    if request["dry_run"]:
        return plan.answer(dry_run=True)
    plan.run()
    return plan.answer(dry_run=False)


def _format(path: str, wanted: str | None) -> str:
    if not os.path.exists(path):
        raise NotFound(
            "IMPORT_SOURCE_MISSING",
            f"{path} does not exist; give the path of the peer's project, folder or file",
            {"path": path},
        )
    if wanted is not None:
        return wanted
    found = [name for name, module in PEERS.items() if module.locate(path) is not None]
    if len(found) == 1:
        return found[0]
    if not found:
        raise InvalidInput(
            "IMPORT_FORMAT_UNKNOWN",
            f"cannot tell which tool wrote {path}: it holds none of .ultra/tasks/tasks.json"
            " (Ultra Builder Pro), .taskmaster/tasks/tasks.json (Task Master),"
            " openspec/changes/ (OpenSpec) or specs/<feature>/tasks.md (spec-kit). Point at"
            f" one of those, or name the format with --from {'|'.join(FORMATS)}",
            {"path": path, "formats": list(FORMATS)},
        )
    raise InvalidInput(
        "IMPORT_FORMAT_AMBIGUOUS",
        f"{path} holds more than one peer's files ({', '.join(found)}); choose one with"
        f" --from {'|'.join(found)}, or point at that tool's own folder",
        {"path": path, "formats": found},
    )


def _key(fmt: str, kind: str, *parts: str) -> str:
    """The idempotency key of one peer item: the same item, the same key, every run."""
    return f"import:{fmt}:{kind}:{canon.digest([fmt, kind, *parts])[:32]}"


class _Plan:
    """The import's items, their statuses, and (once run) their results."""

    def __init__(self, service: DeliveryService, source: Source, ordered: list[tuple[Unit, Task]]):
        self.service = service
        self.source = source
        self.ordered = ordered
        self.items: list[Item] = []
        self.notes: list[Diagnostic] = []
        self.diagnostics: list[Diagnostic] = []
        self.journal_seq: int | None = None
        self.skipped: list[dict[str, str]] = []
        self.done_keys: list[str] = []  # keys of peer-finished work (IMPORT_PEER_DONE)
        self.units = {unit.peer_id: unit for unit in source.units}
        self.tasks_by_peer: dict[tuple[str, str], tuple[Unit, Task]] = {}
        for unit in source.units:
            for task in unit.tasks:
                scope = "" if source.global_task_ids else unit.peer_id
                self.tasks_by_peer[(scope, task.peer_id)] = (unit, task)

    # --- building the requests ------------------------------------------------------------

    def build(self) -> None:
        fmt = self.source.format
        for unit in self.source.units:
            if unit.finished is not None:
                self.skipped.append(
                    {"kind": UNIT_WORDS[fmt], "peer_id": unit.peer_id, "reason": unit.finished}
                )
                if unit.id is not None:
                    self.done_keys.append(_key(fmt, "change", unit.peer_id))
                continue
            if unit.id is not None:
                self._change(unit)
            for task in unit.tasks:
                if task.finished:
                    self.skipped.append(
                        {
                            "kind": "task",
                            "peer_id": self._task_label(unit, task),
                            "reason": f"{task.status} in {self.source.name}",
                        }
                    )
                    self.done_keys.append(_key(fmt, "task", unit.peer_id, task.peer_id))
        for unit, task in self.ordered:
            self._task(unit, task)
        for decision in self.source.decisions:
            self._decision(decision)
        for unit in self.source.units:
            if unit.finished is None and unit.id is not None:
                for document in unit.documents:
                    self._document(unit, document)
        for found in self.source.checkpoints:
            self._checkpoint(found)
        self.skipped += self.source.skipped
        for unit in self.source.units:
            if unit.finished is None and unit.id is not None:
                self._map(unit)
        with self.service.store.read() as conn:
            for item in self.items:
                self._status(conn, item)
            self._refuse_conflicts(conn)
            self._peer_done(conn)
        self._notes()

    def _task_label(self, unit: Unit, task: Task) -> str:
        return task.peer_id if self.source.global_task_ids else f"{unit.peer_id}/{task.peer_id}"

    def _record_item(
        self,
        kind: str,
        peer_id: str,
        ithaca_id: str,
        group: str | None,
        entry_kind: str,
        action: str,
        data: dict[str, Any],
        key: str,
        view: dict[str, Any],
    ) -> Item:
        entry = {"kind": entry_kind, "action": action, "data": data, "idempotency_key": key}
        try:
            parsed = record_batch.parse({"entries": [entry]})[0]
        except IthacaError as exc:
            raise InvalidInput(
                "IMPORT_ITEM_INVALID",
                f"{self.source.name} {kind} {peer_id} does not fit an Ithaca {kind}"
                f" ({exc.message}); shorten or fix it in {self.source.name} and run the"
                " import again",
                {"kind": kind, "peer_id": peer_id, "cause": exc.to_dict()},
            ) from exc
        entry["data"] = parsed.data
        item = Item(
            kind,
            peer_id,
            ithaca_id,
            group,
            "record",
            entry,
            request_digest("record", f"{entry_kind}.{action}", parsed.data),
            view,
        )
        self.items.append(item)
        return item

    def _change(self, unit: Unit) -> None:
        assert unit.id is not None
        data: dict[str, Any] = {
            "id": unit.id,
            "kind": unit.kind,
            "title": unit.title,
            "intent": unit.intent,
            "contract": unit.contract,
            "classification": unit.classification,
        }
        if unit.research_disposition is not None:
            data["research_disposition"] = unit.research_disposition
        self._record_item(
            "change",
            unit.peer_id,
            unit.id,
            unit.id,
            "change_contract",
            "open",
            data,
            _key(self.source.format, "change", unit.peer_id),
            {"title": unit.title, "kind": unit.kind},
        )

    def _task(self, unit: Unit, task: Task) -> None:
        assert task.verification is not None
        data: dict[str, Any] = {
            "id": task.id,
            "title": task.title,
            "verification": {"argv": task.verification},
            "description": task.description,
            "deps": task.dep_ids,
            "files_modified": task.files,
            "acceptance": [{"id": ident, "criterion": text} for ident, text in task.acceptance],
        }
        for name in ("type", "priority"):
            if getattr(task, name) is not None:
                data[name] = getattr(task, name)
        if unit.id is not None:
            data["change_id"] = unit.id
        if task.parent_id is not None:
            data["parent_id"] = task.parent_id
        view: dict[str, Any] = {
            "title": task.title,
            "deps": task.dep_ids,
            "parent_id": task.parent_id,
            "peer_status": task.status,
        }
        if task.met:
            view["deps_met"] = task.met
        item = self._record_item(
            "task",
            self._task_label(unit, task),
            task.id,
            unit.id,
            "task_contract",
            "define",
            data,
            _key(self.source.format, "task", unit.peer_id, task.peer_id),
            view,
        )
        item.local = task.peer_id

    def _decision(self, decision: shared.Decision) -> None:
        unit = None if decision.unit is None else self.units[decision.unit]
        scope: dict[str, Any] = {"baseline": True} if unit is None else {"change_id": unit.id}
        ids = {found.peer_id: found.id for found in self.source.decisions}
        data: dict[str, Any] = {
            "id": decision.id,
            "scope": scope,
            "question": decision.question,
            "recommendation": decision.recommendation,
            "selection": {"choice": decision.choice, "rationale": decision.rationale},
            "owner": decision.owner,
            "effects": decision.effects,
            "non_goals": decision.non_goals,
            "provenance": {"source": decision.source, "evidence_refs": decision.evidence_refs},
            "applied_refs": decision.applied_refs,
        }
        if decision.supersedes is not None:
            data["supersedes"] = ids[decision.supersedes]
        self._record_item(
            "decision",
            decision.peer_id,
            decision.id,
            None if unit is None else unit.id,
            "decision",
            "accept",
            data,
            _key(self.source.format, "decision", decision.peer_id),
            {"question": decision.question, "supersedes": data.get("supersedes")},
        )

    def _document(self, unit: Unit, document: shared.Document) -> None:
        assert unit.id is not None
        digest = canon.digest_bytes(document.text.encode("utf-8"))
        self._record_item(
            "document",
            document.origin,
            f"{layout.change_folder(unit.id)}/{document.path}",
            unit.id,
            "artifact",
            "bind",
            {
                "kind": document.kind,
                "scope": {"change_id": unit.id},
                "path": document.path,
                "content": document.text,
                "role": f"imported from {self.source.name}",
            },
            _key(self.source.format, "document", unit.peer_id, document.path, digest),
            {"artifact_kind": document.kind},
        )

    def _checkpoint(self, found: shared.Checkpoint) -> None:
        scope_type, scope_peer = found.scope
        scope: dict[str, Any] = {}
        group = None
        if scope_type == "baseline":
            scope = {"baseline": True}
        elif scope_type == "change":
            unit = self.units[scope_peer or ""]
            scope, group = {"change_id": unit.id}, unit.id
        elif scope_type == "task":
            hit = self.tasks_by_peer.get(("", scope_peer or ""))  # Ultra's ids are global
            if hit is None or hit[0].finished is not None or hit[1].finished:
                why = (
                    "its task is not in the source" if hit is None else "its task is finished work"
                )
                self.skipped.append({"kind": "checkpoint", "peer_id": found.peer_id, "reason": why})
                return
            scope, group = {"task_id": hit[1].id}, hit[0].id
        scope_id = scope.get("change_id") or scope.get("task_id")
        slot = checkpoint_record_id(found.stage, scope_type, scope_id)
        payload: dict[str, Any] = {"summary": found.summary}
        if found.data is not None:
            payload["data"] = found.data
        key = _key(self.source.format, "checkpoint", found.peer_id)
        arguments = {
            "stage": found.stage,
            "scope": scope,
            "operation": "accept",
            "payload": payload,
            "idempotency_key": key,
        }
        try:
            parsed = checkpoint_request.parse(arguments)
        except IthacaError as exc:
            raise InvalidInput(
                "IMPORT_ITEM_INVALID",
                f"{self.source.name} checkpoint {found.peer_id} does not fit an Ithaca"
                f" checkpoint ({exc.message}); fix it in {self.source.name} and run the import"
                " again",
                {"kind": "checkpoint", "peer_id": found.peer_id, "cause": exc.to_dict()},
            ) from exc
        digest = request_digest("checkpoint", parsed.operation, parsed.normalised())
        item = Item(
            "checkpoint",
            found.peer_id,
            slot,
            group,
            "checkpoint",
            arguments,
            digest,
            {"stage": found.stage, "scope": scope},
        )
        self.items.append(item)

    def _map(self, unit: Unit) -> None:
        """The change's mapping file: every peer id of the unit and its Ithaca id."""
        assert unit.id is not None
        records = [
            {"kind": item.kind, "peer_id": item.local or item.peer_id, "id": item.id}
            for item in self.items
            if item.group == unit.id and item.kind != "map"
        ]
        value = {
            "schema": MAP_SCHEMA,
            "format": self.source.format,
            "peer": self.source.name,
            "source": self.source.origin,
            "unit": unit.peer_id,
            "change": unit.id,
            "records": records,
            "not_imported": [
                {
                    "kind": "task",
                    "peer_id": task.peer_id,
                    "reason": f"{task.status} in {self.source.name}",
                }
                for task in unit.tasks
                if task.finished
            ],
        }
        content = documents.pretty_json(value).decode("utf-8")
        self._record_item(
            "map",
            unit.peer_id,
            f"{layout.change_folder(unit.id)}/{MAP_PATH}",
            unit.id,
            "artifact",
            "bind",
            {
                "kind": "delivery_note",
                "scope": {"change_id": unit.id},
                "path": MAP_PATH,
                "content": content,
                "role": "import_map",
            },
            _key(self.source.format, "map", unit.peer_id, canon.digest_bytes(content.encode())),
            {},
        )

    def _notes(self) -> None:
        # How the source was read (texts cut, evidence left behind) matters only for
        # the records this import makes.
        if any(item.status in _TO_DO for item in self.items):
            self.notes[:0] = self.source.notes
        fresh = [item for item in self.items if item.kind == "task" and item.status == "new"]
        placeholders = [
            item.id
            for item in fresh
            if "ithaca import:" in " ".join(item.request["data"]["verification"]["argv"])
        ]
        if placeholders:
            shown = ", ".join(placeholders[:5]) + (" …" if len(placeholders) > 5 else "")
            self.notes.append(
                diagnostic(
                    "IMPORT_VERIFICATION_MISSING",
                    "warning",
                    f"{len(placeholders)} task(s) came from {self.source.name} without a"
                    f" verification command ({shown}); each has one that fails until a real"
                    " one is set with `ithaca record task_contract revise`",
                )
            )
        met = sum(len(item.view.get("deps_met", [])) for item in fresh)
        if met:
            self.notes.append(
                diagnostic(
                    "IMPORT_DEPS_MET",
                    "info",
                    f"{met} dependenc{'y' if met == 1 else 'ies'} on work {self.source.name}"
                    f" has finished (or on the task's own parent) {'was' if met == 1 else 'were'}"
                    " met already and left out",
                )
            )

    # --- what the store already holds ------------------------------------------------------

    def _status(self, conn: sqlite3.Connection, item: Item) -> None:
        key = item.request["idempotency_key"]
        row = conn.execute(
            "SELECT request_digest FROM delivery_idempotency WHERE key = ?", (key,)
        ).fetchone()
        if row is not None and row[0] == item.digest:
            item.status = "unchanged"
            return
        if item.kind in ("document", "map"):
            current = artifacts.current_at(conn, "copy", item.id)
            wanted = canon.digest_bytes(item.request["data"]["content"].encode("utf-8"))
            if current is None:
                item.status = "new"
            elif current["digest"] == wanted:
                item.status = "present"
            else:
                item.status = "update"
            return
        current_fields = self._current(conn, item)
        if current_fields is None:
            item.status = "new" if row is None else "differs"
            if row is not None:
                item.differs = ["(removed here)"]
            return
        wanted_fields = self._wanted(item)
        different = sorted(
            name for name in wanted_fields if wanted_fields[name] != current_fields.get(name)
        )
        if not different:
            item.status = "present"
        elif row is not None:
            item.status, item.differs = "differs", different
        elif item.kind == "checkpoint":
            item.status, item.differs = "differs", different
            self.notes.append(
                diagnostic(
                    "IMPORT_CHECKPOINT_EXISTS",
                    "needs_attention",
                    f"Ithaca already has an accepted {item.view['stage']} checkpoint for"
                    f" {item.id}; it is kept, and the {self.source.name} one"
                    f" ({item.peer_id}) is not imported",
                    item.id,
                )
            )
        else:
            item.status, item.taken = "taken", different

    def _current(self, conn: sqlite3.Connection, item: Item) -> dict[str, Any] | None:
        """The comparable fields of the record already at the item's id, if any."""
        if item.kind == "change":
            row = changes.find(conn, item.id)
            if row is None:
                return None
            # The registered digest; or, for a change the team ledger brought, the file
            # Git brought beside it.
            intent = registry.lookup(conn, layout.intent_path(item.id))
            digest = intent["digest"] if intent is not None else None
            if digest is None:
                digest = registry.file_digest(
                    self.service.project.state_root, layout.intent_path(item.id)
                )
            return {
                **{name: row[name] for name in ("title", "kind", "contract", "classification")},
                "research_disposition": row["research_disposition"],
                "intent": digest,
                "status": row["status"],
            }
        if item.kind == "task":
            task = tasks.find(conn, item.id)
            if task is None:
                return None
            return {**task["contract"], "status": task["status"]}
        if item.kind == "decision":
            found = decisions.find(conn, item.id)
            if found is None:
                return None
            data = registry.read_bytes(self.service.project.state_root, found["path"])
            value = json.loads(data) if data else {}
            scope = value.get("scope") or {}
            return {
                **value,
                "scope": {"baseline": True}
                if scope.get("type") == "baseline"
                else {"change_id": scope.get("id")},
                "supersedes": value.get("supersedes"),
            }
        scope = item.request["scope"]
        scope_type = (
            "task"
            if "task_id" in scope
            else "change"
            if "change_id" in scope
            else "baseline"
            if scope.get("baseline")
            else "project"
        )
        scope_id = scope.get("task_id") or scope.get("change_id")
        accepted = checkpoint_rows.read(conn, item.request["stage"], scope_type, scope_id)
        if accepted is None:
            return None
        payload = accepted["payload"]
        return {"summary": payload.get("summary"), "data": payload.get("data")}

    def _wanted(self, item: Item) -> dict[str, Any]:
        """The comparable fields of what the source now says."""
        if item.kind == "checkpoint":
            payload = item.request["payload"]
            return {"summary": payload["summary"], "data": payload.get("data")}
        data = dict(item.request["data"])
        if item.kind == "change":
            intent = data.pop("intent")
            data.pop("id")
            data.setdefault("research_disposition", None)
            return {**data, "intent": canon.digest_bytes(documents.markdown(intent))}
        if item.kind == "task":
            return {name: value for name, value in data.items()}
        return {
            name: data.get(name)
            for name in (
                "scope",
                "question",
                "recommendation",
                "selection",
                "effects",
                "non_goals",
                "owner",
                "provenance",
                "applied_refs",
                "supersedes",
            )
        }

    def _refuse_conflicts(self, conn: sqlite3.Connection) -> None:
        taken = [item for item in self.items if item.status == "taken"]
        if taken:
            shown = "; ".join(
                f"{item.kind} {item.id} ({', '.join(item.taken)})" for item in taken[:8]
            )
            raise Conflict(
                "IMPORT_ID_TAKEN",
                f"{len(taken)} Ithaca id(s) this import maps to already hold other records"
                f" that it did not create: {shown}. Nothing was imported; bring those records"
                " in line with the source, or import into a project where the ids are free",
                {
                    "taken": [
                        {
                            "kind": item.kind,
                            "id": item.id,
                            "peer_id": item.peer_id,
                            "fields": item.taken,
                        }
                        for item in taken
                    ]
                },
            )
        closed = []
        for item in self.items:
            if item.status not in _TO_DO or item.group is None or item.kind == "change":
                continue
            row = changes.find(conn, item.group)
            if row is not None and row["status"] in ("archived", "cancelled"):
                closed.append((item, row["status"]))
        if closed:
            shown = ", ".join(f"{item.kind} {item.id} ({status})" for item, status in closed[:8])
            raise Refused(
                "IMPORT_CHANGE_CLOSED",
                f"{len(closed)} new record(s) would go into a change that is closed here:"
                f" {shown}. Nothing was imported; open a new change for that work in"
                f" {self.source.name}, or leave it out of the source",
                {
                    "records": [
                        {"kind": item.kind, "id": item.id, "change_status": status}
                        for item, status in closed
                    ]
                },
            )

    def _peer_done(self, conn: sqlite3.Connection) -> None:
        """Work imported earlier that the peer has finished since: Ithaca keeps it open."""
        for key in self.done_keys:
            row = conn.execute(
                "SELECT result FROM delivery_idempotency WHERE key = ?", (key,)
            ).fetchone()
            if row is None:
                continue
            result = json.loads(row[0]).get("result") or {}
            found = result.get("task") or result.get("change") or {}
            self.notes.append(
                diagnostic(
                    "IMPORT_PEER_DONE",
                    "needs_attention",
                    f"{found.get('id', key)} was imported earlier and is now finished in"
                    f" {self.source.name}; Ithaca keeps it open until a session completes it"
                    " with evidence (or remove it: `ithaca record task_contract remove`,"
                    " `ithaca record change_contract cancel`)",
                    found.get("id"),
                )
            )

    # --- running ------------------------------------------------------------------------------

    def run(self) -> None:
        todo = sorted(
            (item for item in self.items if item.status in _TO_DO),
            key=lambda item: _ORDER.index(item.kind),
        )
        done: list[Item] = []
        batch: list[Item] = []
        size = 0
        try:
            for item in todo:
                if item.tool == "checkpoint":
                    self._flush(batch, done)
                    answer = self.service.checkpoint(item.request)
                    self._took(answer)
                    done.append(item)
                    continue
                weight = len(canon.canonical(item.request))
                if batch and (len(batch) == MAX_ENTRIES or size + weight > BATCH_BYTES):
                    self._flush(batch, done)
                    size = 0
                batch.append(item)
                size += weight
            self._flush(batch, done)
        except IthacaError as exc:
            if not done:
                raise
            details = {**exc.details, "imported": [item.id for item in done]}
            raise type(exc)(
                exc.code,
                f"{exc.message} ({len(done)} record(s) were imported before this; run the"
                " import again once this is fixed: they will not be made twice)",
                details,
            ) from exc

    def _flush(self, batch: list[Item], done: list[Item]) -> None:
        if not batch:
            return
        answer = self.service.record({"entries": [item.request for item in batch]})
        self._took(answer)
        done.extend(batch)
        batch.clear()

    def _took(self, answer: dict[str, Any]) -> None:
        self.diagnostics += answer.get("diagnostics", [])
        seq = answer.get("journal_seq")
        if isinstance(seq, int):
            self.journal_seq = seq if self.journal_seq is None else max(self.journal_seq, seq)

    # --- the answer ------------------------------------------------------------------------------

    def answer(self, *, dry_run: bool) -> dict[str, Any]:
        word = {
            "new": "would_create" if dry_run else "created",
            "update": "would_update" if dry_run else "updated",
        }
        groups: dict[str | None, dict[str, Any]] = {}
        outside: dict[str, Any] = {"tasks": [], "decisions": [], "checkpoints": []}
        counts = {word["new"]: 0, word["update"]: 0, "unchanged": 0, "present": 0, "differs": 0}
        for item in self.items:
            status = word.get(item.status, item.status)
            counts[status] += 1
            shown: dict[str, Any] = {
                "id": item.id,
                "peer_id": item.peer_id,
                **item.view,
                "status": status,
            }
            if item.differs:
                shown["differs"] = item.differs
            if item.kind == "change":
                groups[item.id] = {
                    **shown,
                    "tasks": [],
                    "decisions": [],
                    "documents": [],
                    "checkpoints": [],
                    "map": None,
                }
                continue
            target = groups.get(item.group) if item.group is not None else None
            place = target if target is not None else outside
            if item.kind == "map":
                if target is not None:
                    target["map"] = {"path": f".ithaca/{item.id}", "status": status}
                continue
            if item.kind == "document":
                shown["path"] = f".ithaca/{item.id}"
                if target is not None:
                    target["documents"].append(shown)
                continue
            place[f"{item.kind}s"].append(shown)
        counts["skipped"] = len(self.skipped)
        return {
            "format": self.source.format,
            "peer": self.source.name,
            "source": self.source.origin,
            "unit_word": UNIT_WORDS[self.source.format],
            "dry_run": dry_run,
            "changes": list(groups.values()),
            "outside_changes": outside,
            "skipped": self.skipped,
            "counts": counts,
            "journal_seq": None if dry_run else self.journal_seq,
            "diagnostics": [*self.notes, *self.diagnostics],
        }
