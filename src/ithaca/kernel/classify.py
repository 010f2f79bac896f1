"""Describe a hook call once, the same way for every gate (DESIGN.md, kernel contract 1).

The tool-class table is Claude Code's tools (docs/hooks.md, "What counts as mutating")
plus Codex's tools: its shell tools (``Bash`` in hook payloads; ``exec_command``,
``shell_command``, ``shell`` and ``local_shell`` where a command arrives as a string or an
argv list), ``apply_patch`` (an edit whose targets are the patch's file lines) and the
function tools that only read (images, MCP resources, ``tool_search``), and Claude Code's
tools that only look things up (``ToolSearch`` loads a deferred tool's schema, ``Skill`` a
skill's text): under tool search, the agent cannot even see ``load_protocols`` without
them.
A shell call whose every command runs the Ithaca CLI is class ``ithaca``: Ithaca's own
commands have their own gates, and the strict protocols gate must never block them. That
holds only for a call that does nothing else; a line that also writes a file through a
redirection, or mixes in any other command, stays class ``shell`` and is judged as a whole.

Write targets are reported relative to the project root so that path rules and the
``.ithaca/`` guard compare like with like; the action digest uses the same relative
form, so an approval survives a change of checkout location but not of command or cwd.
This runs on every hook call: stdlib only, the shell parser loaded only for shell calls,
and patch headers read with string methods rather than ``re``.
"""

from __future__ import annotations

import os

from ithaca.kernel import canon
from ithaca.kernel.call import Call, SimpleCommand

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

TOOL_CLASS_TABLE = {
    "Edit": "edit",
    "Write": "edit",
    "MultiEdit": "edit",
    "NotebookEdit": "edit",
    "apply_patch": "edit",
    "Bash": "shell",
    "shell": "shell",
    "local_shell": "shell",
    "exec_command": "shell",
    "shell_command": "shell",
    "Task": "delegate",
    "Agent": "delegate",
    "spawn_agent": "delegate",
    "collaborationspawn_agent": "delegate",  # Codex 0.169's multi_agent_v2 tools
    "collaborationfollowup_task": "delegate",
    "collaborationsend_message": "delegate",
    "collaborationwait_agent": "read",
    "collaborationlist_agents": "read",
    "Read": "read",
    "Glob": "read",
    "Grep": "read",
    "LS": "read",
    "update_plan": "read",
    "TodoWrite": "read",
    "view_image": "read",
    "list_mcp_resources": "read",
    "list_mcp_resource_templates": "read",
    "read_mcp_resource": "read",
    "tool_search": "read",
    "get_goal": "read",
    "ToolSearch": "read",
    "Skill": "read",
    "ListAgents": "read",
    "ListMcpResourcesTool": "read",
    "ReadMcpResourceTool": "read",
    "ReadMcpResourceDirTool": "read",
    "CronList": "read",
    "TaskList": "read",
    "TaskGet": "read",
    "TaskOutput": "read",
    "WebFetch": "web",
    "WebSearch": "web",
}

# The lines of an ``apply_patch`` body that name a file it adds, changes, deletes or moves to.
_PATCH_HEADERS = ("*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: ")
_PATCH_PROGRAMS = frozenset({"apply_patch", "applypatch"})
_PATH_KEYS = ("file_path", "notebook_path", "path")
_LITERAL_MARKERS = frozenset("*?[$`")
# The characters ``shlex.quote`` leaves a word bare with.
_SAFE_CHARACTERS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-"
)


def tool_class(tool_name: str, server_name: str = "ithaca") -> str:
    """The class a tool name has before its input is looked at."""
    known = TOOL_CLASS_TABLE.get(tool_name)
    if known:
        return known
    if tool_name.startswith(f"mcp__{server_name}__"):
        return "ithaca"
    return "mcp" if tool_name.startswith("mcp__") else "other"


