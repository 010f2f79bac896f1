"""``load_protocols {eventId}``: the bundle an admitted event gets, recorded as loaded.

Loading fails closed and is never partial: an unknown field is refused, the selector
arguments that older skill texts pass are accepted but ignored (and said so in the
bundle's diagnostics), since Ithaca selects protocols from the admitted event alone. The
bundle is computed and its load journaled in one write, and the host session that
admitted the event is marked as having loaded it, which is what lets its mutating tools
run (strict mode).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ithaca.kernel import clock, ids, journal
from ithaca.kernel.errors import InvalidInput
from ithaca.protocols import bundle, events

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService

SELECTOR_ARGUMENTS = frozenset(
    {
        "connector",
        "actor",
        "actorId",
        "userId",
        "conversation",
        "conversationId",
        "client",
        "clientId",
        "project",
        "projectId",
        "workflow",
        "task",
        "messageKind",
        "kind",
    }
)
LOAD_FIELDS = frozenset({"eventId", "session"})


def load(service: ProtocolsService, arguments: dict[str, Any]) -> dict[str, Any]:
    """The bundle for ``arguments["eventId"]``, its load recorded."""
    ignored = []
    for key in arguments:
        if key in LOAD_FIELDS:
            continue
        if key in SELECTOR_ARGUMENTS:
            ignored.append({"code": "SELECTOR_ARGUMENT_IGNORED", "field": key})
            continue
        raise InvalidInput(
            "UNKNOWN_FIELD",
            f"load_protocols takes eventId; {key!r} is not a field",
            {"pointer": f"/{key}", "problem": "UNKNOWN_FIELD"},
        )
    session = arguments.get("session")
    if session is not None and not ids.is_session_id(session):
        raise InvalidInput(
            "INVALID_INPUT",
            "session is the host session id (letters, digits, '_' and '-')",
            {"pointer": "/session", "problem": "WRONG_TYPE"},
        )
    event_id = require_event_id(arguments.get("eventId"))
    conn = service.store.connection()
    event = events.fetch(conn, event_id)
    service.reconcile()
    with service.store.write() as tx:
        computed = bundle.compute(tx, event, service.workflows, service.bundles)
        loaded_at = clock.now()
        payload = {
            "eventId": event_id,
            "revision": computed["revision"],
            "digest": computed["digest"],
            "protocolIds": [p["id"] for p in computed["protocols"]],
        }
        journal.append(
            tx,
            actor="agent",
            kind="protocols.bundle_loaded",
            subject=event_id,
            payload=payload,
        )
        session_id = event["hostSessionId"]
        if session_id is not None:
            tx.execute(
                "UPDATE protocol_sessions SET loaded_digest = ?, loaded_at = ?,"
                " bundle_revision = ?, bundle_digest = ?, bundle_ids_json = ?,"
                " updated_at = ? WHERE host_session_id = ? AND current_event_id = ?",
                (
                    computed["digest"],
                    loaded_at,
                    computed["revision"],
                    computed["digest"],
                    json.dumps({"ids": payload["protocolIds"], "verified": None}),
                    loaded_at,
                    session_id,
                    event_id,
                ),
            )
    result = with_loaded_at(computed, loaded_at)
    if ignored:
        result["diagnostics"] = ignored
    return result


def require_event_id(event_id: Any) -> str:
    """The event id a request names; ``EVENT_ID_REQUIRED`` when it names none."""
    if not isinstance(event_id, str) or not event_id.strip():
        raise InvalidInput(
            "EVENT_ID_REQUIRED",
            "eventId is required: the id Ithaca gave this prompt",
            {"pointer": "/eventId", "problem": "REQUIRED"},
        )
    return event_id


def with_loaded_at(computed: dict[str, Any], loaded_at: str) -> dict[str, Any]:
    """The bundle as a load answers it."""
    return {
        "eventId": computed["eventId"],
        "protocols": computed["protocols"],
        "loadedAt": loaded_at,
        "revision": computed["revision"],
        "digest": computed["digest"],
        "selectorValues": computed["selectorValues"],
    }
