"""The delivery service: the one path the MCP tools, the CLI and Python take.

Opening the service settles recoverable units left by processes that died mid-write
(docs/delivery.md, "Recoverable units"): their files are rolled back, or their
post-commit work finished, before anything new is written. Hooks never open it (they
never recover or migrate). Every delivery tool (``record``, ``context``, ``checkpoint``,
``archive``, ``sync``, ``session``, ``doctor``) is a method here, so each one runs after
that recovery.

The team ledger is kept in step here, in one place, around the tools
(docs/delivery.md, "The team ledger: sync"):

- before a mutating call (``record``, ``checkpoint``, ``archive``, ``session`` acquire
  and close; not heartbeat, not reads) the ledger file is imported when it moved since
  this checkout's last sync. Its problems never fail the call: they come back as
  ``needs_attention`` diagnostics and the call runs on the state as it was. But a call
  that would change a record the import found in conflict is refused with
  ``LEDGER_CONFLICT``: it would bury one side of the conflict under a third version.
- after a call that changed team-visible state (an accepted checkpoint, an archive, a
  change opened or cancelled, a baseline accepted, a task completed or blocked) the
  ledger is published; a publish that cannot happen leaves ``LEDGER_PUBLISH_DEFERRED``
  in the answer and the next publish catches up. A recovered unit that had committed
  (an archive a crash interrupted after T2) is published when the service opens.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery import archive
from ithaca.delivery.checkpoints import request as checkpoint_request
from ithaca.delivery.checkpoints import tool as checkpoints
from ithaca.delivery.context import tool as context
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.doctor import tool as doctor
from ithaca.delivery.ledger.projection import checkpoint_record_id
from ithaca.delivery.records import tool_batch as record
from ithaca.delivery.sessions import tool as sessions
from ithaca.delivery.sync import importer as sync_import
from ithaca.delivery.sync import inspect as sync_inspect
from ithaca.delivery.sync import publish as sync_publish
from ithaca.delivery.sync import tool as sync
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel.errors import Conflict, IthacaError
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

# The record entries whose commit changes what the ledger shares
# (the publish triggers of docs/delivery.md, "The team ledger: sync").
PUBLISHING_ENTRIES = frozenset(
    {
        ("change_contract", "open"),
        ("change_contract", "cancel"),
        ("baseline", "accept"),
        ("task_outcome", "complete"),
        ("task_outcome", "block"),
    }
)
# What an import that could not merge reports; only then are conflicted records sought.
CONFLICT_CODES = frozenset(
    {"LEDGER_CONFLICT", "LEDGER_ACTIVE_TASK_CONFLICT", "LEDGER_UNRESOLVED_CONFLICTS"}
)


class DeliveryService:
    """Durable delivery state of one project."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config
        self.units = Units(project, store)
        self.recovered = self.units.recover_dead()
        if any(found["was"] == "committed" for found in self.recovered):
            self._publish()

    def record(self, arguments: Any) -> dict[str, Any]:
        """``record {entries: [...]}`` → ``{results, journal_seq, diagnostics}``."""
        entries = record.parse(arguments)
        imported = self._import([label for entry in entries for label in _entry_records(entry)])
        answer = record.run(self.store, self.project, self.units, entries)
        changed = any(
            result["status"] == "committed"
            and result["journal_seq"] is not None
            and (result["kind"], result["action"]) in PUBLISHING_ENTRIES
            for result in answer["results"]
        )
        return self._around(answer, imported, publish=changed)

    def archive(self, arguments: Any) -> dict[str, Any]:
        """``archive {change_id, payload, idempotency_key}`` (docs/delivery.md, "archive")."""
        change_id = arguments.get("change_id") if isinstance(arguments, dict) else None
        imported = self._import([f"change:{change_id}"] if isinstance(change_id, str) else [])
        answer = archive.archive_change(self.project, self.store, self.config, arguments)
        return self._around(answer, imported, publish=not answer.get("replayed"))

    def context(self, arguments: Any) -> dict[str, Any]:
        """``context {stage?, scope?, detail?, cursor?}``: read-only
        (docs/delivery.md, "context")."""
        return context.context(self.project, self.store, self.config, arguments)

    def checkpoint(self, arguments: Any) -> dict[str, Any]:
        """``checkpoint {stage, scope, operation?, payload?, idempotency_key}``
        (docs/delivery.md, "checkpoint")."""
        request = checkpoint_request.parse(arguments)
        imported = self._import(_checkpoint_records(request))
        answer = checkpoints.checkpoint(
            self.project, self.store, self.config, arguments, units=self.units
        )
        accepted = answer.get("accepted") is True and answer["checkpoint"]["status"] == "accepted"
        fresh = not answer.get("unchanged") and not answer.get("replayed")
        return self._around(answer, imported, publish=accepted and fresh)

    def sync(self, arguments: Any) -> dict[str, Any]:
        """``sync {action, resolve?, idempotency_key?}``: the team ledger
        (docs/delivery.md, "The team ledger: sync")."""
        return sync.sync(self.project, self.store, self.config, arguments, units=self.units)

    def session(self, arguments: Any, *, force: bool = False) -> dict[str, Any]:
        """``session {operation, ...}``: execution sessions and leases
        (docs/delivery.md, "Execution: session and Worker Packets"). ``force`` is
        the user's takeover of a live lease (the CLI, after its confirmation)."""
        found = sessions.parse(arguments)
        operation = found["operation"]
        if operation in ("admission", "heartbeat"):
            return sessions.session(self.project, self.store, self.config, arguments)
        # Closing only gives a task back; it stays possible whatever the ledger holds.
        touched = [f"task:{found['task_id']}"] if operation == "acquire" else []
        imported = self._import(touched)
        answer = sessions.session(self.project, self.store, self.config, arguments, force=force)
        return self._around(answer, imported, publish=False)

    def import_peer(self, arguments: Any) -> dict[str, Any]:
        """``import {source, from?, dry_run?}``: a peer tool's work (Ultra Builder Pro,
        Task Master, OpenSpec, spec-kit) as changes and task contracts, each created by a
        keyed ``record`` entry or ``checkpoint`` here, so a second import replays."""
        from ithaca.delivery.imports.tool import import_peer

        return import_peer(self, arguments)

    def doctor(self, arguments: Any) -> dict[str, Any]:
        """``doctor {operation: inspect|repair}`` (docs/delivery.md, "doctor")."""
        return doctor.doctor(self.project, self.store, self.config, arguments)

    # --- the user's operations (the CLI, after its own confirmation) ----------------------

    def summary(self) -> dict[str, Any] | None:
        """Where delivery stands in a few fields, as the session-start breadcrumb shows it
        (the active change, its next task and session, what needs attention), or None."""
        from ithaca.delivery import resume

        with self.store.read() as conn:
            return resume.read_summary(conn)

    def set_up(self) -> list[str]:
        """``ithaca init``'s share for delivery: templates and the team ledger."""
        from ithaca.delivery.setup import set_up

        return set_up(self.project, self.store, self.units)

    def run_plan(
        self, change_id: str, *, max_parallel: int | None = None, dry_run: bool = False
    ) -> dict[str, Any]:
        """``ithaca run-plan CHANGE``: run or resume the change's accepted plan
        (docs/delivery.md, "ithaca run-plan")."""
        from ithaca.delivery.run_plan.dispatcher import run_plan

        return run_plan(
            self.project,
            self.store,
            self.config,
            change_id,
            max_parallel=max_parallel,
            dry_run=dry_run,
        )

    def reset_circuit(self, task_id: str) -> dict[str, Any]:
        """``ithaca session reset-circuit TASK``: the task may run again
        (docs/delivery.md, "Execution: session and Worker Packets")."""
        from ithaca.delivery.sessions.close import reset_circuit

        return reset_circuit(self.store, task_id)

    def ledger_edits(self) -> tuple[str, int, list[str]]:
        """The hand edits in the ledger file, for the user to review before a rehash:
        ``(state digest, how many records, the diff lines)``."""
        from ithaca.delivery.sync import rehash

        edits = rehash.read_edits(self.project)
        lines = list(rehash.diff(self.project, self.store, edits))
        return edits.ledger.state_digest, len(edits.edited), lines

    def rehash(self, state_digest: str, idempotency_key: str) -> dict[str, Any]:
        """``sync import --rehash``: accept the reviewed hand edits
        (user only; docs/delivery.md, "The team ledger: sync")."""
        return sync.rehash(
            self.project, self.store, self.config, state_digest, idempotency_key, units=self.units
        )

    def register_merge_driver(self, command: str | None = None) -> list[str]:
        """Register the ledger's Git merge driver; what it changed
        (docs/delivery.md, "The team ledger: sync")."""
        from ithaca.delivery.ledger.driver_setup import register

        return register(self.project, command)

    # --- the team ledger around the tools --------------------------------------------------

    def _import(self, touched: list[str]) -> list[Diagnostic]:
        """Import what the ledger brings; ``LEDGER_CONFLICT`` when the import found one of
        the ``touched`` records (``type:id``) in conflict."""
        try:
            notes = sync_import.auto_import(self.project, self.store, self.units)
        except IthacaError as exc:  # an unreadable ledger path: report it, go on
            notes = [diagnostic(exc.code, "needs_attention", exc.message)]
        if touched and any(note["code"] in CONFLICT_CODES for note in notes):
            with self.store.read() as conn:
                found = sync_inspect.inspect_ledger(conn, self.project)
            conflicted = {f"{clash['type']}:{clash['id']}" for clash in found["conflicts"]}
            hit = sorted(set(touched) & conflicted)
            if hit:
                raise Conflict(
                    "LEDGER_CONFLICT",
                    f"{', '.join(hit)} changed both here and in the team ledger; choose a side"
                    " first (`ithaca sync import --resolve TYPE:ID=ours|theirs`)",
                    {"records": hit},
                )
        return notes

    def _publish(self) -> list[Diagnostic]:
        return sync_publish.auto_publish(self.project, self.store, self.units)

    def _around(
        self, answer: dict[str, Any], imported: list[Diagnostic], *, publish: bool
    ) -> dict[str, Any]:
        """The answer with the import's diagnostics first and the publish's last."""
        published = self._publish() if publish else []
        if not imported and not published:
            return answer
        return {**answer, "diagnostics": [*imported, *answer["diagnostics"], *published]}


