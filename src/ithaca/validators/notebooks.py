"""The notebook facility (docs/ulysses.md, "Validators"): where agents write validator cells.

One method per operation, each taking the operation's raw arguments and checking them
strictly (``notebook_arguments``). Every write is one transaction with its journal event
(``notebook.created``, ``notebook.cell_added``, ``notebook.cell_updated``; actor
``agent``, subject the notebook id); events carry the source's SHA-256, never the source.

Cells are versioned, never edited: ``update_cell`` stores a new version and keeps the old
ones, and an update that changes nothing stores nothing. ``run_cell`` is a dry run of a
freshly built snapshot and records nothing. ``export`` answers Markdown
(``notebook_export``).

Filenames: code cells of a notebook have distinct filenames, so the notebook reads as a
folder of files (the reference requires this of manifests; Ithaca holds validators to it
too). A validator added without a filename takes its language's default entrypoint
(``validate.py``, ``validate.js``, ``validate.ts``, ``validate.sh``) or, when a cell
already has that name, the first free ``validate-<n>`` with the same extension, from
``n = 2``. Changing a cell's language keeps its filename, which must then fit the new
language.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.errors import Refused, invalid_field
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.validators import cells, runner, snapshot
from ithaca.validators.notebook_arguments import OPERATIONS, checked, one_of
from ithaca.validators.notebook_export import render_markdown
from ithaca.validators.runtimes import LANGUAGES

_Rows = list[dict[str, Any]]


class NotebookService:
    """Notebooks and their cells in the project's store."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config

    def dispatch(self, arguments: Any) -> dict[str, Any]:
        """``notebook {operation, …}``: the MCP tool's entry (``list`` answers
        ``{notebooks: [...]}``, since a tool answers with an object)."""
        if not isinstance(arguments, dict):
            raise invalid_field("", "WRONG_TYPE", "the arguments must be an object")
        if "operation" not in arguments:
            raise invalid_field("/operation", "REQUIRED", "notebook needs an operation")
        operation = arguments["operation"]
        one_of(*OPERATIONS)("/operation", operation)
        rest = {name: value for name, value in arguments.items() if name != "operation"}
        if operation == "list":
            return {"notebooks": self.list(rest)}
        handler: Callable[[dict[str, Any]], dict[str, Any]] = getattr(self, operation)
        return handler(rest)

    # --- writes ---------------------------------------------------------------------------

    def create(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A new, empty notebook."""
        given = checked("create", arguments)
        language = given.get("language", "python")
        notebook_id = ids.new("nb")
        now = clock.now()
        with self.store.write() as conn:
            conn.execute(
                "INSERT INTO notebooks (notebook_id, title, language, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (notebook_id, given["title"], language, now, now),
            )
            created = {
                "notebookId": notebook_id,
                "title": given["title"],
                "language": language,
                "createdAt": now,
            }
            journal.append(
                conn,
                actor="agent",
                kind="notebook.created",
                subject=notebook_id,
                payload={"notebookId": notebook_id, "title": given["title"], "language": language},
            )
        return created

    def add_cell(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A new cell at the end of the notebook, at version 1."""
        given = checked("add_cell", arguments)
        notebook_id = given["notebookId"]
        with self.store.write() as conn:
            notebook = cells.notebook(conn, notebook_id)
            existing = cells.latest_cells(conn, notebook_id)
            if given.get("kind", "code") == "markdown":
                fields = _markdown_fields(given["source"])
            else:
                language = given.get("language", notebook["language"])
                filename = (
                    given["filename"]
                    if "filename" in given
                    else _default_filename(language, existing)
                )
                fields = self._code_fields(
                    conn,
                    notebook_id,
                    cell_id=None,
                    language=language,
                    filename=filename,
                    mode=given.get("mode"),
                    timeout_s=given.get("timeout_s"),
                    timeout_given="timeout_s" in given,
                    source=given["source"],
                )
            cell_id = ids.new("cell")
            now = clock.now()
            conn.execute(
                "INSERT INTO notebook_cells (cell_id, notebook_id, position, created_at)"
                " VALUES (?, ?, ?, ?)",
                (cell_id, notebook_id, 1 + max((c.position for c in existing), default=0), now),
            )
            added = _store_version(conn, notebook_id, cell_id, 1, fields, now)
            journal.append(
                conn,
                actor="agent",
                kind="notebook.cell_added",
                subject=notebook_id,
                payload=added,
            )
        return _cell_answer(added)

    def update_cell(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A new version of a cell with the given fields changed; an update that changes
        nothing answers the current version and stores nothing."""
        given = checked("update_cell", arguments)
        notebook_id, cell_id = given["notebookId"], given["cellId"]
        with self.store.write() as conn:
            current = cells.cell_version(conn, notebook_id, cell_id)
            source = given.get("source", current.source)
            if current.role == "markdown":
                fields = _markdown_fields(source)
            else:
                fields = self._code_fields(
                    conn,
                    notebook_id,
                    cell_id=cell_id,
                    language=given.get("language", current.language),
                    filename=given.get("filename", current.filename),
                    mode=given.get("mode", current.mode),
                    timeout_s=given.get("timeout_s", current.timeout_s),
                    timeout_given="timeout_s" in given,
                    source=source,
                )
            if _content(fields) == current.content():
                return {"cellId": cell_id, "version": current.version}
            updated = _store_version(
                conn, notebook_id, cell_id, current.version + 1, fields, clock.now()
            )
            journal.append(
                conn,
                actor="agent",
                kind="notebook.cell_updated",
                subject=notebook_id,
                payload=updated,
            )
        return {"cellId": cell_id, "version": updated["version"]}

    # --- reads ----------------------------------------------------------------------------

    def get(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The notebook with its cells' latest versions, or, with ``cellId``, one version
        of that cell (``version``, else the latest) and the list of its versions."""
        given = checked("get", arguments)
        notebook_id = given["notebookId"]
        if "version" in given and "cellId" not in given:
            raise invalid_field("/cellId", "REQUIRED", "version needs the cellId it belongs to")
        with self.store.read() as conn:
            if "cellId" in given:
                cell = cells.cell_version(conn, notebook_id, given["cellId"], given.get("version"))
                return {
                    "notebookId": notebook_id,
                    "cell": cell.view(),
                    "versions": cells.version_list(conn, cell.cell_id),
                }
            notebook = cells.notebook(conn, notebook_id)
            notebook["cells"] = [cell.view() for cell in cells.latest_cells(conn, notebook_id)]
            return notebook

    def run_cell(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run a validator cell's fresh snapshot on ``observed`` (a dry run: nothing is
        stored, and the result carries the snapshot's own digest)."""
        given = checked("run_cell", arguments)
        settings = self.config["validators"]
        with self.store.read() as conn:
            built, _ = snapshot.build(
                conn, given["notebookId"], given["cellId"], settings, version=given.get("version")
            )
        return runner.run_snapshot(
            built, given["observed"], settings, project_root=self.project.root
        )

    def export(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The notebook as Markdown: ``{markdown}``."""
        given = checked("export", arguments)
        with self.store.read() as conn:
            notebook = cells.notebook(conn, given["notebookId"])
            latest = cells.latest_cells(conn, given["notebookId"])
        return {"markdown": render_markdown(notebook, latest)}

    def list(self, arguments: dict[str, Any] | None = None) -> _Rows:
        """Every notebook, most recently changed first (by its latest journal event, which
        orders changes made within one millisecond too)."""
        checked("list", arguments or {})
        rows = self.store.connection().execute(
            "SELECT n.notebook_id, n.title, n.language, n.updated_at,"
            " (SELECT count(*) FROM notebook_cells c WHERE c.notebook_id = n.notebook_id)"
            " FROM notebooks n ORDER BY"
            " (SELECT max(seq) FROM journal j WHERE j.subject = n.notebook_id) DESC"
        )
        return [
            {
                "notebookId": notebook_id,
                "title": title,
                "language": language,
                "cellCount": count,
                "updatedAt": updated_at,
            }
            for notebook_id, title, language, updated_at, count in rows
        ]

    # --- helpers --------------------------------------------------------------------------

    def _code_fields(
        self,
        conn: sqlite3.Connection,
        notebook_id: str,
        *,
        cell_id: str | None,
        language: Any,
        filename: Any,
        mode: Any,
        timeout_s: Any,
        timeout_given: bool,
        source: str,
    ) -> dict[str, Any]:
        """The stored fields of a code cell version, once its filename is allowed."""
        cells.check_filename(language, filename)
        limit = self.config["validators"]["timeout_s"]
        if timeout_given and timeout_s is not None and timeout_s > limit:
            raise invalid_field(
                "/timeout_s",
                "OUT_OF_RANGE",
                f"timeout_s may not exceed validators.timeout_s ({limit})",
            )
        for other in cells.latest_cells(conn, notebook_id):
            if other.cell_id != cell_id and other.filename == filename:
                raise Refused(
                    "CELL_FILENAME_TAKEN",
                    f"cell {other.cell_id} of this notebook is already named {filename}",
                    {"notebookId": notebook_id, "filename": filename, "cellId": other.cell_id},
                )
        validator = cells.role_of(language, filename) == "validator"
        return {
            "role": "validator" if validator else "manifest",
            "language": language,
            "filename": filename,
            "mode": (mode or "judge") if validator else None,
            "timeout_s": timeout_s if validator else None,
            "source": source,
        }


def _markdown_fields(source: str) -> dict[str, Any]:
    return {
        "role": "markdown",
        "language": None,
        "filename": None,
        "mode": None,
        "timeout_s": None,
        "source": source,
    }


def _content(fields: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(fields[name] for name in cells.CONTENT_FIELDS)


def _default_filename(language: str, existing: list[cells.CellVersion]) -> str:
    """The language's entrypoint, else the first free ``validate-<n>`` (see the module)."""
    taken = {cell.filename for cell in existing}
    entrypoint: str = LANGUAGES[language].entrypoint
    if entrypoint not in taken:
        return entrypoint
    stem, dot, extension = entrypoint.rpartition(".")
    number = 2
    while f"{stem}-{number}{dot}{extension}" in taken:
        number += 1
    return f"{stem}-{number}{dot}{extension}"


def _store_version(
    conn: sqlite3.Connection,
    notebook_id: str,
    cell_id: str,
    version: int,
    fields: dict[str, Any],
    now: str,
) -> dict[str, Any]:
    """Insert one cell version and touch the notebook; returns the event payload."""
    source_sha256 = canon.digest_bytes(fields["source"].encode("utf-8"))
    conn.execute(
        "INSERT INTO notebook_cell_versions (cell_id, version, role, language, filename, mode,"
        " timeout_s, source, source_sha256, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            cell_id,
            version,
            fields["role"],
            fields["language"],
            fields["filename"],
            fields["mode"],
            fields["timeout_s"],
            fields["source"],
            source_sha256,
            now,
        ),
    )
    conn.execute("UPDATE notebooks SET updated_at = ? WHERE notebook_id = ?", (now, notebook_id))
    return {
        "notebookId": notebook_id,
        "cellId": cell_id,
        "version": version,
        "kind": "markdown" if fields["role"] == "markdown" else "code",
        "role": fields["role"],
        "language": fields["language"],
        "filename": fields["filename"],
        "mode": fields["mode"],
        "timeout_s": fields["timeout_s"],
        "sourceSha256": source_sha256,
    }


def _cell_answer(stored: dict[str, Any]) -> dict[str, Any]:
    names = ("cellId", "version", "role", "language", "filename", "mode")
    return {name: stored[name] for name in names}
