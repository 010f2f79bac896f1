"""Ithaca's MCP server: the tools an agent calls, over stdio.

The server is a thin adapter over the same services the CLI calls, and it acts only as
``agent``: ``load_protocols`` and the read-only ``protocols`` tool, the debugging tools
``notebook``, ``ulysses`` and ``knowledge`` (``ithaca.mcp.debugging``), delivery's
``context``, ``record``, ``checkpoint``, ``archive`` and ``doctor``, ``ultragoal``'s agent
operations, and nothing a user alone may do.

Each tool publishes a hand-written JSON Schema and receives the raw arguments, which are
checked by Ithaca itself — against that schema (``ithaca.mcp.errors``), or by the
service's ``dispatch`` for the tools whose fields depend on the operation — so unknown
fields and wrong types are refused with coded errors instead of being dropped or
described in the SDK's prose. The calling host session comes from the hook's call ticket
(``ithaca.mcp.caller``) and is filled in for the tools that take ``session`` (DESIGN,
Kernel contracts 4). Results are JSON objects, so clients get ``structuredContent`` as
well as the same JSON as text.

The project is opened once, when the server is built. The SDK runs these synchronous
tools on worker threads; the store gives each thread its own connection, and the
server's lifespan closes them when a client disconnects.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from ithaca import __version__
from ithaca.app import IthacaProject, open_project
from ithaca.delivery.archive import ARCHIVE_DESCRIPTION, ARCHIVE_SCHEMA
from ithaca.delivery.checkpoints.tool import CHECKPOINT_DESCRIPTION, CHECKPOINT_SCHEMA
from ithaca.delivery.context.tool import CONTEXT_DESCRIPTION, CONTEXT_SCHEMA
from ithaca.delivery.doctor.checks import DOCTOR_DESCRIPTION, DOCTOR_SCHEMA
from ithaca.delivery.records.tool import RECORD_DESCRIPTION, RECORD_SCHEMA
from ithaca.delivery.sessions.tool import SESSION_DESCRIPTION, SESSION_SCHEMA
from ithaca.delivery.sync.tool import SYNC_DESCRIPTION, SYNC_SCHEMA
from ithaca.kernel.errors import IthacaError, invalid_field
from ithaca.kernel.store import Store
from ithaca.mcp import caller, debugging
from ithaca.mcp.debugging import SESSION_PROPERTY
from ithaca.mcp.errors import check_arguments, check_text, error_result
from ithaca.protocols import tooling
from ithaca.protocols.service import SELECTOR_ARGUMENTS, ProtocolsService
from ithaca.ultragoal.tool import ULTRAGOAL_DESCRIPTION, ULTRAGOAL_SCHEMA, ULTRAGOAL_TITLE
from ithaca.validators.runner import remove_stale_run_folders

INSTRUCTIONS = (
    "Ithaca holds this project's protocols: rules stored outside your context that bind "
    "each turn and are enforced on your tool calls. When the prompt's context says Ithaca "
    "admitted it as an event, call load_protocols with that event id before any other "
    "tool, and follow every rule in the bundle it returns."
)

LOAD_PROTOCOLS_DESCRIPTION = (
    "Load the protocols that bind this turn. Ithaca admits every user prompt as an event "
    'and says so in the prompt\'s context ("Ithaca admitted this prompt as event evt_…"). '
    'Call this tool first, before any other tool, with {"eventId": "<that id>"}, then '
    "follow every rule in the returned bundle for the whole turn. The bundle lists the "
    "protocols in priority order with their rules and the typed constraints Ithaca "
    "enforces on your tool calls; loading it is what lets your mutating tools run. If "
    "loading fails, stop and report the error code: never work without rules. When you "
    "delegate, pass the same event id so the worker loads the same bundle."
)

LOAD_PROTOCOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "eventId": {
            "type": "string",
            "description": "The id Ithaca gave this prompt (evt_ followed by 26 characters).",
        },
        "session": SESSION_PROPERTY,
        **{
            name: {
                "description": (
                    "Ignored: Ithaca selects protocols from the admitted event, never from "
                    "arguments. Accepted so older skill texts keep working, and reported in "
                    "the bundle's diagnostics."
                )
            }
            for name in sorted(SELECTOR_ARGUMENTS)
        },
    },
    "required": ["eventId"],
    "additionalProperties": False,
}

PROTOCOLS_DESCRIPTION = (
    "Read this project's protocols; nothing here changes them. operation=list returns "
    "{protocols: [...]} in priority order, optionally filtered by scope, source, enabled "
    "and tag. operation=get returns one protocol by id, with the constraints that take "
    "effect. operation=explain shows, for an event id, which protocols matched it and why "
    "the others did not, and what load_protocols would return. Creating, changing, "
    "enabling or removing protocols is for the user, in a terminal (ithaca protocols ...)."
)

PROTOCOLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "operation": {
            "type": "string",
            "enum": ["list", "get", "explain"],
            "description": "What to read.",
        },
        "id": {"type": "string", "description": "The protocol id (get only)."},
        "eventId": {"type": "string", "description": "The event id to explain (explain only)."},
        "scope": {
            "type": "string",
            "enum": ["base", "user"],
            "description": "Only base or only user protocols (list only).",
        },
        "source": {
            "type": "string",
            "enum": ["seed", "sqlite", "file"],
            "description": "Only protocols from this source (list only).",
        },
        "enabled": {
            "type": "boolean",
            "description": "Only enabled (true) or disabled (false) protocols (list only).",
        },
        "tag": {"type": "string", "description": "Only protocols with this tag (list only)."},
        "session": SESSION_PROPERTY,
    },
    "required": ["operation"],
    "additionalProperties": False,
}

# The fields each operation of ``protocols`` reads, and the one it cannot do without.
OPERATION_FIELDS = {
    "list": frozenset({"scope", "source", "enabled", "tag"}),
    "get": frozenset({"id"}),
    "explain": frozenset({"eventId"}),
}
OPERATION_REQUIRES = {"get": "id", "explain": "eventId"}
COMMON_FIELDS = frozenset({"operation", "session"})

# Delivery's tools: (name = DeliveryService method, description, schema, read-only). They
# go without titles: all seven must fit in 6 KiB of tools/list (delivery reference §3.2).
DELIVERY_TOOLS: tuple[tuple[str, str, dict[str, Any], bool], ...] = (
    ("context", CONTEXT_DESCRIPTION, CONTEXT_SCHEMA, True),
    ("record", RECORD_DESCRIPTION, RECORD_SCHEMA, False),
    ("checkpoint", CHECKPOINT_DESCRIPTION, CHECKPOINT_SCHEMA, False),
    ("archive", ARCHIVE_DESCRIPTION, ARCHIVE_SCHEMA, False),
    ("sync", SYNC_DESCRIPTION, SYNC_SCHEMA, False),
    ("session", SESSION_DESCRIPTION, SESSION_SCHEMA, False),
    ("doctor", DOCTOR_DESCRIPTION, DOCTOR_SCHEMA, False),
)


def build_server(project_path: str) -> MCPServer:
    """An MCP server for the project at ``project_path``, opened (and migrated) now."""
    project = open_project(project_path)
    service = project.protocols
    remove_stale_run_folders()  # left behind by a server that was killed mid-run

    @asynccontextmanager
    async def close_project_when_done(_server: MCPServer) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            project.close()

    tools = [
        _tool(
            "load_protocols",
            store=project.store,
            title="Load this turn's protocols",
            description=LOAD_PROTOCOLS_DESCRIPTION,
            schema=LOAD_PROTOCOLS_SCHEMA,
            read_only=False,
            handler=lambda arguments: load_protocols(service, arguments),
        ),
        _tool(
            "protocols",
            store=project.store,
            title="Read protocols",
            description=PROTOCOLS_DESCRIPTION,
            schema=PROTOCOLS_SCHEMA,
            read_only=True,
            handler=lambda arguments: read_protocols(service, arguments),
        ),
        _tool(
            "ultragoal",
            store=project.store,
            title=ULTRAGOAL_TITLE,
            description=ULTRAGOAL_DESCRIPTION,
            schema=ULTRAGOAL_SCHEMA,
            read_only=False,
            handler=partial(_dispatch, project.ultragoal),
        ),
        *(
            _tool(
                name,
                store=project.store,
                title=None,
                description=description,
                schema=schema,
                read_only=read_only,
                handler=partial(_delivery, project, name),
            )
            for name, description, schema, read_only in DELIVERY_TOOLS
        ),
        *(
            _tool(
                name,
                store=project.store,
                title=title,
                description=description,
                schema=schema,
                read_only=name == "knowledge",
                handler=partial(_dispatch, getattr(project, service_name)),
            )
            for name, service_name, title, description, schema in debugging.TOOLS
        ),
    ]
    return MCPServer(
        project.config["protocols"]["mcp_server_name"],
        instructions=INSTRUCTIONS,
        version=__version__,
        tools=tools,
        log_level="WARNING",
        lifespan=close_project_when_done,
    )


def main(project_path: str) -> None:
    """Serve the project's tools over stdio until the client hangs up."""
    build_server(project_path).run("stdio")


