"""Ithaca's MCP server: the tools an agent calls, over stdio.

The server is a thin adapter over the same services the CLI calls, and it acts only as
``agent``. It knows no tool by name: each part's manifest lists the tools it brings
(``ithaca.kernel.tools.ToolSpec``): Protocols' ``load_protocols`` and read-only
``protocols``, the validators' ``notebook``, Ulysses' ``ulysses`` and ``knowledge``,
Delivery's ``context``, ``record``, ``checkpoint``, ``archive``, ``sync``, ``session`` and
``doctor``, and ``ultragoal``'s agent operations; nothing a user alone may do.

Each tool publishes a hand-written JSON Schema and hands the raw arguments to its part's
service method, which checks them itself, so unknown fields and wrong types are refused
with coded errors instead of being dropped or described in the SDK's prose. The calling
host session comes from the hook's call ticket (``ithaca.mcp.caller``) and is filled in
for the tools that take ``session`` (DESIGN, Kernel contracts 4). Results are JSON
objects, so clients get ``structuredContent`` as well as the same JSON as text.

The project is opened once, when the server is built. The SDK runs these synchronous
tools on worker threads; the store gives each thread its own connection, and the
server's lifespan closes them when a client disconnects.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from ithaca import __version__, collected, resolve
from ithaca.app import open_project
from ithaca.kernel import IthacaError, Store, ToolSpec
from ithaca.mcp import caller
from ithaca.mcp.errors import check_text, error_result
from ithaca.validators import remove_stale_run_folders

INSTRUCTIONS = (
    "Ithaca holds this project's protocols: rules stored outside your context that bind "
    "each turn and are enforced on your tool calls. When the prompt's context says Ithaca "
    "admitted it as an event, call load_protocols with that event id before any other "
    "tool, and follow every rule in the bundle it returns."
)


def build_server(project_path: str) -> MCPServer:
    """An MCP server for the project at ``project_path``, opened (and migrated) now."""
    project = open_project(project_path)
    remove_stale_run_folders()  # left behind by a server that was killed mid-run

    @asynccontextmanager
    async def close_project_when_done(_server: MCPServer) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            project.close()

    def handler(spec: ToolSpec) -> Callable[[dict[str, Any]], dict[str, Any]]:
        """The spec's service method, found at call time: a service opens on first use."""
        return lambda arguments: getattr(getattr(project, spec.service), spec.method)(arguments)

    tools = [_tool(spec, store=project.store, handler=handler(spec)) for spec in tool_specs()]
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


def tool_specs() -> list[ToolSpec]:
    """Every tool the parts' manifests bring, in the parts' order."""
    return [spec for target in collected("MCP_TOOLS") for spec in resolve(target)]


def _tool(
    spec: ToolSpec, *, store: Store, handler: Callable[[dict[str, Any]], dict[str, Any]]
) -> Tool:
    """A tool that hands ``handler`` the raw arguments and publishes the spec's schema."""
    name = spec.name
    takes_session = "session" in spec.schema.get("properties", {})

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
        title=spec.title,
        description=spec.description,
        annotations=ToolAnnotations(
            read_only_hint=spec.read_only, destructive_hint=False, open_world_hint=False
        ),
    )
    tool.parameters = spec.schema
    return tool


def _initialize_params(ctx: Context) -> Any:
    """The client's ``initialize`` parameters, where this SDK keeps them."""
    session = getattr(ctx.request_context, "session", None)
    return getattr(session, "client_params", None)
