"""The hook dispatcher: one host event in, one host answer out, and ``ithaca-hook <host>
<event>``, the process a host starts for each hook call (``main``, ``serve``).

It owns the parts every gate shares — finding the project, loading configuration,
opening the store without migrating, classifying the call once, parsing prompt markers
once — then asks each registered gate for an opinion, combines them (deny/block > ask >
allow > abstain), and runs every gate's ``commit`` in one write transaction that also
upserts the host-session registry.

Failure policy. Inside a project that has ``.ithaca/``, governed state is active, so an
internal error fails closed where the agent could change something: a mutating tool
call is denied and a prompt is blocked, each with a reason naming the error. Read-only
calls and informational events (SessionStart, PostToolUse, SessionEnd) are allowed, so a
broken Ithaca never stops an agent from looking around.

Lost state fails closed too: where Ithaca was set up but its state is gone, no gate runs,
and every call that could change something is refused with the loss's code and the
commands that restore it (``hosts.lost``, loaded only then). Outside a project every hook
abstains. Hook processes import only the standard library and Ithaca's light modules.
"""

from __future__ import annotations

import os
import stat  # loaded by ``os`` already
import sys

from ithaca import collected, resolve
from ithaca.hosts import HOSTS
from ithaca.kernel import (
    DISPLACED,
    FAILED_CLOSED,
    LATEST_VERSION,
    VIA_PLUGIN,
    Call,
    GateContext,
    IthacaError,
    Opinion,
    Project,
    clock,
    combine,
    config,
    connect,
    find_project,
    ids,
    lightjson,
    pinned_project,
    schema_version,
    sqlite,
    touch_host_session,
    write_transaction,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from types import ModuleType
    from typing import Any, Protocol

    from ithaca.kernel import lost_state

    class HostAdapter(Protocol):
        """What a host's adapter module (``ithaca.hosts.HOSTS``) offers the dispatcher."""

        HOST: str
        EVENTS: tuple[str, ...]

        def tool_call(self, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]: ...

        def normalised(self, payload: dict[str, Any], server_name: str) -> dict[str, Any]: ...

        def wired_by_install(self, project_root: str, event: str) -> bool: ...

        def runs_ithaca(self, project_root: str) -> str | None: ...

        def render(self, event: str, final: Opinion) -> tuple[str, int]: ...


GATED_EVENTS = ("UserPromptSubmit", "PreToolUse", "Stop", "SubagentStop")
# The project folder Claude Code gives its hooks: the install's root, whatever the cwd.
PROJECT_DIR_VARIABLE = "CLAUDE_PROJECT_DIR"
USAGE = f"usage: ithaca-hook <host> <event> [--plugin]   (hosts: {', '.join(HOSTS)})"
# The hooks of a host plugin (Claude Code's) say so: they step aside where the project's
# own install wires the same event.
PLUGIN_FLAG = "--plugin"


def main(argv: list[str] | None = None) -> int:
    """``ithaca-hook <host> <event> [--plugin]``: reads the host's JSON on stdin, prints
    its answer."""
    args = sys.argv[1:] if argv is None else argv
    plugin = args[2:] == [PLUGIN_FLAG]
    if len(args) - plugin != 2 or args[0] not in HOSTS:
        print(USAGE, file=sys.stderr)
        return 2
    host, event = args[:2]
    adapter = _adapter(host)
    if event not in adapter.EVENTS:
        print(f"ithaca-hook: unknown {host} event {event!r}", file=sys.stderr)
        return 2
    stdin_text = sys.stdin.read()
    if event == "SessionStart":
        _export_session(stdin_text, getattr(adapter, "SESSION_ENV_FILE", None))
    out, code = run(host, event, stdin_text, plugin=plugin)
    if code == 2:
        print(out, file=sys.stderr)
    elif out:
        print(out)
    return code


def serve() -> None:
    """``main`` in a process that lives for exactly one hook call (``scripts/ithaca-hook``,
    which has switched the garbage collector off before importing this module).

    Once the answer is flushed the process ends at once, skipping the interpreter's
    module-by-module tear-down (the store connection is already closed): milliseconds of
    every tool call on a slow machine.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(host: str, event: str, stdin_text: str, *, plugin: bool = False) -> tuple[str, int]:
    """Handle one hook call; returns (stdout, exit code). A plugin's hook abstains where
    the project's own install runs Ithaca's hook for the event."""
    adapter = _adapter(host)
    try:
        payload = lightjson.loads(stdin_text) if stdin_text.strip() else {}
        if not isinstance(payload, dict):
            raise ValueError("hook input is not a JSON object")
    except ValueError as exc:
        return _unreadable_input(adapter, event, str(exc), plugin)
    given_cwd = payload.get("cwd")
    cwd = given_cwd if isinstance(given_cwd, str) else os.getcwd()
    anchor = os.environ.get(PROJECT_DIR_VARIABLE)
    project, displaced = pinned_project(cwd, anchor)
    wired_root = project.root if project is not None else cwd
    if project is None or project.root != os.path.realpath(anchor or project.work_root):
        # No state here, or state that is not the wired project's own: was it lost?
        from ithaca.hosts import lost

        wired_root, found = lost.folder(adapter, event, cwd, anchor, plugin)
        if found is not None:
            try:
                final = lost.answer(adapter, event, payload, wired_root, found)
            except Exception as exc:  # the outermost edge of the hook process: fail by policy
                final = _failure(event, found.code, f"{found.message} ({exc})", payload)
            return adapter.render(event, final)
    if project is None or (plugin and adapter.wired_by_install(wired_root, event)):
        return adapter.render(event, Opinion())  # an abstention in the host's words
    conn: sqlite3.Connection | None = None
    call: Call | None = None
    try:
        settings, config_error = _config(project)
        payload = adapter.normalised(payload, settings["protocols"]["mcp_server_name"])
        session_id = _session_id(payload)
        if event == "PreToolUse":  # first, so that a broken store still lets reads through
            call = _classify(adapter, payload, project, cwd, settings, session_id)
        conn, schema_current, lost_database = _open(project)
        if lost_database is not None and event != "SessionStart":
            from ithaca.hosts import lost

            return adapter.render(event, lost.opinion(event, call, lost_database))
        ctx = GateContext(
            host=host,
            event=event,
            payload=payload,
            project=project,
            config=settings,
            conn=conn,
            session_id=session_id,
            schema_current=schema_current,
            now=clock.now(),
        )
        if displaced is not None:
            ctx.scratch[DISPLACED] = displaced
        if plugin:
            ctx.scratch[VIA_PLUGIN] = True
        ctx.classify = lambda: classified(ctx, project)
        if event == "SessionStart":  # the hook's parent is the host (kernel.lineage)
            from ithaca.kernel import lineage

            lineage.record_host(config.home(), os.getppid())
        if event == "UserPromptSubmit":
            _parse_prompt(ctx)
        final = _decide(ctx, call, config_error)
        final = _commit(ctx, call, final)
        if lost_database is not None:  # what the gates still knew: a compaction's snapshot
            from ithaca.hosts import lost

            final = lost.before(final, lost_database)
    except Exception as exc:  # the outermost edge of the hook process: fail by policy
        code = getattr(exc, "code", type(exc).__name__)
        final = _failure(
            event, code, getattr(exc, "message", None) or str(exc) or code, payload, call
        )
    finally:
        if conn is not None:
            conn.close()
    return adapter.render(event, final)


def _adapter(host: str) -> HostAdapter:
    adapter: HostAdapter = resolve(HOSTS[host])
    return adapter


def _config(project: Project) -> tuple[dict[str, Any], IthacaError | None]:
    try:
        return config.load(project.state_root), None
    except IthacaError as exc:
        return config.defaults(), exc


def _open(project: Project) -> tuple[sqlite3.Connection | None, bool, lost_state.Lost | None]:
    """The store's connection and whether its schema is current; or, where the database is
    gone, empty after Ithaca committed to it, or cannot be read, what was lost."""
    try:
        info = os.stat(project.db_path)
    except OSError:
        return None, False, _lost_database(project)
    if info.st_size == 0 or not stat.S_ISREG(info.st_mode):
        lost = _lost_database(project)
        if lost is not None:
            return None, False, lost
    conn = None
    try:
        conn = connect(project.db_path, set_wal=False)  # the store that made it set WAL
        return conn, schema_version(conn) == LATEST_VERSION, None
    except (IthacaError, sqlite.Error) as exc:
        if conn is not None:
            conn.close()
        lost = _lost_database(project, getattr(exc, "message", None) or str(exc))
        if lost is None:
            raise  # not lost (a lock held elsewhere): the failure policy answers
        return None, False, lost


def _lost_database(project: Project, error: str | None = None) -> lost_state.Lost | None:
    from ithaca.kernel import lost_state  # only where the database would not do

    return lost_state.database_lost(project, error)


def _session_id(payload: dict[str, Any]) -> str | None:
    value = payload.get("session_id")
    return value if ids.is_session_id(value) else None


def classified(ctx: GateContext, project: Project) -> Call:
    """The hook call's tool call, classified as PreToolUse classifies it (for a gate that
    reads a PostToolUse call's commands)."""
    given_cwd = ctx.payload.get("cwd")
    cwd = given_cwd if isinstance(given_cwd, str) else os.getcwd()
    return _classify(_adapter(ctx.host), ctx.payload, project, cwd, ctx.config, ctx.session_id)


def _classify(
    adapter: HostAdapter,
    payload: dict[str, Any],
    project: Project,
    cwd: str,
    settings: dict[str, Any],
    session_id: str | None,
) -> Call:
    from ithaca.kernel import classify_call

    tool_name, tool_input = adapter.tool_call(payload)
    agent_id = payload.get("agent_id")
    return classify_call(
        adapter.HOST,
        tool_name,
        tool_input,
        cwd,
        project_root=project.root,
        read_only_tools=tuple(settings["protocols"]["read_only_tools"]),
        server_name=settings["protocols"]["mcp_server_name"],
        session_id=session_id,
        agent_id=agent_id if isinstance(agent_id, str) else None,
        tests_are_read_only=settings["ulysses"]["tests_are_read_only"],
        read_only_commands=tuple(settings["ulysses"]["read_only_commands"]),
    )


def _parse_prompt(ctx: GateContext) -> None:
    from ithaca.kernel import markers

    prompt = ctx.payload.get("prompt")
    try:
        ctx.prompt = markers.parse(prompt if isinstance(prompt, str) else "")
    except IthacaError as exc:
        ctx.prompt = markers.Prompt()
        ctx.prompt_error = exc


def _gates(event: str) -> list[tuple[str, ModuleType]]:
    """The gates the parts' manifests register for ``event``, in the parts' order; a
    module is imported only for the events it handles."""
    return [(name, resolve(name)) for name, events in collected("GATES") if event in events]


def _decide(ctx: GateContext, call: Call | None, config_error: IthacaError | None) -> Opinion:
    if config_error is not None:
        return _failure(ctx.event, config_error.code, config_error.message, ctx.payload, call)
    if ctx.event == "PreToolUse" and ctx.conn is not None and not ctx.schema_current:
        if call is not None and call.mutating:
            return Opinion(
                "deny",
                "STATE_NEEDS_MIGRATION",
                "Ithaca: the state database needs a migration; ask the user to run "
                "`ithaca doctor --repair`.",
                gate="kernel",
            )
        return Opinion("allow", gate="kernel")
    opinions = []
    for name, gate in _gates(ctx.event):
        try:
            opinion = gate.decide(call, ctx)
        except (IthacaError, sqlite.Error, OSError, KeyError, ValueError, TypeError) as exc:
            code = getattr(exc, "code", type(exc).__name__)
            opinion = _failure(ctx.event, code, str(exc), ctx.payload, call)
        opinion.gate = opinion.gate or name.split(".")[1]
        opinions.append(opinion)
    ctx.scratch["_gates"] = opinions
    return combine(opinions)


def _commit(ctx: GateContext, call: Call | None, final: Opinion) -> Opinion:
    conn = ctx.conn
    if conn is None or not ctx.schema_current:
        return final
    try:
        with write_transaction(conn):
            if ctx.session_id:
                touch_host_session(
                    conn, ctx.host, ctx.session_id, ctx.now, ended=ctx.event == "SessionEnd"
                )
            overruled = []
            for _, gate in _gates(ctx.event):
                commit = getattr(gate, "commit", None)
                if commit is not None:
                    overruled.append(commit(call, final, ctx))
    except (IthacaError, sqlite.Error, OSError) as exc:
        code = getattr(exc, "code", type(exc).__name__)
        failed = _failure(ctx.event, code, str(exc), ctx.payload, call)
        return failed if failed.effect in ("deny", "block") else final
    # A commit may find the world changed since its decide (a race lost): it says so.
    return combine([final, *(opinion for opinion in overruled if opinion is not None)])


def _failure(
    event: str,
    code: str,
    message: str,
    payload: dict[str, Any],
    call: Call | None = None,
) -> Opinion:
    """Fail closed where the agent could change something, open elsewhere."""
    if event == "UserPromptSubmit":
        reason = f"Ithaca could not admit this prompt ({code}): {message}"
        return Opinion("block", code, reason, gate=FAILED_CLOSED)
    if event == "PreToolUse" and (call is None or call.mutating):
        return Opinion(
            "deny",
            code,
            f"Ithaca could not evaluate this call ({code}: {message}); mutating calls are "
            "blocked until this is fixed (see `ithaca doctor`).",
            gate=FAILED_CLOSED,
        )
    return Opinion("abstain", code)


def _unreadable_input(
    adapter: HostAdapter, event: str, problem: str, plugin: bool
) -> tuple[str, int]:
    if event not in GATED_EVENTS:
        return "", 0
    cwd = os.getcwd()
    if find_project(cwd) is None:
        from ithaca.hosts import lost

        anchor = os.environ.get(PROJECT_DIR_VARIABLE)
        if lost.folder(adapter, event, cwd, anchor, plugin)[1] is None:
            return "", 0
    return f"Ithaca: the hook input could not be read ({problem}).", 2


def write_session_env(session_id: str | None, env_file: str | None) -> None:
    """Export ``ITHACA_SESSION_ID`` for the host session's later commands."""
    if not session_id or not env_file:
        return
    with open(env_file, "a", encoding="utf-8") as handle:
        handle.write(f"export ITHACA_SESSION_ID={session_id}\n")


def _export_session(stdin_text: str, env_var: str | None) -> None:
    try:
        payload = lightjson.loads(stdin_text)
    except ValueError:
        return
    session_id = payload.get("session_id") if isinstance(payload, dict) else None
    if ids.is_session_id(session_id) and env_var:
        try:
            write_session_env(session_id, os.environ.get(env_var))
        except OSError:
            return
