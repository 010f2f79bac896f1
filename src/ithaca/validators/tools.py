"""The ``notebook`` MCP tool's published schema and description.

The tool takes an ``operation`` and that operation's fields and hands the raw arguments to
``NotebookService.dispatch``, which checks them strictly (unknown fields, wrong types,
limits) and answers with coded errors. The schema describes every field an operation may
take, so a client can show them. Operation and field names are the seed's, so its skill
text works unchanged.
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel.tools import (
    ANY_JSON,
    BOOLEAN,
    INTEGER,
    STRING,
    ToolSpec,
    result_schema,
)

NOTEBOOK_DESCRIPTION = (
    "Validator cells: small programs that judge observed data. create, add_cell "
    "{notebookId, source}, update_cell, get, list, export, run_cell {notebookId, cellId, "
    "observed} (a dry run). Python cells: `from tb_validate import observed, pass_, fail`."
)

NOTEBOOK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "enum": ["create", "add_cell", "update_cell", "get", "list", "run_cell", "export"],
        },
        "title": STRING,
        "language": {"type": "string", "enum": ["python", "javascript", "typescript", "shell"]},
        "notebookId": STRING,
        "cellId": STRING,
        "source": STRING,
        "kind": {"type": "string", "enum": ["code", "markdown"]},
        "filename": STRING,
        "mode": {"type": "string", "enum": ["judge", "probe"]},
        "timeout_s": {"type": "number"},
        "version": INTEGER,
        "observed": ANY_JSON,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# create/get: notebookId, cells; add_cell/update_cell: cellId, version; list: notebooks;
# run_cell: pass, reason; export: markdown. The schema types the ones a caller acts on.
NOTEBOOK_OUTPUT = result_schema(cellId=STRING, **{"pass": BOOLEAN})

TOOLS = (
    ToolSpec(
        "notebook",
        "Validator notebooks",
        NOTEBOOK_DESCRIPTION,
        NOTEBOOK_SCHEMA,
        NOTEBOOK_OUTPUT,
        # create, add_cell and update_cell each add a notebook, cell or version.
        read_only=False,
        destructive=False,
        idempotent=False,
        service="notebooks",
        method="dispatch",
        takes_session=True,
    ),
)
