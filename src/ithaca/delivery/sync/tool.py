"""The ``sync`` tool: inspect, import, publish and migrate the team ledger
(docs/delivery.md, "The team ledger: sync").

One entry for the MCP tool, the CLI and other services: ``sync(project, store, config,
request)``. ``inspect`` reads one snapshot and writes nothing; the other actions are
idempotent recoverable units keyed by ``idempotency_key`` (the same key replays the
first answer). ``resolve`` (import only) chooses a side per conflicting record,
``{"task:T-1": "theirs"}``. After a commit the file's stat is cached in the base, so the
check before later calls need not hash an unchanged ledger.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ithaca.delivery.contract import check_request_size, validation_error
from ithaca.delivery.idempotency import Guard, request_digest
from ithaca.delivery.ledger import base as ledger_base
from ithaca.delivery.ledger import bulk as ledger_bulk
from ithaca.delivery.ledger.format import TYPES
from ithaca.delivery.schemas.dialect import check
from ithaca.delivery.schemas.ids import IDEMPOTENCY_KEY
from ithaca.delivery.sync import importer as sync_import
from ithaca.delivery.sync import inspect as sync_inspect
from ithaca.delivery.sync import migrate as sync_migrate
from ithaca.delivery.sync import publish as sync_publish
from ithaca.delivery.sync import rehash as sync_rehash
from ithaca.delivery.units.plans import Plan, flat
from ithaca.delivery.units.recoverable import Units
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

TOOL = "sync"
ACTIONS = ("inspect", "import", "publish", "migrate")
SIDES = ("ours", "theirs")

SYNC_DESCRIPTION = (
    "Team ledger .ithaca/tasks/tasks.json: inspect (read-only), import (per-record merge; "
    'resolve {"type:id": ours|theirs}), publish, migrate. Mutations need idempotency_key.'
)

SYNC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "resolve": {"type": "object"},
        "idempotency_key": IDEMPOTENCY_KEY,
    },
    "required": ["action"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Request:
    action: str
    resolve: dict[str, str]
    key: str | None


def parse(arguments: Any) -> Request:
    """The request, checked: ``resolve`` only with import, a key for every mutation."""
    if not isinstance(arguments, dict):
        raise validation_error("", "WRONG_TYPE", "expected an object with action")
    check_request_size(arguments)
    request = check(SYNC_SCHEMA, arguments)
    action = request["action"]
    resolve = request.get("resolve", {})
    if resolve and action != "import":
        raise validation_error("/resolve", "NOT_ALLOWED", "resolve goes with action import")
    for label, side in resolve.items():
        kind, _, name = label.partition(":")
        if kind not in TYPES or not name:
            raise validation_error(
                f"/resolve/{label}",
                "WRONG_FORMAT",
                f"name a record as TYPE:ID, TYPE one of {TYPES}",
            )
        if side not in SIDES:
            raise validation_error(f"/resolve/{label}", "NOT_ALLOWED", "must be ours or theirs")
    key = request.get("idempotency_key")
    if key is None and action != "inspect":
        raise validation_error("/idempotency_key", "MISSING_FIELD", f"{action} needs one")
    return Request(action, dict(resolve), key)


def sync(
    project: Project,
    store: Store,
    config: dict[str, Any],
    arguments: Any,
    *,
    units: Units | None = None,
) -> dict[str, Any]:
    """``sync {action, resolve?, idempotency_key?}`` → the action's answer with
    ``diagnostics`` and ``journal_seq``."""
    request = parse(arguments)
    with ledger_bulk.paused():
        return _run(project, store, request, units)


def rehash(
    project: Project,
    store: Store,
    config: dict[str, Any],
    expected_state_digest: str,
    key: str,
    *,
    units: Units | None = None,
) -> dict[str, Any]:
    """The user-only ``import --rehash``, once the user confirmed the edits
    ``sync_rehash.diff`` showed: the file rewritten with fresh digests, then imported
    (under ``key`` and ``key.import``)."""
    runner = units or Units(project, store)
    digest = request_digest(TOOL, "rehash", {"state_digest": expected_state_digest})
    answer, _ = runner.run_keyed(
        Guard(key, TOOL, digest),
        lambda conn: sync_rehash.plan(conn, project, expected_state_digest),
        "sync import --rehash",
        {"action": "import"},
    )
    request = {"action": "import", "idempotency_key": f"{key}.import"}
    imported = sync(project, store, config, request, units=runner)
    return {**imported, "rehashed": answer["result"]["rehashed"]}


def _run(project: Project, store: Store, request: Request, units: Units | None) -> dict[str, Any]:
    if request.action == "inspect":
        with store.read() as conn:
            return sync_inspect.inspect_ledger(conn, project)
    assert request.key is not None
    runner = units or Units(project, store)
    normalised = {"resolve": request.resolve} if request.action == "import" else {}
    guard = Guard(request.key, TOOL, request_digest(TOOL, request.action, normalised))
    answer, replayed = runner.run_keyed(
        guard,
        lambda conn: _prepare(conn, project, request),
        f"sync {request.action}",
        {"action": request.action},
    )
    if replayed:
        return {**flat(answer), "replayed": True}
    ledger_base.remember_stat(store, project.state_root)
    return flat(answer)


def _prepare(conn: sqlite3.Connection, project: Project, request: Request) -> Plan:
    if request.action == "import":
        return sync_import.plan(conn, project, request.resolve)
    if request.action == "publish":
        return sync_publish.plan(conn, project)
    return sync_migrate.plan(conn, project)