def classify_call(
    host: str,
    tool_name: str,
    tool_input: dict[str, Any],
    cwd: str,
    *,
    project_root: str,
    read_only_tools: tuple[str, ...] = (),
    server_name: str = "ithaca",
    session_id: str | None = None,
    agent_id: str | None = None,
    tests_are_read_only: bool = True,
    read_only_commands: tuple[str, ...] = (),
) -> Call:
    """Class, mutating, parsed commands, write targets and action digest of one call.

    ``read_only_commands`` are program names a shell call may run without counting as
    mutating, on top of the built-in list (``[ulysses] read_only_commands``).
    """
    root = os.path.realpath(project_root)
    base = _working_directory(cwd, tool_input)
    klass = tool_class(tool_name, server_name)
    if klass == "shell":
        fields = _shell_fields(
            tool_name, tool_input, base, root, tests_are_read_only, read_only_commands
        )
    else:
        fields = _tool_fields(klass, tool_name, tool_input, base, root, read_only_tools)
    return Call(
        host=host,
        tool=tool_name,
        tool_input=tool_input,
        cwd=cwd,
        session_id=session_id,
        agent_id=agent_id,
        **fields,
    )


def _tool_fields(
    klass: str,
    tool_name: str,
    tool_input: dict[str, Any],
    base: str,
    root: str,
    read_only_tools: tuple[str, ...],
) -> dict[str, Any]:
    if klass in ("edit", "delegate"):
        mutating = True
    elif klass in ("mcp", "other"):
        from ithaca.kernel.globmatch import fnmatchcase

        mutating = not any(fnmatchcase(tool_name, pattern) for pattern in read_only_tools)
    else:
        mutating = False
    targets = _edit_targets(tool_input) if klass == "edit" else []
    return {
        "tool_class": klass,
        "mutating": mutating,
        "write_targets": _resolve_all(targets, base, root),
        "action_digest": canon.digest(
            {"tool": tool_name, "input": _project_relative_input(tool_input, base, root)}
        ),
    }


def _all_agent_commands(invocations: tuple[tuple[str, ...], ...]) -> bool:
    from ithaca.kernel.authority import command_kind  # only lines that run Ithaca need it

    return all(command_kind(invocation) == "agent" for invocation in invocations)


def _shell_fields(
    tool_name: str,
    tool_input: dict[str, Any],
    base: str,
    root: str,
    tests_are_read_only: bool,
    read_only_commands: tuple[str, ...],
) -> dict[str, Any]:
    from ithaca.kernel.shell_commands import is_carrier, ithaca_invocation
    from ithaca.kernel.shell_effects import is_read_only, write_targets
    from ithaca.kernel.shell_parse import ParsedShell, parse

    command = _command_text(tool_input)
    if command is None:
        parsed = ParsedShell((), unparseable=True, reason="no command string")
    else:
        parsed = parse(command)
    invocations = tuple(
        found for found in map(ithaca_invocation, parsed.commands) if found is not None
    )
    only_ithaca = (
        bool(invocations)
        and _all_agent_commands(invocations)
        and all(
            not item.redirects and (ithaca_invocation(item) is not None or is_carrier(item))
            for item in parsed.commands
        )
    )
    targets = list(write_targets(parsed))
    if command is not None:
        targets.extend(_shell_patch_targets(parsed.commands, command))
    cwd = _relative(os.path.realpath(base), root)
    digest_command = command if command is not None else tool_input.get("command")
    return {
        "tool_class": "ithaca" if only_ithaca else "shell",
        "mutating": not only_ithaca
        and not is_read_only(
            parsed, tests_are_read_only=tests_are_read_only, extra_read_only=read_only_commands
        ),
        "commands": parsed.commands,
        "write_targets": _resolve_all(targets, base, root),
        "unparseable": parsed.unparseable,
        "ithaca_commands": invocations,
        "action_digest": canon.digest({"tool": tool_name, "command": digest_command, "cwd": cwd}),
    }


def _command_text(tool_input: dict[str, Any]) -> str | None:
    """The command line: a string, or an argv list (Codex) joined for the shell.

    Codex runs every command as ``["bash", "-lc", LINE]``; that wrapper is the host's,
    not the agent's, so the judgement is of LINE itself.
    """
    command = tool_input.get("command", tool_input.get("cmd"))
    if isinstance(command, str):
        return command
    if isinstance(command, list) and command and all(isinstance(arg, str) for arg in command):
        from ithaca.kernel.shell_commands import shell_c_body

        body = shell_c_body(command)
        return body if body is not None else _shell_join(command)
    return None


