"""``record event append``: an agent's observation, journalled as ``observation.<type>``.

Observations are notes for the record (a flaky test seen, a manual check done); they
change no state and write no file, so they are a journal event and nothing else. Types
that read like Ithaca's own state transitions are reserved
(``EVENT_TYPE_RESERVED``): a reader of the journal must never mistake an agent's note
for a checkpoint, a completion or an approval. Payloads stay small (8 KiB canonical).
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.contract import validation_error
from ithaca.delivery.units.plans import Outcome, Plan
from ithaca.kernel import canon, journal
from ithaca.kernel.errors import InvalidInput
from ithaca.kernel.project import Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

PAYLOAD_BYTES = 8192
RESERVED_PREFIXES = ("ithaca_", "kernel_", "delivery_", "system_")
RESERVED_TYPES = frozenset(
    {
        "approved",
        "baseline_accepted",
        "change_archived",
        "checkpoint_accepted",
        "decision_accepted",
        "plan_accepted",
        "review_approved",
        "session_completed",
        "task_completed",
        "test_passed",
        "verified",
    }
)


def append(conn: sqlite3.Connection, project: Project, data: dict[str, Any]) -> Plan:
    event_type = data["type"]
    if event_type in RESERVED_TYPES or event_type.startswith(RESERVED_PREFIXES):
        raise InvalidInput(
            "EVENT_TYPE_RESERVED",
            f"event type {event_type!r} reads like a state change Ithaca records itself;"
            " choose a descriptive type of your own",
            {"pointer": "/type", "type": event_type},
        )
    size = len(canon.canonical(data["payload"]))
    if size > PAYLOAD_BYTES:
        raise validation_error("/payload", "TOO_LARGE", f"{size} bytes; at most {PAYLOAD_BYTES}")
    kind = f"observation.{event_type}"

    def commit(tx: sqlite3.Connection) -> Outcome:
        seq = journal.append(
            tx, actor="agent", kind=kind, subject=data.get("subject"), payload=data["payload"]
        )
        return Outcome({"event": {"seq": seq, "kind": kind}}, seq)

    return Plan("event.append", commit)
