"""The ``knowledge`` tool: ``search`` and ``get`` over the lessons (docs/ulysses.md, "Lessons").

The MCP tool and the CLI both call ``KnowledgeService``; it checks the arguments strictly,
brings the index in step with the lesson folder (``lesson_index``) and answers from it
(``lesson_search``). Lessons are recorded by the Ulysses service when a session closes
(``lesson_recording``), never through this tool.
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.kernel.errors import NotFound, invalid_field
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.ulysses import lesson_index, lesson_search

SEARCH_LIMIT_DEFAULT = 5
SEARCH_LIMIT_MAX = 20
QUERY_MAX_CHARS = 4000
ID_MAX_CHARS = 200

_COMMON_FIELDS = frozenset({"operation", "session"})


class KnowledgeService:
    """``knowledge {operation: search|get}`` for the MCP tool and the CLI (authority
    ``agent``; both operations only read lessons, the index syncs on the way)."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config

    def dispatch(self, arguments: dict[str, Any]) -> dict[str, Any]:
        operation = _mapping(arguments).get("operation")
        if operation == "search":
            return self.search(arguments)
        if operation == "get":
            return self.get(arguments)
        if operation is None:
            raise invalid_field("/operation", "REQUIRED", "operation is required (search or get)")
        raise invalid_field("/operation", "NOT_ALLOWED", "operation must be one of search, get")

    def search(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{query, limit?}`` → ``{results: [{id, title, date, terminalState, snippet,
        path}]}`` plus ``diagnostics`` when there are any."""
        _only_fields(arguments, "search", {"query", "limit"})
        query = _text(arguments, "query", QUERY_MAX_CHARS)
        limit = _limit(arguments.get("limit", SEARCH_LIMIT_DEFAULT))
        conn = self.store.connection()
        diagnostics = lesson_index.sync(conn, self.project)
        hits, more = lesson_search.search_index(conn, query, limit)
        result: dict[str, Any] = {
            "results": [{k: v for k, v in hit.items() if k != "summary"} for hit in hits]
        }
        if diagnostics or more:
            result["diagnostics"] = diagnostics + more
        return result

    def get(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``{id}`` → ``{id, path, record, markdown}``; ``LESSON_NOT_FOUND``."""
        _only_fields(arguments, "get", {"id"})
        lesson_id = _text(arguments, "id", ID_MAX_CHARS)
        conn = self.store.connection()
        lesson_index.sync(conn, self.project)
        row = conn.execute(
            "SELECT path, record, body FROM lessons WHERE id = ?", (lesson_id,)
        ).fetchone()
        if row is None:
            raise NotFound("LESSON_NOT_FOUND", f"no lesson {lesson_id}", {"id": lesson_id})
        path, stored, body = row
        return {"id": lesson_id, "path": path, "record": json.loads(stored), "markdown": body}


def _mapping(arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, dict):
        raise invalid_field("", "WRONG_TYPE", "the arguments must be an object")
    return arguments


def _only_fields(arguments: Any, operation: str, fields: set[str]) -> None:
    """Refuse unknown fields; ``session`` (filled in by the hook) is accepted and ignored."""
    for name in _mapping(arguments):
        if name == "operation" and arguments[name] != operation:
            raise invalid_field("/operation", "NOT_ALLOWED", f"operation must be {operation}")
        if name not in fields and name not in _COMMON_FIELDS:
            raise invalid_field(
                f"/{name}", "UNKNOWN_FIELD", f"{name!r} is not a field of {operation}"
            )


def _text(arguments: dict[str, Any], name: str, limit: int) -> str:
    pointer = f"/{name}"
    if name not in arguments:
        raise invalid_field(pointer, "REQUIRED", f"{name} is required")
    value = arguments[name]
    if not isinstance(value, str):
        raise invalid_field(pointer, "WRONG_TYPE", f"{name} must be a string")
    if not value.strip():
        raise invalid_field(pointer, "EMPTY", f"{name} must not be blank")
    if len(value) > limit:
        raise invalid_field(pointer, "TOO_LONG", f"{name} is longer than {limit} characters")
    return value


def _limit(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise invalid_field("/limit", "WRONG_TYPE", "limit must be an integer")
    if not 1 <= value <= SEARCH_LIMIT_MAX:
        raise invalid_field(
            "/limit", "OUT_OF_RANGE", f"limit must be between 1 and {SEARCH_LIMIT_MAX}"
        )
    return value
