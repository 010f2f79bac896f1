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

A host that gets no answer it understands runs the call, so every hook answers, closed,
whatever it is fed and however long its checks take (docs/hooks.md "Host timeouts"):
input it cannot read (not UTF-8, not a JSON object, a field of the wrong type, nesting
too deep) is refused on every event that can block (``HOOK_INPUT_UNREADABLE``, exit 2)
and reported on the others; it decides before its host's timeout (``kernel.deadline``),
waiting for the store's lock, Git or a check only until then (``STORE_LOCKED``,
``HOOK_DEADLINE``); and nothing escapes ``main`` but a block (``HOOK_FAILED``).
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
    deadline,
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
        BLOCKING_EVENTS: tuple[str, ...]
        TIMEOUTS: dict[str, int]

        def tool_call(self, payload: dict[str, Any]) -> tuple[str, dict[str, Any]]: ...

        def normalised(self, payload: dict[str, Any], server_name: str) -> dict[str, Any]: ...

        def wired_by_install(self, project_root: str, event: str) -> bool: ...

        def runs_ithaca(self, project_root: str) -> str | None: ...

        def render(self, event: str, final: Opinion) -> tuple[str, int]: ...


PROMPT_EVENTS = ("UserPromptSubmit", "UserPromptExpansion")
# The codes of a hook's own failures (docs/hooks.md "Host timeouts").
HOOK_INPUT_UNREADABLE = "HOOK_INPUT_UNREADABLE"
HOOK_FAILED = "HOOK_FAILED"
STORE_LOCKED = "STORE_LOCKED"
# Larger input is refused unread: no host sends a tool call of this size.
MAX_INPUT_BYTES = 64 << 20
MAX_TIMEOUT_S = 3600.0
TIMEOUT_FLAG = "--timeout"
# The hook input's fields Ithaca reads, with the JSON type each must have when present.
FIELDS = (
    ("session_id", str, "a string"),
    ("cwd", str, "a string"),
    ("hook_event_name", str, "a string"),
    ("transcript_path", str, "a string"),
    ("agent_id", str, "a string"),
    ("turn_id", str, "a string"),
    ("prompt", str, "a string"),
    ("tool_name", str, "a string"),
    ("tool_input", dict, "an object"),
)
# The project folder Claude Code gives its hooks: the install's root, whatever the cwd.
PROJECT_DIR_VARIABLE = "CLAUDE_PROJECT_DIR"
USAGE = (
    "usage: ithaca-hook <host> <event> [--timeout SECONDS] [--plugin]"
    f"   (hosts: {', '.join(HOSTS)})"
)
# The hooks of a host plugin (Claude Code's) say so: they step aside where the project's
# own install wires the same event.
PLUGIN_FLAG = "--plugin"


def main(argv: list[str] | None = None) -> int:
    """``ithaca-hook <host> <event> [--timeout SECONDS] [--plugin]``: reads the host's JSON
    on stdin, prints its answer. Nothing escapes it: whatever goes wrong is answered in the
    host's blocking convention (exit 2, the reason on stderr), never with exit 1 or a
    traceback, which both hosts take as a failed hook and let the call run."""
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except BaseException as exc:  # the last resort of the hook process: block
        _say(_last_resort(exc), sys.stderr)
        return 2
    finally:
        deadline.clear()


def _main(args: list[str]) -> int:
    parsed = _arguments(args)
    if isinstance(parsed, str):
        print(parsed, file=sys.stderr)
        return 2
    host, event, timeout, plugin = parsed
    adapter = _adapter(host)
    deadline.start(timeout if timeout is not None else adapter.TIMEOUTS[event])
    stdin_text, problem = _read_input()
    if stdin_text is None:
        out, code = _unreadable_input(adapter, event, problem, plugin)
    else:
        if event == "SessionStart":
            _export_session(stdin_text, getattr(adapter, "SESSION_ENV_FILE", None))
        out, code = run(host, event, stdin_text, plugin=plugin)
    if code == 2:
        print(out, file=sys.stderr)
    elif out:
        print(out)
    return code


def _arguments(args: list[str]) -> tuple[str, str, float | None, bool] | str:
    """Host, event, timeout (None: the adapter's) and plugin flag; or the usage error."""
    if len(args) < 2 or args[0] not in HOSTS:
        return USAGE
    host, event, rest = args[0], args[1], args[2:]
    if event not in _adapter(host).EVENTS:
        return f"ithaca-hook: unknown {host} event {event!r}"
    plugin = PLUGIN_FLAG in rest
    rest = [arg for arg in rest if arg != PLUGIN_FLAG]
    if not rest:
        return host, event, None, plugin
    if len(rest) != 2 or rest[0] != TIMEOUT_FLAG:
        return USAGE
    try:
        timeout = float(rest[1])
    except ValueError:
        timeout = -1.0
    if not 0 < timeout <= MAX_TIMEOUT_S:  # NaN fails too
        return f"ithaca-hook: {TIMEOUT_FLAG} takes seconds, above 0 and at most {MAX_TIMEOUT_S:g}"
    return host, event, timeout, plugin


