"""The ``notebook`` MCP tool's published schema and description.

The tool takes an ``operation`` and that operation's fields and hands the raw arguments to
``NotebookService.dispatch``, which checks them strictly (unknown fields, wrong types,
limits) and answers with coded errors. The schema describes every field an operation may
take, so a client can show them. Operation and field names are the seed's, so its skill
text works unchanged.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import ANY_JSON, SESSION_PROPERTY, ToolSpec

_TEXT = {"type": "string"}

NOTEBOOK_DESCRIPTION = (
    "Author validator cells: small programs that judge observed data and write a verdict. "
    "operation=create {title, language?} makes a notebook (python by default; javascript, "
    "typescript, shell). add_cell {notebookId, source, kind?, language?, filename?, mode?, "
    "timeout_s?} adds a cell; a code cell named requirements.txt, pyproject.toml, "
    "package.json or tsconfig.json is a manifest, any other code cell is a validator. "
    "update_cell {notebookId, cellId, ...} stores a new version (every version is kept). "
    "get, list and export read. run_cell {notebookId, cellId, observed} is a dry run that "
    "stores nothing. A Python validator reads observed data and writes its verdict with "
    "the helper: `from tb_validate import observed, pass_, fail`; JavaScript: "
    '`import { observed, pass, fail } from "./tb-validate.js"`. Mode probe runs the cell '
    "in the project root so it can measure evidence itself (run the tests, read a log)."
)

NOTEBOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "enum": ["create", "add_cell", "update_cell", "get", "list", "run_cell", "export"],
        },
        "title": {"type": "string", "description": "Notebook title, 1–200 characters."},
        "language": {"type": "string", "enum": ["python", "javascript", "typescript", "shell"]},
        "notebookId": _TEXT,
        "cellId": _TEXT,
        "source": {"type": "string", "description": "The cell's source, at most 256 KiB."},
        "kind": {"type": "string", "enum": ["code", "markdown"]},
        "filename": {"type": "string", "description": "The cell's file name in the run folder."},
        "mode": {"type": "string", "enum": ["judge", "probe"]},
        "timeout_s": {"type": "number", "description": "Seconds before the run is stopped."},
        "version": {"type": "integer", "description": "A cell version (get, run_cell)."},
        "observed": {**ANY_JSON, "description": "The data the cell judges (run_cell)."},
        "session": SESSION_PROPERTY,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

TOOLS = (
    ToolSpec(
        "notebook",
        "Validator notebooks",
        NOTEBOOK_DESCRIPTION,
        NOTEBOOK_SCHEMA,
        read_only=False,
        service="notebooks",
        method="dispatch",
    ),
)