def load_protocols(service: ProtocolsService, arguments: dict[str, Any]) -> dict[str, Any]:
    """``load_protocols {eventId}``: the bundle, recorded as this agent's load."""
    return service.load_protocols(arguments)


def read_protocols(service: ProtocolsService, arguments: dict[str, Any]) -> dict[str, Any]:
    """``protocols {operation, ...}``: the CLI's ``--json`` answers (a listing under a
    ``protocols`` key, since a tool answers with an object). Like every CLI command, it
    first brings seeds and protocol files into the store."""
    check_arguments(arguments, PROTOCOLS_SCHEMA)
    operation = arguments["operation"]
    for name in arguments:
        if name not in COMMON_FIELDS and name not in OPERATION_FIELDS[operation]:
            raise invalid_field(
                f"/{name}", "NOT_FOR_OPERATION", f"{name} does not apply to operation {operation}"
            )
    needed = OPERATION_REQUIRES.get(operation)
    if needed is not None and needed not in arguments:
        raise invalid_field(f"/{needed}", "REQUIRED", f"operation {operation} needs {needed}")
    service.reconcile()
    if operation == "explain":
        return tooling.explain(service, arguments["eventId"])
    if operation == "get":
        return service.get_protocol(arguments["id"])
    filters = {key: arguments.get(key) for key in OPERATION_FIELDS["list"]}
    return {"protocols": service.list_protocols(**filters)}