def _read_input() -> tuple[str | None, str]:
    """The hook input as text, or None and what is wrong with it."""
    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        return None, "there is no standard input"
    try:
        data = stream.read(MAX_INPUT_BYTES + 1)
    except OSError as exc:
        return None, f"standard input could not be read: {exc.strerror or exc}"
    if len(data) > MAX_INPUT_BYTES:
        return None, f"it is larger than {MAX_INPUT_BYTES // (1 << 20)} MiB"
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return None, f"it is not UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start})"


def _say(text: str, stream: Any) -> None:
    try:
        print(text, file=stream)
    except BaseException:  # nowhere left to report it
        pass


def _last_resort(exc: BaseException) -> str:
    try:
        what = f"{type(exc).__name__}: {exc}"[:500]
    except BaseException:
        what = "an unprintable error"
    return (
        f"Ithaca: the hook failed ({HOOK_FAILED}: {what}); the call is refused so that it "
        "cannot run unchecked. Run `ithaca doctor`, and report the error if it persists."
    )


def serve() -> None:
    """``main`` in a process that lives for exactly one hook call (``scripts/ithaca-hook``,
    which has switched the garbage collector off before importing this module).

    Once the answer is flushed the process ends at once, skipping the interpreter's
    module-by-module tear-down (the store connection is already closed): milliseconds of
    every tool call on a slow machine.
    """
    code = main()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:  # the host has stopped listening
            pass
    os._exit(code)


def run(host: str, event: str, stdin_text: str, *, plugin: bool = False) -> tuple[str, int]:
    """Handle one hook call; returns (stdout, exit code). A plugin's hook abstains where
    the project's own install runs Ithaca's hook for the event."""
    adapter = _adapter(host)
    payload, problem = _payload(stdin_text)
    if payload is None:
        return _unreadable_input(adapter, event, problem, plugin)
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
        if deadline.cut_short():  # a wait ended at the deadline: that decision is unsure
            final = _late(event, payload, call)
        if lost_database is not None:  # what the gates still knew: a compaction's snapshot
            from ithaca.hosts import lost

            final = lost.before(final, lost_database)
    except Exception as exc:  # the outermost edge of the hook process: fail by policy
        final = _failure(event, *_coded(exc, project), payload, call)
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
        _bound_waits(conn)
        lost = _lost_journal(project, conn)
        if lost is not None:
            conn.close()
            return None, False, lost
        return conn, schema_version(conn) == LATEST_VERSION, None
    except (IthacaError, sqlite.Error) as exc:
        if conn is not None:
            conn.close()
        lost = _lost_database(project, getattr(exc, "message", None) or str(exc))
        from ithaca.kernel import storage_fault

        fault = storage_fault(exc, project.db_path)
        # A full disk, a read-only mount, a lock: nothing is lost. (A database the user
        # may not open keeps the lost-state code its restore is documented under.)
        if fault is not None and (lost is None or fault.code != "PERMISSION_DENIED"):
            raise fault from exc
        if lost is None:
            raise  # not lost, and no storage fault: the failure policy answers
        return None, False, lost


def _lost_database(project: Project, error: str | None = None) -> lost_state.Lost | None:
    from ithaca.kernel import lost_state  # only where the database would not do

    return lost_state.database_lost(project, error)


def _lost_journal(project: Project, conn: sqlite3.Connection) -> lost_state.Lost | None:
    """What the journal lost, where it no longer holds the head its anchor names: a cheap
    test on every call (``kernel.anchor.behind``); the diagnosis loads only where it fails."""
    from ithaca.kernel import anchor

    if not anchor.behind(conn):
        return None
    from ithaca.kernel import lost_state

    return lost_state.journal_lost(project, conn)


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
            opinion = _failure(ctx.event, *_coded(exc, ctx.project), ctx.payload, call)
        opinion.gate = opinion.gate or name.split(".")[1]
        opinions.append(opinion)
    ctx.scratch["_gates"] = opinions
    return combine(opinions)


def _commit(ctx: GateContext, call: Call | None, final: Opinion) -> Opinion:
    conn = ctx.conn
    if conn is None or not ctx.schema_current:
        return final
    try:
        _bound_waits(conn)
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
        failed = _failure(ctx.event, *_coded(exc, ctx.project), ctx.payload, call)
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
    if event in PROMPT_EVENTS:
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


def _late(event: str, payload: dict[str, Any], call: Call | None) -> Opinion:
    """The answer of a hook whose wait ended at its deadline (``kernel.deadline``): what
    the failure policy gives, and a block of a Stop, whose check did not finish."""
    message = (
        "a check did not finish before the host's hook timeout; the call is refused so "
        "that it cannot run unchecked. Retry; if it persists, see `ithaca doctor`"
    )
    if event in ("Stop", "SubagentStop"):
        reason = f"Ithaca could not finish its end-of-turn check ({deadline.HOOK_DEADLINE})."
        return Opinion("block", deadline.HOOK_DEADLINE, reason, gate=FAILED_CLOSED)
    return _failure(event, deadline.HOOK_DEADLINE, message, payload, call)


