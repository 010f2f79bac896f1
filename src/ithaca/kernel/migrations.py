"""The ordered registry of schema migrations for the one state database.

Each part declares the SQL for its own tables in its manifest, with the version number
that fixes its place, so ``PRAGMA user_version`` names one schema for every process. A new
migration takes the next number; an entry, once released, never changes.
"""

from __future__ import annotations

from ithaca import collected, resolve
from ithaca.kernel.connection import LATEST_VERSION

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
else:
    from ithaca.kernel.tuples import namedtuple


class Migration(namedtuple("Migration", "version name sql_ref")):
    """One schema step; ``sql_ref`` is the "module:ATTRIBUTE" holding its SQL script."""

    __slots__ = ()

    def sql(self) -> str:
        return str(resolve(self.sql_ref))


MIGRATIONS: tuple[Migration, ...] = tuple(
    sorted((Migration(*entry) for entry in collected("MIGRATIONS")), key=lambda m: m.version)
)
if [m.version for m in MIGRATIONS] != list(range(1, LATEST_VERSION + 1)):
    raise RuntimeError("the parts' migrations must number 1, 2, 3, ... with no gap or repeat")
