"""Ledger records an import takes, checked and their files found: the read half
(docs/delivery.md, "The team ledger: sync").

An import applies the records a merge takes from theirs in two halves, like every unit.
This is the first: ``prepare`` runs on a read snapshot, checks each taken body's shape
(``LEDGER_UNPARSEABLE``) and reads the tracked files the records name (a change's
documents, a decision's file) so they can be registered with the digest they verify at.
A file not yet on disk, or differing, stays unregistered with a warning; ``doctor``
reports it until it arrives. ``ithaca.delivery.ledger.apply`` writes the rows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ithaca.delivery.checkpoints import rows as checkpoints
from ithaca.delivery.contract import Diagnostic, diagnostic
from ithaca.delivery.ledger.format import LEDGER_PATH, Key, Record, is_digest
from ithaca.delivery.ledger.projection import (
    CHECKPOINT_BODY,
    CHECKPOINT_COLUMNS,
    checkpoint_record_id,
)
from ithaca.delivery.units import registry
from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt

PUBLISHED_STATUSES = ("pending", "blocked", "expanded", "completed")
# A baseline row's fields, as a baseline record's ``accepted`` and ``open`` hold them.
BASELINE_FIELDS = (
    "id",
    "revision",
    "status",
    "project_name",
    "mode",
    "scope",
    "specs",
    "evidence",
    "gaps",
    "unknowns",
    "classification",
    "approval",
)

Registration = tuple[str, str, str, str, str | None]


@dataclass
class Prepared:
    """Taken records, checked, and the files they name that verify on disk."""

    taken: dict[Key, Record | None]
    registrations: list[Registration] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)


def prepare(state_root: str, taken: dict[Key, Record | None]) -> Prepared:
    """Check every taken body and find the files to register; reads files, writes none."""
    prepared = Prepared(taken)
    for key, found in taken.items():
        if found is None:
            continue
        _CHECKS[key[0]](found)
        if key[0] == "change":
            for item in found.body["files"]:
                _register_if_verified(
                    prepared, state_root, item["path"], item["digest"], item["kind"], found
                )
        elif key[0] == "decision":
            _register_decision(prepared, state_root, found)
    return prepared


# --- checks -------------------------------------------------------------------------------


def _check_task(found: Record) -> None:
    body = found.body
    get = body.get
    if (
        get("id") == found.id
        and get("status") in PUBLISHED_STATUSES
        and isinstance(get("change_id", ""), str)
        and isinstance(get("parent_id", ""), str)
        and isinstance(get("outcome", {}), dict)
    ):
        return  # the common case, checked at once: 10,000 tasks pass through here
    _expect(found, body.get("id") == found.id, "id must equal the record's id")
    _expect(found, body.get("status") in PUBLISHED_STATUSES, "status is not a published one")
    for name in ("change_id", "parent_id"):
        _expect(found, isinstance(body.get(name, ""), str), f"{name} must be a string")
    _expect(found, isinstance(body.get("outcome", {}), dict), "outcome must be an object")


def _check_change(found: Record) -> None:
    body = found.body
    _expect(found, body.get("id") == found.id, "id must equal the record's id")
    for name in ("kind", "status", "title", "path"):
        _expect(found, isinstance(body.get(name), str), f"{name} must be a string")
    for name in ("contract", "classification"):
        _expect(found, isinstance(body.get(name), dict), f"{name} must be an object")
    _expect(found, _is_revision(body.get("revision")), "revision must be a whole number from 1")
    files = body.get("files")
    _expect(
        found,
        isinstance(files, list)
        and all(
            isinstance(item, dict)
            and isinstance(item.get("path"), str)
            and isinstance(item.get("kind"), str)
            and is_digest(item.get("digest"))
            for item in files
        ),
        "files must list {path, digest, kind}",
    )


def _check_decision(found: Record) -> None:
    body = found.body
    scope = body.get("scope")
    _expect(found, body.get("id") == found.id, "id must equal the record's id")
    _expect(
        found,
        isinstance(scope, dict) and scope.get("type") in ("baseline", "change"),
        "scope must be {type, id}",
    )
    for name in ("path", "question", "status"):
        _expect(found, isinstance(body.get(name), str), f"{name} must be a string")
    _expect(found, is_digest(body.get("digest")), "digest must be a digest")


def _check_checkpoint(found: Record) -> None:
    body = found.body
    _expect(found, set(body) == set(CHECKPOINT_BODY), "is not an accepted checkpoint")
    named = checkpoint_record_id(body["stage"], body["scope_type"], body["scope_id"])
    _expect(found, named == found.id, "its id does not name its stage and scope")
    checkpoints.verified(checkpoint_values(body))


def _check_baseline(found: Record) -> None:
    body = found.body
    _expect(found, found.id == "baseline", "the baseline record's id is baseline")
    _expect(found, set(body) == {"accepted", "open"}, "must hold accepted and open")
    for name, statuses in (("accepted", ("accepted",)), ("open", ("draft", "adopting"))):
        row = body[name]
        _expect(
            found,
            row is None
            or (
                isinstance(row, dict)
                and set(row) == set(BASELINE_FIELDS)
                and row["status"] in statuses
                and _is_revision(row["revision"])
            ),
            f"{name} is not a baseline",
        )


_CHECKS = {
    "task": _check_task,
    "change": _check_change,
    "decision": _check_decision,
    "checkpoint": _check_checkpoint,
    "baseline": _check_baseline,
}


def _is_revision(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _expect(found: Record, holds: bool, problem: str) -> None:
    if not holds:
        raise Corrupt(
            "LEDGER_UNPARSEABLE",
            f"{LEDGER_PATH}: record {found.label}: {problem}",
            {"path": LEDGER_PATH, "record": found.label},
        )


def checkpoint_values(body: dict[str, Any]) -> tuple[Any, ...]:
    """The accepted row's values in ``CHECKPOINT_COLUMNS`` order; JSON columns as text."""
    values = []
    for name in CHECKPOINT_COLUMNS:
        if name == "status":
            values.append("accepted")
        elif name in ("payload", "evidence", "diagnostics"):
            values.append(canon.canonical_text(body[name]))
        else:
            values.append(body[name])
    return tuple(values)


# --- files --------------------------------------------------------------------------------


def _register_if_verified(
    prepared: Prepared, state_root: str, path: str, digest: str, kind: str, owner: Record
) -> None:
    if registry.file_digest(state_root, path) == digest:
        prepared.registrations.append((path, digest, kind, "change", owner.id))
    else:
        prepared.diagnostics.append(_pending_file(path, owner))


def _register_decision(prepared: Prepared, state_root: str, found: Record) -> None:
    """A decision file registers when it holds the record's own digest."""
    body = found.body
    data = registry.read_bytes(state_root, body["path"])
    try:
        value = None if data is None else json.loads(data)
    except ValueError:
        value = None
    if (
        data is None
        or not isinstance(value, dict)
        or value.get("digest") != body["digest"]
        or canon.digest_excluding(value, "digest") != body["digest"]
    ):
        prepared.diagnostics.append(_pending_file(body["path"], found))
        return
    scope = body["scope"]
    prepared.registrations.append(
        (body["path"], canon.digest_bytes(data), "decision", scope["type"], scope.get("id"))
    )


def _pending_file(path: str, owner: Record) -> Diagnostic:
    return diagnostic(
        "LEDGER_FILE_PENDING",
        "warning",
        f"{path} of {owner.label} is not on disk as the ledger records it yet; it is"
        " registered once it is (`ithaca doctor` lists it meanwhile)",
        path,
    )
