"""What the store holds for each shipped base protocol (docs/protocols.md, "Base protocols").

It reports, and changes nothing: reconciliation on the next open is what brings a stale
base row back in line with the shipped seeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ithaca.protocols import seeds

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService


def seed_status(service: ProtocolsService) -> dict[str, Any]:
    """Each shipped base record and what the store holds for it.

    States: ``in-sync``; ``overridden`` (a user or file record replaces it, written
    against this seed); ``overridden+drift`` (written against an older seed);
    ``missing`` (no row for the id); ``stale`` (a base row from another seed version,
    which reconciliation on the next open replaces).
    """
    conn = service.store.connection()
    stored_digest = conn.execute("SELECT seed_set_digest FROM protocol_state").fetchone()[0]
    report = []
    for seed in sorted(seeds.BASE_PROTOCOLS, key=lambda s: (-s["priority"], s["id"])):
        seed_hash = seeds.seed_hash(seed)
        row = conn.execute(
            "SELECT scope, overrides_base, base_hash, content_hash, source FROM protocols"
            " WHERE id = ?",
            (seed["id"],),
        ).fetchone()
        entry: dict[str, Any] = {
            "id": seed["id"],
            "priority": seed["priority"],
            "seedHash": seed_hash,
        }
        if row is None or (row[0] == "user" and not row[1]):
            entry["state"] = "missing"
        elif row[0] == "base":
            entry["state"] = "in-sync" if row[3] == seed_hash else "stale"
        else:
            entry["state"] = "overridden" if row[2] == seed_hash else "overridden+drift"
            entry["overrideSource"] = row[4]
        report.append(entry)
    return {
        "seedSetDigest": {"code": seeds.seed_set_digest(), "store": stored_digest},
        "inSync": stored_digest == seeds.seed_set_digest(),
        "seeds": report,
    }
