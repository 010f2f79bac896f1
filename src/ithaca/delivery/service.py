"""The delivery service: the one path the MCP ``record`` tool, the CLI and Python take.

Opening the service settles recoverable units left by processes that died mid-write
(reference §3.5): their files are rolled back, or their post-commit work finished,
before anything new is written. Hooks never open it (they never recover or migrate).
Every delivery tool (``record``, ``context``, ``checkpoint``, ``archive``, ``sync``,
``session``, ``doctor``) is a method here, so each one runs after that recovery.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery import archive, checkpoints, context, doctor, record, sessions, sync
from ithaca.delivery.units import Units
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store


class DeliveryService:
    """Durable delivery state of one project."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config
        self.units = Units(project, store)
        self.recovered = self.units.recover_dead()

    def record(self, arguments: Any) -> dict[str, Any]:
        """``record {entries: [...]}`` → ``{results, journal_seq, diagnostics}``."""
        entries = record.parse(arguments)
        return record.run(self.store, self.project, self.units, entries)

    def archive(self, arguments: Any) -> dict[str, Any]:
        """``archive {change_id, payload, idempotency_key}`` (reference §10)."""
        return archive.archive(self.project, self.store, self.config, arguments)

    def context(self, arguments: Any) -> dict[str, Any]:
        """``context {stage?, scope?, detail?, cursor?}``: read-only (reference §5)."""
        return context.context(self.project, self.store, self.config, arguments)

    def checkpoint(self, arguments: Any) -> dict[str, Any]:
        """``checkpoint {stage, scope, operation?, payload?, idempotency_key}`` (§7)."""
        return checkpoints.checkpoint(
            self.project, self.store, self.config, arguments, units=self.units
        )

    def sync(self, arguments: Any) -> dict[str, Any]:
        """``sync {action, resolve?, idempotency_key?}``: the team ledger (§8)."""
        return sync.sync(self.project, self.store, self.config, arguments, units=self.units)

    def session(self, arguments: Any) -> dict[str, Any]:
        """``session {operation, ...}``: execution sessions and leases (§9)."""
        return sessions.session(self.project, self.store, self.config, arguments)

    def doctor(self, arguments: Any) -> dict[str, Any]:
        """``doctor {operation: inspect|repair}`` (§11)."""
        return doctor.doctor(self.project, self.store, self.config, arguments)
