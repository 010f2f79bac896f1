"""Who may do what: the user-only check and the registry of user-only commands.

Some levers only a person may pull (granting an approval, changing a rule). They exist
only in the CLI and need an interactive terminal, no coding-agent environment, and a
typed confirmation equal to the token the prompt shows. This stops an over-eager agent,
which runs commands without a terminal; it is not a boundary against a hostile local
process, which could drive a pseudo-terminal itself.
"""

from __future__ import annotations

import os
import sys

from ithaca.kernel.errors import Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TextIO

AGENT_ENVIRONMENT = ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CODEX_THREAD_ID", "CODEX_SANDBOX")

# Every user-only CLI command of every part, as its subcommand path.
USER_ONLY_COMMANDS: tuple[tuple[str, ...], ...] = (
    ("protocols", "approve"),
    ("protocols", "create"),
    ("protocols", "update"),
    ("protocols", "enable"),
    ("protocols", "disable"),
    ("protocols", "remove"),
    ("protocols", "admit"),
    ("ulysses", "rollback"),
    ("ulysses", "bind-final-validator", "--replace"),
    ("ultragoal", "resume-pursuit"),
    ("ultragoal", "set-budget-limited"),
    ("ultragoal", "approve-review-dispatch-renewal"),
    ("ultragoal", "dismiss-review-finding"),
    ("doctor", "restore"),
    ("doctor", "--rebuild"),
    ("doctor", "lift-lockdown"),
    ("session", "reset-circuit"),
    ("session", "acquire", "--force"),
    ("sync", "import", "--rehash"),
    ("verify", "accept-config"),
)


# Commands that speak for the host or wire Ithaca into it: an agent running them could
# forge a prompt's admission or switch enforcement off.
HOST_COMMANDS = frozenset({"hook", "install", "uninstall"})
# Options a group takes with a value (``ithaca --project P …``, ``ithaca ultragoal
# --session S …``): their values are not subcommand words.
GROUP_VALUE_OPTIONS = frozenset({"--project", "--session"})


def command_words(argv: tuple[str, ...] | list[str]) -> list[str]:
    """The subcommand words of an Ithaca CLI argv, without options and their values."""
    words = []
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif word in GROUP_VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            words.append(word)
    return words


def command_kind(argv: tuple[str, ...] | list[str]) -> str:
    """Who an Ithaca CLI argv is for: ``user`` (user-only), ``host`` (host wiring, never an
    agent's) or ``agent`` (the rest: reads, and operations guarded by their own service)."""
    if user_only_command(argv) is not None:
        return "user"
    words = command_words(argv)
    if words and words[0] in HOST_COMMANDS:
        return "host"
    return "agent"


def user_only_command(argv: tuple[str, ...] | list[str]) -> tuple[str, ...] | None:
    """The user-only command an Ithaca CLI argv invokes, however options are placed: its
    subcommand words in a row, and the options that make it user-only anywhere after."""
    words = command_words(argv)
    given = {word.split("=", 1)[0] for word in argv if word.startswith("-")}
    for command in USER_ONLY_COMMANDS:
        path = [word for word in command if not word.startswith("-")]
        options = {word for word in command if word.startswith("-")}
        if not options <= given:
            continue
        size = len(path)
        if any(words[start : start + size] == path for start in range(len(words) - size + 1)):
            return command
    return None


def require_user(
    action: str,
    token: str,
    *,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    read_line: Callable[[], str] | None = None,
) -> None:
    """Refuse with ``USER_ONLY`` unless a person at a terminal types ``token``."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout
    present = agent_environment()
    if present:
        raise _refuse(action, "agent_environment", f"a coding agent's environment ({present})")
    if not (_isatty(stdin) and _isatty(stdout)):
        raise _refuse(action, "no_terminal", "no interactive terminal")
    ancestor = _host_ancestor(stdin)
    if ancestor is not None:
        raise _refuse(action, "agent_terminal", f"the terminal descends from {ancestor}")
    stdout.write(f"To {action}, type {token} and press Enter: ")
    stdout.flush()
    typed = (read_line or stdin.readline)().strip()
    if typed != token:
        raise _refuse(action, "confirmation_mismatch", "the confirmation did not match")


def agent_environment() -> str | None:
    """The first of a coding agent's environment variables this process has, or None."""
    present = [name for name in AGENT_ENVIRONMENT if os.environ.get(name)]
    return present[0] if present else None


def agent_caller() -> str | None:
    """Why this process is a coding agent's (its environment, or a host among its
    ancestors or its terminal's, ``kernel.lineage``), or None."""
    present = agent_environment()
    if present:
        return f"{present} is set"
    ancestor = _host_ancestor(sys.stdin)
    return None if ancestor is None else f"it descends from {ancestor}"


def _host_ancestor(stdin: TextIO) -> str | None:
    """The coding host this process or its terminal descends from (``kernel.lineage``)."""
    from ithaca.kernel import config, lineage

    try:
        fd = stdin.fileno()
    except (AttributeError, ValueError, OSError):
        fd = 0
    return lineage.host_ancestor(config.home(), fd)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _refuse(action: str, reason: str, why: str) -> Refused:
    return Refused(
        "USER_ONLY",
        f"only the user may {action}, from an interactive terminal ({why})",
        {"reason": reason, "action": action},
    )
