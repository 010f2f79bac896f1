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
for the tools that take ``session`` (DESIGN, Kernel contracts 4). A refusal, and a storage
fault (a full disk, a read-only file system, a permission refused, a locked store: each
under its own code, ``kernel.storage_faults``), is answered as the coded error
``ithaca.mcp.errors`` shapes, never as the SDK's prose. Results are JSON
objects, so clients get ``structuredContent`` as well as the same JSON as text; each tool
publishes its title, its behaviour hints and an output schema for that object
(``ithaca.kernel.tools``).

The project is opened when the server is built. A host plugin starts ``ithaca mcp`` in
every repository, so a project that cannot be opened (no ``.ithaca/`` yet, or a folder
outside any Git repository) does not stop the server: it lists its tools and answers
every call with the coded error and the step that fixes it (``NOT_INITIALISED``: run
``ithaca init``). Where Ithaca was set up but its state is gone (``.ithaca/`` deleted,
its database missing or unreadable), the error says so instead, with the commands that
restore it (``STATE_MISSING``, ``STATE_UNREADABLE``, ``STATE_EMPTIED``, from
``kernel.lost_state``), and nothing sets the project up again on the agent's behalf. Each
call tries to open the project again, so the tools work as soon as the user has run
``ithaca init`` or restored the state. In a Git repository that was never set up, a
``record`` call whose first entry is ``baseline initialize`` sets the project up itself
and goes on (docs/delivery.md), as ``ithaca record baseline initialize`` does.

Started by the Claude Code plugin (``ithaca mcp --plugin``) in a project whose own
``.mcp.json`` already registers Ithaca's server (``ithaca install claude``), the server
lists no tools and says why: the agent would otherwise see every tool twice.

The SDK runs these synchronous tools on worker threads; the store gives each thread its
own connection, and the server's lifespan closes them when a client disconnects.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations

from ithaca import __version__, collected, resolve
from ithaca.app import IthacaProject, init_project, open_project
from ithaca.kernel import IthacaError, NotFound, ToolSpec, config, find_project, git_top
from ithaca.mcp import caller
from ithaca.mcp.errors import check_text, fault_result
from ithaca.validators import remove_stale_run_folders

INSTRUCTIONS = (
    "Ithaca holds this project's protocols: rules stored outside your context that bind "
    "each turn and are enforced on your tool calls. When the prompt's context says Ithaca "
    "admitted it as an event, call load_protocols with that event id before any other "
    "tool, and follow every rule in the bundle it returns."
)
STEPPED_ASIDE = (
    "Ithaca's tools in this project come from its own MCP server (set up by `ithaca "
    "install claude`), so the Ithaca plugin's server offers none: use the other one."
)
DEFAULT_SERVER_NAME = "ithaca"
NOT_INITIALISED = "NOT_INITIALISED"


class ProjectHandle:
    """The server's project: opened when first needed, and again after a failed open."""

    def __init__(self, path: str):
        self.path = os.path.abspath(path)
        self.project: IthacaProject | None = None
        self._lock = threading.Lock()

    def open(self) -> IthacaProject:
        """The open project, or the coded error that says what to do first."""
        with self._lock:
            if self.project is None:
                self.project = self._opened()
            return self.project

    def open_for(self, tool: str, arguments: dict[str, Any]) -> tuple[IthacaProject, bool]:
        """The project for one call, and whether this call set it up (``record`` with a
        first ``baseline initialize`` entry, in a Git repository without ``.ithaca/``)."""
        with self._lock:
            if self.project is not None:
                return self.project, False
            try:
                self.project = self._opened()
                return self.project, False
            except IthacaError as exc:
                if exc.code != NOT_INITIALISED or not _initialises(tool, arguments):
                    raise
                if git_top(self.path) is None:
                    raise
            self.project, _ = init_project(self.path)
            return self.project, True

    def database(self) -> str | None:
        """The state database the server's calls use (that a storage fault names)."""
        opened = self.project
        if opened is not None:
            return opened.project.db_path
        found = find_project(self.path)
        return found.db_path if found is not None else None

    def close(self) -> None:
        with self._lock:
            if self.project is not None:
                self.project.close()
                self.project = None

    def _opened(self) -> IthacaProject:
        """The project, or why not: lost state is answered as ``open_project`` words it."""
        try:
            return open_project(self.path)
        except IthacaError as exc:
            if exc.code != NOT_INITIALISED:
                raise
            raise _not_initialised(self.path) from None


def build_server(project_path: str, *, plugin: bool = False) -> MCPServer:
    """An MCP server for the project at ``project_path``, opened (and migrated) now if it
    can be; otherwise every call answers why not. For the plugin (``plugin``), one with no
    tools where the project registers Ithaca's server itself."""
    handle = ProjectHandle(project_path)
    try:
        name = str(handle.open().config["protocols"]["mcp_server_name"])
    except Exception as exc:  # the calls answer why, each trying again
        if fault_result(exc, handle.database()) is None:
            raise
        name = _server_name_without_project()
    remove_stale_run_folders()  # left behind by a server that was killed mid-run

    @asynccontextmanager
    async def close_project_when_done(_server: MCPServer) -> AsyncIterator[None]:
        try:
            yield None
        finally:
            handle.close()

    aside = plugin and name in _project_servers(handle.path)
    tools = [] if aside else [_tool(spec, handle) for spec in tool_specs()]
    return MCPServer(
        name,
        instructions=STEPPED_ASIDE if aside else INSTRUCTIONS,
        version=__version__,
        tools=tools,
        log_level="WARNING",
        lifespan=close_project_when_done,
    )


