"""The ordered registry of schema migrations for the one state database.

Each part contributes SQL for its own tables; the registry fixes their order so
``PRAGMA user_version`` names one schema for every process. Later parts append entries;
an entry, once released, never changes.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
else:
    from ithaca.kernel.tuples import namedtuple


class Migration(namedtuple("Migration", "version name sql_ref")):
    """One schema step; ``sql_ref`` is the "module:ATTRIBUTE" holding its SQL script."""

    __slots__ = ()

    def sql(self) -> str:
        from importlib import import_module  # hooks read LATEST_VERSION only

        module, _, attribute = self.sql_ref.partition(":")
        return str(getattr(import_module(module), attribute))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "kernel.initial", "ithaca.kernel.tables:KERNEL_V1"),
    Migration(2, "protocols.initial", "ithaca.protocols.tables:PROTOCOLS_V1"),
    Migration(3, "validators.initial", "ithaca.validators.tables:VALIDATORS_V1"),
    Migration(4, "ulysses.initial", "ithaca.ulysses.tables:ULYSSES_V1"),
    Migration(5, "knowledge.initial", "ithaca.ulysses.knowledge_tables:KNOWLEDGE_V1"),
    Migration(6, "delivery.initial", "ithaca.delivery.tables:DELIVERY_V1"),
    Migration(7, "ultragoal.initial", "ithaca.ultragoal.tables:ULTRAGOAL_V1"),
    Migration(8, "delivery.ledger", "ithaca.delivery.ledger.tables:LEDGER_V1"),
    Migration(9, "delivery.sessions", "ithaca.delivery.sessions.tables:DELIVERY_SESSIONS_V1"),
    Migration(10, "kernel.mcp_call_tickets", "ithaca.kernel.mcp_calls:SCHEMA"),
    Migration(11, "kernel.lockdown", "ithaca.kernel.lockdown:SCHEMA"),
    Migration(12, "ultragoal.review_base", "ithaca.ultragoal.tables:ULTRAGOAL_REVIEW_BASE"),
)

LATEST_VERSION = MIGRATIONS[-1].version
