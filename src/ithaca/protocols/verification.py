"""What counts as a project's verification, for the ``require_verification`` constraint.

A protocol can say that a turn which changed the project ends only after a verification
ran green after its last change (the end-of-turn critic, ``critic``). Which commands
verify is the project's to say: ``[verification] commands`` in Ithaca's configuration,
or, when that is empty, a default found from the project itself (its test runner). A
constraint may name its own commands, which then take precedence.

Each command is also a pattern (``kernel.constraints`` syntax): the agent's shell call
counts as the verification when it is one simple command that matches, so ``pytest -q
tests/`` counts for ``pytest``. The host reports the exit status of the whole line, so a
line with a pipe, a list or a background job (``pytest | tail``, ``pytest || true``,
``pytest; echo``) proves nothing about the tests, nor does an option that runs none
(``--help``, ``--collect-only``). The first command is the one Ithaca names in a block
and runs itself where the host does not report a command's outcome. Standard library
only (hook path).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from ithaca.kernel.call import Call

# What joins commands so that the line's exit status is not the verification's.
LINE_OPERATORS = frozenset("|;&\n")
# Options with which a test runner runs no test and still exits 0.
RUNS_NOTHING = frozenset(
    {"--help", "-h", "--version", "-V", "--collect-only", "--co", "--list", "--dry-run"}
)
# (marker file, commands), first match wins: the common runners of each ecosystem.
DEFAULTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("pyproject.toml", ("python -m pytest", "pytest", "python3 -m pytest", "uv run pytest")),
    ("pytest.ini", ("python -m pytest", "pytest", "python3 -m pytest")),
    ("setup.py", ("python -m pytest", "pytest", "python3 -m pytest")),
    ("package.json", ("npm test", "npm run test", "pnpm test", "yarn test")),
    ("Cargo.toml", ("cargo test",)),
    ("go.mod", ("go test ./...", "go test")),
    ("Makefile", ("make test", "make check")),
)


def commands(root: str, configured: list[str], named: Iterable[str] = ()) -> list[str]:
    """The verification commands: the constraint's own, else the configuration's, else
    the project's default (empty when none is found)."""
    own = list(named)
    if own:
        return own
    if configured:
        return list(configured)
    for marker, found in DEFAULTS:
        if os.path.isfile(os.path.join(root, marker)):
            return list(found)
    return []


def is_verification(call: Call, patterns: list[str]) -> bool:
    """Whether a shell call is one of the verification commands, on its own."""
    if call.unparseable or len(call.commands) != 1:
        return False
    from ithaca.kernel.call import command_text
    from ithaca.protocols.constraints import command_pattern_matches

    if _joins_commands(command_text(call)):
        return False
    (command,) = call.commands
    if any(word.split("=", 1)[0] in RUNS_NOTHING for word in command.argv[1:]):
        return False
    return any(command_pattern_matches(pattern, command.argv) for pattern in patterns)


def _joins_commands(line: str) -> bool:
    """Whether ``line`` holds a pipe, list or background operator outside quotes."""
    quote = ""
    escaped = False
    for char in line:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in LINE_OPERATORS:
            return True
    return False
