"""Notebook cells as stored: what role a cell plays, which filenames it may take, and
reading its versions back.

A code cell's role follows from its filename: a name from the language's manifest list
(``requirements.txt`` …) makes it a *manifest*, materialised beside a validator and never
installed; any other name makes it a *validator*, a program that may run or be bound.
Filenames become files in a validator's run folder, so they are plain names that fit the
language and never shadow what the runner itself puts there (observed data, the verdict,
``home``, ``temp`` and the helpers).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Any

from ithaca.kernel.errors import InvalidInput, NotFound
from ithaca.validators.runtimes import LANGUAGES

MANIFESTS: dict[str, tuple[str, ...]] = {
    "python": ("pyproject.toml", "requirements.txt"),
    "javascript": ("package.json",),
    "typescript": ("package.json", "tsconfig.json"),
    "shell": (),
}
# Names the runner itself puts in a run folder.
RESERVED_FILENAMES = frozenset(
    {"observed.json", "verdict.json", "home", "temp"}
    | {helper for language in LANGUAGES.values() for helper in language.helpers}
)
FILENAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MODES = ("judge", "probe")
# What a new version must change to be a new version.
CONTENT_FIELDS = ("role", "language", "filename", "mode", "timeout_s", "source")


def role_of(language: str, filename: str) -> str:
    """``manifest`` for the language's manifest names, else ``validator``."""
    return "manifest" if filename in MANIFESTS[language] else "validator"


def check_filename(language: str, filename: str) -> None:
    """Refuse a code cell filename the run folder could not hold (``INVALID_FILENAME``)."""
    extensions = LANGUAGES[language].extensions
    if FILENAME_PATTERN.fullmatch(filename) is None:
        problem = "letters, digits, '.', '_' and '-', starting with a letter or digit, ≤ 64"
    elif filename.lower() in RESERVED_FILENAMES:
        problem = "the runner reserves this name"
    elif filename in MANIFESTS[language] or filename.endswith(extensions):
        return
    else:
        manifests = MANIFESTS[language]
        problem = f"a {language} cell ends in {' '.join(extensions)}" + (
            f" or is one of {', '.join(manifests)}" if manifests else ""
        )
    raise InvalidInput(
        "INVALID_FILENAME",
        f"{filename!r}: {problem}",
        {"pointer": "/filename", "filename": filename, "language": language},
    )


@dataclass(frozen=True)
class CellVersion:
    """One stored version of one cell."""

    notebook_id: str
    cell_id: str
    position: int
    version: int
    role: str
    language: str | None
    filename: str | None
    mode: str | None
    timeout_s: int | float | None
    source: str
    source_sha256: str
    created_at: str

    @property
    def kind(self) -> str:
        return "markdown" if self.role == "markdown" else "code"

    def content(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in CONTENT_FIELDS)

    def view(self) -> dict[str, Any]:
        """The shape ``notebook get`` shows."""
        return {
            "cellId": self.cell_id,
            "version": self.version,
            "kind": self.kind,
            "role": self.role,
            "language": self.language,
            "filename": self.filename,
            "mode": self.mode,
            "timeout_s": self.timeout_s,
            "source": self.source,
            "sourceSha256": self.source_sha256,
            "updatedAt": self.created_at,
        }


_COLUMNS = (
    "c.notebook_id, c.cell_id, c.position, v.version, v.role, v.language, v.filename,"
    " v.mode, v.timeout_s, v.source, v.source_sha256, v.created_at"
)
_LATEST = (
    f"SELECT {_COLUMNS} FROM notebook_cells c JOIN notebook_cell_versions v"
    " ON v.cell_id = c.cell_id AND v.version ="
    " (SELECT max(version) FROM notebook_cell_versions WHERE cell_id = c.cell_id)"
)


def notebook(conn: sqlite3.Connection, notebook_id: str) -> dict[str, Any]:
    """The notebook's own fields; ``NOTEBOOK_NOT_FOUND`` when there is none."""
    row = conn.execute(
        "SELECT notebook_id, title, language, created_at, updated_at FROM notebooks"
        " WHERE notebook_id = ?",
        (notebook_id,),
    ).fetchone()
    if row is None:
        raise NotFound(
            "NOTEBOOK_NOT_FOUND", f"no notebook {notebook_id}", {"notebookId": notebook_id}
        )
    return {
        "notebookId": row[0],
        "title": row[1],
        "language": row[2],
        "createdAt": row[3],
        "updatedAt": row[4],
    }


def latest_cells(conn: sqlite3.Connection, notebook_id: str) -> list[CellVersion]:
    """The latest version of every cell of a notebook, in notebook order."""
    rows = conn.execute(f"{_LATEST} WHERE c.notebook_id = ? ORDER BY c.position", (notebook_id,))
    return [CellVersion(*row) for row in rows]


def cell_version(
    conn: sqlite3.Connection, notebook_id: str, cell_id: str, version: int | None = None
) -> CellVersion:
    """One version of a cell (the latest when ``version`` is None); ``CELL_NOT_FOUND``
    when the notebook has no such cell or the cell no such version."""
    notebook(conn, notebook_id)
    if version is None:
        row = conn.execute(
            f"{_LATEST} WHERE c.notebook_id = ? AND c.cell_id = ?", (notebook_id, cell_id)
        ).fetchone()
    else:
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM notebook_cells c JOIN notebook_cell_versions v"
            " ON v.cell_id = c.cell_id WHERE c.notebook_id = ? AND c.cell_id = ?"
            " AND v.version = ?",
            (notebook_id, cell_id, version),
        ).fetchone()
    if row is None:
        details: dict[str, Any] = {"notebookId": notebook_id, "cellId": cell_id}
        if version is not None:
            details["version"] = version
        suffix = f" version {version}" if version is not None else ""
        raise NotFound(
            "CELL_NOT_FOUND", f"notebook {notebook_id} has no cell {cell_id}{suffix}", details
        )
    return CellVersion(*row)


def version_list(conn: sqlite3.Connection, cell_id: str) -> list[dict[str, Any]]:
    """Every version of a cell, oldest first: ``{version, at, sourceSha256}``."""
    rows = conn.execute(
        "SELECT version, created_at, source_sha256 FROM notebook_cell_versions"
        " WHERE cell_id = ? ORDER BY version",
        (cell_id,),
    )
    return [{"version": v, "at": at, "sourceSha256": sha} for v, at, sha in rows]