def _entry_records(entry: record.Entry) -> list[str]:
    """The ledger records (``type:id``) a ``record`` entry changes."""
    data = entry.data
    if entry.kind == "baseline":
        return ["baseline:baseline"]
    if entry.kind == "task_outcome":
        return [f"task:{data['task_id']}"]
    kinds = {"change_contract": "change", "decision": "decision", "task_contract": "task"}
    if entry.kind not in kinds or "id" not in data:
        return []  # artifacts and events are not in the ledger; a new change may lack an id
    found = [f"{kinds[entry.kind]}:{data['id']}"]
    if "supersedes" in data:
        found.append(f"decision:{data['supersedes']}")
    return found


def _checkpoint_records(request: checkpoint_request.Request) -> list[str]:
    """The ledger records a checkpoint changes: its own, and a plan's change (plan.json)."""
    scope = request.scope
    if "task_id" in scope:
        scope_type, scope_id = "task", scope["task_id"]
    elif "change_id" in scope:
        scope_type, scope_id = "change", scope["change_id"]
    else:
        scope_type, scope_id = ("baseline" if scope.get("baseline") else "project"), None
    found = [f"checkpoint:{checkpoint_record_id(request.stage, scope_type, scope_id)}"]
    if request.stage == "plan" and scope_type == "change":
        found.append(f"change:{scope_id}")
    return found