def _shell_join(argv: list[str]) -> str:
    """``shlex.join(argv)``, without importing ``shlex`` (and its ``re``) into a hook."""
    return " ".join(
        word
        if word and _SAFE_CHARACTERS.issuperset(word)
        else "'" + word.replace("'", "'\"'\"'") + "'"
        for word in argv
    )


def _working_directory(cwd: str, tool_input: dict[str, Any]) -> str:
    """The hook ``cwd``, moved by a Codex ``workdir`` when the call names one."""
    workdir = tool_input.get("workdir")
    if isinstance(workdir, str) and workdir:
        return os.path.join(cwd, workdir)
    return cwd


def _edit_targets(tool_input: dict[str, Any]) -> list[str]:
    targets = [
        value
        for key in ("file_path", "notebook_path")
        if isinstance(value := tool_input.get(key), str) and value
    ]
    patch = tool_input.get("input", tool_input.get("patch", tool_input.get("command")))
    if isinstance(patch, list) and patch:
        patch = patch[-1]  # ``["apply_patch", PATCH]``
    if isinstance(patch, str):
        targets.extend(_patch_targets(patch))
    return targets


def _shell_patch_targets(commands: tuple[SimpleCommand, ...], line: str) -> list[str]:
    """The files an ``apply_patch`` run from the shell touches.

    The patch is an argument (``apply_patch "$PATCH_TEXT"``) or, when no argument holds
    one, a heredoc body, which only the line's own text still has.
    """
    patchers = [item for item in commands if item.program in _PATCH_PROGRAMS]
    if not patchers:
        return []
    found = [
        target for item in patchers for word in item.argv[1:] for target in _patch_targets(word)
    ]
    return found or _patch_targets(line)


def _patch_targets(patch: str) -> list[str]:
    """The paths an ``apply_patch`` body's file lines name.

    Blanks around a line are ignored: naming a file too many is safe, missing one is not.
    """
    if "*** " not in patch:
        return []
    targets = []
    for raw in patch.split("\n"):
        line = raw.strip()
        for header in _PATCH_HEADERS:
            if line.startswith(header) and (path := line[len(header) :].strip()):
                targets.append(path)
    return targets


def _project_relative_input(tool_input: dict[str, Any], base: str, root: str) -> dict[str, Any]:
    if not any(isinstance(tool_input.get(key), str) for key in _PATH_KEYS):
        return tool_input
    return {
        key: resolve_target(value, base, root)
        if key in _PATH_KEYS and isinstance(value, str) and value
        else value
        for key, value in tool_input.items()
    }


def _resolve_all(targets: list[str], base: str, root: str) -> tuple[str, ...]:
    resolved: list[str] = []
    for target in targets:
        path = resolve_target(target, base, root)
        if path not in resolved:
            resolved.append(path)
    return tuple(resolved)


def resolve_target(target: str, cwd: str, root: str) -> str:
    """``target`` as a project-relative POSIX path, or absolute when outside ``root``.

    ``root`` must already be a real path. Symlinks in the parent directory are resolved;
    the last component is not, because writing to or removing a link acts on the link.
    A target holding glob characters, ``$`` or a backtick is kept as written, since
    what it names is unknown until the shell expands it.
    """
    if _LITERAL_MARKERS.intersection(target):
        return target
    path = os.path.join(cwd, os.path.expanduser(target)).rstrip("/") or "/"
    parent, name = os.path.split(path)
    if name in ("", ".", ".."):
        resolved = os.path.realpath(path)
    else:
        resolved = os.path.join(os.path.realpath(parent), name)
    return _relative(resolved, root)


def _relative(path: str, root: str) -> str:
    """A real ``path`` made relative to the real ``root`` when inside it."""
    if path == root:
        return "."
    prefix = root.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else path
