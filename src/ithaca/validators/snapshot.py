"""Validator snapshots: everything that decides what a bound validator does, frozen.

A snapshot holds the cell's source and entrypoint, its language, mode and timeout, the
runtime measured when it was taken and the notebook's manifests for that language. Its
bytes are the RFC 8785 canonical JSON, so its SHA-256 names it as a content-addressed
blob, and the same snapshot taken twice has one digest. Decoding is strict: bytes that
are not exactly the canonical form of a well-formed snapshot are refused, so an edited
blob can never be read as a different validator.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt, InvalidInput, Refused
from ithaca.validators import cells, runtimes

SCHEMA = "ithaca.validator-snapshot/1"
KEYS = frozenset(
    {"schema", "language", "mode", "entrypoint", "source", "timeout_s", "runtime", "manifests"}
)


def build(
    conn: sqlite3.Connection,
    notebook_id: str,
    cell_id: str,
    settings: dict[str, Any],
    *,
    version: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The snapshot of a validator cell (its latest version unless ``version`` is given)
    and the cell it came from, ``{notebookId, cellId, cellVersion, language, mode}``.

    The runtime is measured now (``VALIDATOR_RUNTIME_MISSING`` when absent); a cell's
    ``timeout_s`` never exceeds ``validators.timeout_s``."""
    cell = cells.cell_version(conn, notebook_id, cell_id, version)
    if cell.role != "validator":
        raise Refused(
            "CELL_NOT_RUNNABLE",
            f"cell {cell_id} is a {cell.role} cell; only validator cells run or bind",
            {"notebookId": notebook_id, "cellId": cell_id, "role": cell.role},
        )
    assert cell.language is not None and cell.filename is not None and cell.mode is not None
    manifests = sorted(
        (
            {"filename": other.filename, "source": other.source}
            for other in cells.latest_cells(conn, notebook_id)
            if other.role == "manifest" and other.filename in cells.MANIFESTS[cell.language]
        ),
        key=lambda manifest: str(manifest["filename"]),
    )
    limit = settings["timeout_s"]
    snapshot = {
        "schema": SCHEMA,
        "language": cell.language,
        "mode": cell.mode,
        "entrypoint": cell.filename,
        "source": cell.source,
        "timeout_s": limit if cell.timeout_s is None else min(cell.timeout_s, limit),
        "runtime": runtimes.measure(cell.language, settings),
        "manifests": manifests,
    }
    origin = {
        "notebookId": notebook_id,
        "cellId": cell_id,
        "cellVersion": cell.version,
        "language": cell.language,
        "mode": cell.mode,
    }
    return snapshot, origin


def encode(snapshot: dict[str, Any]) -> bytes:
    """The snapshot's canonical bytes (the blob); a malformed snapshot is refused."""
    problem = _problem(snapshot)
    if problem is not None:
        raise InvalidInput("SNAPSHOT_INVALID", f"not a validator snapshot: {problem}")
    return canon.canonical(snapshot)


def decode(data: bytes) -> dict[str, Any]:
    """The snapshot held in ``data``; ``SNAPSHOT_INVALID`` unless the bytes are exactly the
    canonical JSON of a well-formed snapshot."""
    try:
        value = json.loads(data.decode("utf-8"))
        problem = _problem(value) or (
            None if canon.canonical(value) == data else "bytes are not canonical JSON"
        )
    except (UnicodeDecodeError, ValueError, RecursionError, InvalidInput) as exc:
        problem = f"unreadable JSON ({exc})"
    if problem is not None:
        raise Corrupt("SNAPSHOT_INVALID", f"not a validator snapshot: {problem}")
    return dict(value)


def _problem(value: Any) -> str | None:
    """What keeps ``value`` from being a well-formed snapshot, or None."""
    if not isinstance(value, dict) or set(value) != KEYS:
        return f"an object with exactly the keys {', '.join(sorted(KEYS))}"
    language = value["language"]
    if value["schema"] != SCHEMA:
        return f"schema must be {SCHEMA}"
    if language not in cells.MANIFESTS:
        return "unknown language"
    if value["mode"] not in cells.MODES:
        return "mode must be judge or probe"
    entrypoint = value["entrypoint"]
    if not isinstance(entrypoint, str) or cells.role_of(language, entrypoint) != "validator":
        return "entrypoint must be a validator filename"
    try:
        cells.check_filename(language, entrypoint)
    except InvalidInput as exc:
        return exc.message
    if not isinstance(value["source"], str):
        return "source must be a string"
    timeout = value["timeout_s"]
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout > 0:
        return "timeout_s must be a positive number"
    runtime = value["runtime"]
    if not (
        isinstance(runtime, dict)
        and set(runtime) == {"name", "version"}
        and all(isinstance(part, str) for part in runtime.values())
    ):
        return "runtime must be {name, version} strings"
    return _manifests_problem(language, value["manifests"])


def _manifests_problem(language: str, manifests: Any) -> str | None:
    if not isinstance(manifests, list):
        return "manifests must be a list"
    names = []
    for manifest in manifests:
        if not (
            isinstance(manifest, dict)
            and set(manifest) == {"filename", "source"}
            and manifest["filename"] in cells.MANIFESTS[language]
            and isinstance(manifest["source"], str)
        ):
            return f"each manifest is {{filename, source}} named one of {cells.MANIFESTS[language]}"
        names.append(manifest["filename"])
    if names != sorted(set(names)):
        return "manifests must be sorted by filename, each name once"
    return None
