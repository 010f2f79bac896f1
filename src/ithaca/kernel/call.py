"""What a hook call is about, computed once per call and shared by every gate.

The host adapter turns the host's JSON into a ``Call`` through ``kernel.classify``;
gates only read it. Keeping one description means one shell parser, one tool-class
table and one action digest across every part. These are named tuples rather than
dataclasses because hooks import them on every call and dataclasses cost milliseconds
to create.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
    from typing import Any
else:
    from ithaca.kernel.tuples import namedtuple


TOOL_CLASSES = ("edit", "shell", "delegate", "read", "web", "mcp", "other", "ithaca")
# Shell builtins whose operands may be assignments: `export D=.ithaca`.
DECLARATIONS = frozenset({"export", "declare", "typeset", "local", "readonly"})


class SimpleCommand(namedtuple("SimpleCommand", "argv assignments redirects", defaults=((), ()))):
    """One simple command of a shell line, after wrappers and assignments are stripped.

    ``argv[0]`` is the program as written; ``program`` is its basename.
    ``assignments`` are the leading ``NAME=value`` words that were dropped.
    ``redirects`` are output redirection targets (``/dev/null`` excluded).
    """

    __slots__ = ()
    if TYPE_CHECKING:  # the fields' types, which ``namedtuple`` cannot carry
        argv: tuple[str, ...]
        assignments: tuple[str, ...]
        redirects: tuple[str, ...]

    @property
    def program(self) -> str:
        return self.argv[0].rsplit("/", 1)[-1] if self.argv else ""


class Call(
    namedtuple(
        "Call",
        "host tool tool_class mutating tool_input cwd action_digest commands write_targets"
        " unparseable ithaca_commands session_id agent_id",
        defaults=((), (), False, (), None, None),
    )
):
    """A tool call as every gate sees it.

    ``write_targets`` are project-relative POSIX paths where the target lies inside the
    project, else absolute paths. ``unparseable`` is true when a shell command could not
    be parsed (then ``mutating`` is true too). ``ithaca_commands`` lists the Ithaca CLI
    invocations found in a shell command, each as its argv after the program name.
    """

    __slots__ = ()
    if TYPE_CHECKING:  # the fields' types, which ``namedtuple`` cannot carry
        host: str
        tool: str
        tool_class: str
        mutating: bool
        tool_input: dict[str, Any]
        cwd: str
        action_digest: str
        commands: tuple[SimpleCommand, ...]
        write_targets: tuple[str, ...]
        unparseable: bool
        ithaca_commands: tuple[tuple[str, ...], ...]
        session_id: str | None
        agent_id: str | None


def command_text(call: Call) -> str:
    """The shell line of a call as one string (Codex may send an argv list), else ``""``."""
    text = call.tool_input.get("command")
    if isinstance(text, list):
        text = " ".join(str(part) for part in text)
    return text if isinstance(text, str) else ""
