"""Why an event gets the bundle it gets, record by record (docs/protocols.md, "Writing a
team protocol").

This answers "why did this prompt get these rules?" and changes nothing. It shows each
record's status for the event (matched, no match and on which keys, disabled, corrupt),
where each selector value came from, the constraints in effect and whether the bundle
would load, so that it still explains a store a lookup refuses.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

from ithaca.kernel.errors import IthacaError
from ithaca.protocols import bundle, events, matcher, records, validate
from ithaca.protocols.checked_rows import stored_rows

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService


def explain(service: ProtocolsService, event_id: str) -> dict[str, Any]:
    """Why an event gets the bundle it gets, record by record."""
    event = service.get_event(event_id)
    conn = service.store.connection()
    values = matcher.selector_values(event)
    seed_rows = records.seed_records(conn)
    entries = []
    effective = []
    for stored in stored_rows(service):
        entry: dict[str, Any] = {"id": stored.protocol_id, "priority": stored.priority}
        record = stored.record
        if record is None:
            entry.update(status="corrupt", problem=stored.problem, detail=stored.detail)
        else:
            entry.update(scope=record["scope"], source=record["source"])
            if not record["enabled"]:
                entry["status"] = "disabled"
            elif matcher.matches(record["selector"], values):
                entry["status"] = "matched"
                effective += [
                    {"protocolId": record["id"], "index": index, "constraint": constraint}
                    for index, constraint in enumerate(
                        records.effective_constraints(record, seed_rows)
                    )
                ]
            else:
                entry["status"] = "no-match"
                entry["mismatches"] = matcher.mismatches(record["selector"], values)
        entries.append(entry)
    return {
        "eventId": event["id"],
        "selectorValues": values,
        "sources": _value_sources(conn, event["id"]),
        "records": entries,
        "effectiveConstraints": effective,
        "load": _would_load(conn, event, service.workflows),
    }


def _value_sources(conn: sqlite3.Connection, event_id: str) -> dict[str, str]:
    """Where each selector value came from. Context values carry their recorded source;
    connector, kind and user come from the admitting path (``hook``, ``user`` or
    ``system``)."""
    admitted_by = conn.execute(
        "SELECT admitted_by FROM protocol_events WHERE id = ?", (event_id,)
    ).fetchone()[0]
    context = events.context_sources(conn, event_id)
    return {key: context.get(key, admitted_by) for key in validate.SELECTOR_KEYS}


def _would_load(
    conn: sqlite3.Connection, event: dict[str, Any], workflows: frozenset[str]
) -> dict[str, Any]:
    try:
        computed = bundle.compute(conn, event, workflows)
    except IthacaError as exc:
        return {"ok": False, "error": exc.to_dict()}
    return {
        "ok": True,
        "protocolIds": [protocol["id"] for protocol in computed["protocols"]],
        "revision": computed["revision"],
        "digest": computed["digest"],
    }
