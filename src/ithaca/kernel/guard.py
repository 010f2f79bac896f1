"""The kernel guard: the gate every host runs before any part's own gates.

It fills the ``session`` field of Ithaca's own MCP calls with the host session id from
the payload (an MCP server cannot tell callers apart, so it learns the session from a
trusted source). It denies an agent's writes under the state root (``.ithaca/``) except
the paths a part has allowed for a while (``write_allowances``), any direct use of the
state database, and any invocation of a user-only Ithaca command however it is spelled.
The protocol ``ithaca.state-off-limits`` tells the agent the rule; this module enforces it.
"""

from __future__ import annotations

import os

from ithaca.kernel import config
from ithaca.kernel.authority import command_kind, user_only_command
from ithaca.kernel.call import Call
from ithaca.kernel.gates import ABSTAIN, GateContext, Opinion
from ithaca.kernel.globmatch import fnmatchcase
from ithaca.kernel.project import STATE_DIR_NAME

EVENTS = ("PreToolUse",)
# The host's own settings files: removing Ithaca's entries there unwires every gate.
HOST_FILES = frozenset({".claude/settings.json", ".claude/settings.local.json", ".mcp.json"})
_HOST_PHRASES = (
    "ithaca uninstall",
    "ithaca install",
    "ithaca hook",
    "uninstall claude",
    "install claude",
    "hook claude",
    "ithaca.hosts",
    "ithaca.cli",
    "ithaca-hook",
)


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if call is None or ctx.project is None:
        return ABSTAIN
    if call.tool_class == "ithaca" and call.tool.startswith("mcp__") and ctx.session_id:
        return Opinion("allow", updated_input={**call.tool_input, "session": ctx.session_id})
    for argv in call.ithaca_commands:
        if command_kind(argv) == "host" or any(_shell_decided(word) for word in argv):
            return _host_wiring_denied()
        command = user_only_command(argv)
        if command is not None:
            spelled = "ithaca " + " ".join(command)
            return Opinion(
                "deny",
                "USER_ONLY_COMMAND",
                f"Ithaca: `{spelled}` is the user's to run in their own terminal. "
                "Show the user the exact command and wait; never run it yourself.",
            )
    if call.mutating and _names_host_wiring(call):
        return _host_wiring_denied()
    state_root = ctx.project.state_root
    user_settings = os.path.realpath(config.home())
    allowed = _allowances(ctx)
    for target in call.write_targets:
        path = _absolute(ctx.project.root, target)
        if _may_touch(target, STATE_DIR_NAME) and not _shell_decided(target):
            path = os.path.join(state_root, "*")  # a glob such as `.ith*` can reach it
        elif _shell_decided(target) and STATE_DIR_NAME in target:
            path = state_root  # `"$PWD/.ithaca"`: decided by the shell, aimed at the state
        if os.path.relpath(path, ctx.project.root) in HOST_FILES:
            return Opinion(
                "deny",
                "HOST_SETTINGS_DENIED",
                f"Ithaca: {target} wires Ithaca into the host; only the user changes it"
                " (`ithaca install|uninstall`).",
            )
        if _inside(path, user_settings):
            return Opinion(
                "deny",
                "STATE_WRITE_DENIED",
                f"Ithaca: {target} is in the user's Ithaca settings, which only the user edits.",
            )
        if _inside(path, state_root) and not any(_inside(path, a) for a in allowed):
            return Opinion(
                "deny",
                "STATE_WRITE_DENIED",
                f"Ithaca: {target} is under {os.path.basename(state_root)}/, which only Ithaca"
                " writes. Change Ithaca state through its tools and commands.",
            )
    if any(_cleans_ignored_files(command.argv) for command in call.commands):
        return Opinion(
            "deny",
            "STATE_WRITE_DENIED",
            "Ithaca: `git clean -x` would delete .ithaca/.runtime/ (Ithaca's state, which Git"
            " ignores). Clean without -x, or ask the user.",
        )
    for command in call.commands:
        if command.program == "ithaca-hook" or any("ithaca.hosts" in w for w in command.argv):
            return _host_wiring_denied()
        for word in command.argv[1:]:
            if _names_database(word):
                return Opinion(
                    "deny",
                    "STATE_DB_DENIED",
                    "Ithaca: the state database is off limits; use Ithaca's tools.",
                )
    return ABSTAIN


def _shell_decided(word: str) -> bool:
    return "$" in word or "`" in word


def _has_glob(word: str) -> bool:
    return any(char in word for char in "*?[")


def _may_touch(target: str, name: str) -> bool:
    """Whether a glob target's first component could expand to ``name`` (``.ith*``); the
    shell expands to hidden names only from a pattern that starts with a dot."""
    first = target.split("/", 1)[0]
    return first.startswith(".") and _has_glob(first) and fnmatchcase(name, first)


def _names_database(word: str) -> bool:
    """``state.db`` (or its -wal/-shm), also as a glob aimed at it (``stat?.db``, or
    ``*.db`` inside the runtime folder), but not a bare ``*``."""
    name = os.path.basename(word)
    if name.startswith("state.db"):
        return True
    if not _has_glob(name) or not fnmatchcase("state.db", name):
        return False
    literal = name[: min(name.find(c) for c in "*?[" if c in name)]
    return bool(literal) or ".runtime" in word


def _names_host_wiring(call: Call) -> bool:
    """A mutating shell line whose text names Ithaca's host wiring, however it is hidden
    from the parser (``echo '…' | bash``, heredocs, ``python -c``, unreadable lines)."""
    text = call.tool_input.get("command")
    if isinstance(text, list):
        text = " ".join(str(part) for part in text)
    if not isinstance(text, str) or "ithaca" not in text:
        return False
    spaced = " ".join(text.replace("'", " ").replace('"', " ").split())
    return call.unparseable or any(phrase in spaced for phrase in _HOST_PHRASES)


def _host_wiring_denied() -> Opinion:
    return Opinion(
        "deny",
        "HOST_COMMAND",
        "Ithaca: hook entry points and `ithaca install|uninstall|hook` speak for the host"
        " and the user; an agent never runs them. Ask the user if the set-up needs changing.",
    )


def _cleans_ignored_files(argv: tuple[str, ...]) -> bool:
    words = [word for word in argv[1:] if not word.startswith("-")]
    if not argv or argv[0].rsplit("/", 1)[-1] != "git" or "clean" not in words:
        return False
    return any(
        word.startswith("-") and not word.startswith("--") and ("x" in word or "X" in word)
        for word in argv
    )


def _allowances(ctx: GateContext) -> list[str]:
    if ctx.conn is None or ctx.project is None:
        return []
    rows = ctx.conn.execute("SELECT path FROM write_allowances").fetchall()
    return [_absolute(ctx.project.root, row[0]) for row in rows]


def _absolute(base: str, target: str) -> str:
    return os.path.normpath(os.path.join(base, target))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