def main(project_path: str, *, plugin: bool = False) -> None:
    """Serve the project's tools over stdio until the client hangs up."""
    build_server(project_path, plugin=plugin).run("stdio")


def _project_servers(path: str) -> set[str]:
    """The MCP servers the project's own ``.mcp.json`` registers (none if unreadable)."""
    root = git_top(path) or path
    try:
        with open(os.path.join(root, ".mcp.json"), encoding="utf-8") as handle:
            servers = json.load(handle).get("mcpServers")
    except (OSError, ValueError, AttributeError):
        return set()
    return set(servers) if isinstance(servers, dict) else set()


def tool_specs() -> list[ToolSpec]:
    """Every tool the parts' manifests bring, in the parts' order."""
    return [spec for target in collected("MCP_TOOLS") for spec in resolve(target)]


def hints(spec: ToolSpec) -> ToolAnnotations:
    """The spec's hints, each published where it differs from the MCP default (not
    read-only, destructive, not idempotent, open world); a read-only tool's destructive
    and idempotent hints mean nothing, so they are left out."""
    if spec.read_only:
        return ToolAnnotations(read_only_hint=True, open_world_hint=False)
    return ToolAnnotations(
        destructive_hint=False if not spec.destructive else None,
        idempotent_hint=True if spec.idempotent else None,
        open_world_hint=False,
    )


def _tool(spec: ToolSpec, handle: ProjectHandle) -> Tool:
    """A tool that hands the spec's service method the raw arguments, publishing the
    spec's input and output schemas."""
    name = spec.name
    takes_session = spec.takes_session

    def call(ctx: Context) -> CallToolResult:
        params = ctx.request_context.params or {}
        meta = params.get("_meta") or ctx.request_context.meta
        if meta is not None and not isinstance(meta, dict):
            meta = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else None
        try:
            arguments = dict(params.get("arguments") or {})
            check_text(arguments)
            project, set_up_now = handle.open_for(name, arguments)
            if not set_up_now:  # no hook can leave a ticket before .ithaca/ exists
                arguments = caller.bind_session(
                    project.store,
                    name,
                    arguments,
                    meta=meta,
                    client=caller.client_name(meta, _initialize_params(ctx)),
                    takes_session=takes_session,
                )
            value = _method(project, spec)(arguments)
        except Exception as exc:
            answer = fault_result(exc, handle.database())
            if answer is None:
                raise  # a bug: the SDK logs its traceback and says the tool failed
            return answer
        return CallToolResult(
            content=[TextContent(type="text", text=json.dumps(value, ensure_ascii=False))],
            structured_content=value,
        )

    tool = Tool.from_function(
        call,
        name=name,
        title=spec.title,
        description=spec.description,
        annotations=hints(spec),
    )
    tool.parameters = spec.schema
    # Published as it is; the SDK validates against it only when a model is given too.
    tool.fn_metadata.output_schema = spec.output
    return tool


def _method(project: IthacaProject, spec: ToolSpec) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The spec's service method, found at call time: a service opens on first use."""
    method: Callable[[dict[str, Any]], dict[str, Any]] = getattr(
        getattr(project, spec.service), spec.method
    )
    return method


def _initialises(tool: str, arguments: dict[str, Any]) -> bool:
    """A ``record`` request whose first entry is ``baseline initialize``."""
    entries = arguments.get("entries")
    if tool != "record" or not isinstance(entries, list) or not entries:
        return False
    first = entries[0]
    return isinstance(first, dict) and (first.get("kind"), first.get("action")) == (
        "baseline",
        "initialize",
    )


def _not_initialised(path: str) -> NotFound:
    """``NOT_INITIALISED`` with the step that fixes it, in or outside a Git repository."""
    root = git_top(path)
    if root is None:
        return NotFound(
            NOT_INITIALISED,
            f"{path} is not in a Git repository, and no Ithaca project holds it, so Ithaca's"
            " tools have nothing to work on here: run `ithaca init` in your project's"
            " repository and start the agent there",
            {"path": path, "gitRepository": False},
        )
    return NotFound(
        NOT_INITIALISED,
        f"Ithaca is not set up in the repository {root} yet: run `ithaca init` there, then"
        " call this tool again",
        {"path": root, "gitRepository": True},
    )


def _server_name_without_project() -> str:
    """The configured server name from the user's settings alone (else ``ithaca``)."""
    try:
        return str(config.load(None)["protocols"]["mcp_server_name"])
    except IthacaError:
        return DEFAULT_SERVER_NAME


def _initialize_params(ctx: Context) -> Any:
    """The client's ``initialize`` parameters, where this SDK keeps them."""
    session = getattr(ctx.request_context, "session", None)
    return getattr(session, "client_params", None)