def _coded(exc: BaseException, project: Project | None = None) -> tuple[str, str]:
    """The code and message a failure is answered with: a store locked by another process
    is ``STORE_LOCKED``; another storage fault (a full disk, a read-only file system, a
    permission refused) its own code (``kernel.storage_faults``); an Ithaca error keeps its
    own code; anything else is named."""
    details = getattr(exc, "details", None)
    busy = isinstance(details, dict) and details.get("reason") == "store_busy"
    if busy or (isinstance(exc, sqlite.OperationalError) and _is_locked(str(exc))):
        holders = _lock_holders(project.db_path) if project is not None else []
        by = f" (pid {', '.join(map(str, holders))})" if holders else ""
        return STORE_LOCKED, (
            f"the store is locked by another process{by} past the hook's deadline; the call "
            "is refused so that it cannot run unchecked. Retry, or see `ithaca doctor`"
        )
    from ithaca.kernel import storage_fault  # loaded only on a failure

    fault = storage_fault(exc, project.db_path if project is not None else None)
    if fault is not None:
        return fault.code, fault.message
    code = getattr(exc, "code", None)
    code = code if isinstance(code, str) else type(exc).__name__
    return code, getattr(exc, "message", None) or str(exc) or code


def _is_locked(text: str) -> bool:
    return "locked" in text or "busy" in text


def _lock_holders(db_path: str) -> list[int]:
    """The other processes holding a write lock on the store, where the system lists its
    locks (Linux's ``/proc/locks``); none found elsewhere."""
    files = set()
    for path in (db_path, f"{db_path}-shm"):  # a WAL store's writer locks its -shm file
        try:
            found = os.stat(path)
        except OSError:
            continue
        files.add(f"{os.major(found.st_dev):02x}:{os.minor(found.st_dev):02x}:{found.st_ino}")
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    holders = set()
    for line in lines:  # "1: POSIX  ADVISORY  WRITE 18076 fe:00:15362643 120 120"
        fields = line.split()
        held = len(fields) > 5 and fields[3] == "WRITE" and fields[5] in files
        if held and fields[4].isdigit() and int(fields[4]) != os.getpid():
            holders.add(int(fields[4]))
    return sorted(holders)


def _bound_waits(conn: sqlite3.Connection) -> None:
    """Let the store's lock be waited for only until the hook's deadline."""
    left = deadline.remaining()
    if left is not None:
        conn.execute(f"PRAGMA busy_timeout = {int(left * 1000)}")


def _payload(stdin_text: str) -> tuple[dict[str, Any] | None, str]:
    """The hook input as an object, or None and what is wrong with it."""
    if not stdin_text.strip():
        return None, "it is empty"
    try:
        payload = lightjson.loads(stdin_text)
    except (ValueError, RecursionError, MemoryError) as exc:  # nesting too deep: Recursion
        return None, f"it is not JSON ({type(exc).__name__}: {str(exc)[:200]})"
    if not isinstance(payload, dict):
        return None, f"it is a JSON {type(payload).__name__}, not an object"
    for field, kind, label in FIELDS:
        value = payload.get(field)
        if value is not None and not isinstance(value, kind):
            return None, f"{field} is a JSON {type(value).__name__}, not {label}"
    return payload, ""


def _unreadable_input(
    adapter: HostAdapter, event: str, problem: str, plugin: bool
) -> tuple[str, int]:
    """Input a hook cannot read, in a project Ithaca governs: refused where the event can
    block (exit 2, which both hosts take as a block), reported where it cannot."""
    cwd = os.getcwd()
    if find_project(cwd) is None:
        from ithaca.hosts import lost

        anchor = os.environ.get(PROJECT_DIR_VARIABLE)
        if lost.folder(adapter, event, cwd, anchor, plugin)[1] is None:
            return "", 0  # outside a project every hook abstains
    what = f"Ithaca: the hook input could not be read ({HOOK_INPUT_UNREADABLE}: {problem})"
    if event in adapter.BLOCKING_EVENTS:
        return (
            f"{what}; the call is refused so that it cannot run unchecked. Run `ithaca "
            f"install {adapter.HOST}` to rewire the hook (and update Ithaca if the host is "
            "newer), then retry.",
            2,
        )
    note = Opinion("abstain", HOOK_INPUT_UNREADABLE, system_message=f"{what}; nothing recorded.")
    return adapter.render(event, note)


def write_session_env(session_id: str | None, env_file: str | None) -> None:
    """Export ``ITHACA_SESSION_ID`` for the host session's later commands."""
    if not session_id or not env_file:
        return
    with open(env_file, "a", encoding="utf-8") as handle:
        handle.write(f"export ITHACA_SESSION_ID={session_id}\n")


def _export_session(stdin_text: str, env_var: str | None) -> None:
    payload, _ = _payload(stdin_text)
    session_id = payload.get("session_id") if payload is not None else None
    if ids.is_session_id(session_id) and env_var:
        try:
            write_session_env(session_id, os.environ.get(env_var))
        except OSError:
            return