def _delivery(project: IthacaProject, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A delivery tool: the service method of the same name checks the request."""
    answer: dict[str, Any] = getattr(project.delivery, tool)(arguments)
    return answer


def _dispatch(service: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """An ``{operation, ...}`` tool: the service checks the fields each operation takes."""
    answer: dict[str, Any] = service.dispatch(arguments)
    return answer


def _tool(
    name: str,
    *,
    store: Store,
    title: str | None,
    description: str,
    schema: dict[str, Any],
    read_only: bool,
    handler: Callable[[dict[str, Any]], dict[str, Any]],
) -> Tool:
    """A tool that hands ``handler`` the raw arguments and publishes ``schema`` for them."""

    takes_session = "session" in schema.get("properties", {})

    def call(ctx: Context) -> CallToolResult:
        params = ctx.request_context.params or {}
        meta = params.get("_meta") or ctx.request_context.meta
        if meta is not None and not isinstance(meta, dict):
            meta = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else None
        try:
            arguments = dict(params.get("arguments") or {})
            check_text(arguments)
            arguments = caller.bind_session(
                store,
                name,
                arguments,
                meta=meta,
                client=caller.client_name(meta, _initialize_params(ctx)),
                takes_session=takes_session,
            )
            value = handler(arguments)
        except IthacaError as exc:
            return error_result(exc)
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(value, ensure_ascii=False))],
            structured_content=value,
        )

    tool = Tool.from_function(
        call,
        name=name,
        title=title,
        description=description,
        annotations=ToolAnnotations(
            read_only_hint=read_only, destructive_hint=False, open_world_hint=False
        ),
    )
    tool.parameters = schema
    return tool


def _initialize_params(ctx: Context) -> Any:
    """The client's ``initialize`` parameters, where this SDK keeps them."""
    session = getattr(ctx.request_context, "session", None)
    return getattr(session, "client_params", None)
