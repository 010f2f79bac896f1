"""What one command's words run: keywords, assignments, wrappers, options and carried bodies,
and which Ithaca or Python invocation it is.

The scanner (``shell_parse``) reads a line into the words of each command; this module
turns those words into the ``SimpleCommand`` every gate judges. It strips what only
prepares a run (leading keywords, ``NAME=value`` assignments, wrappers such as ``env``,
``nice`` or ``sudo`` with their options) and marks the line *opaque* when a construct hides
what runs (``sudo``, ``eval``, ``sh -c``, ``xargs`` unless it runs one of the
``PLAIN_READERS``…). The text that ``sh -c`` and ``eval`` carry is handed back, so the
scanner parses it as commands of its own.

Options are read the way GNU tools do (``-tDIR``, ``-t DIR``, ``--target=DIR``): wrappers,
runners, write targets and the read-only judgement all need to know which arguments are
options and which are operands; each caller names the options of its program that take a
value. The authority guard must see every way an agent can run the Ithaca CLI (``ithaca …``,
``python -m ithaca …``, ``uv run``, ``uvx``, ``pipx run``, ``poetry run``, ``hatch run``),
and the read-only judgement asks the same of ``python -m pytest``.

The word, the parse state and the error live here because both the scanner and this
module make and raise them. Hook processes load this module on every shell call (one
module rather than three: each import costs every shell hook call), so it keeps to plain
slotted classes and string methods (no ``dataclasses``, no ``re``).
"""

from __future__ import annotations

import posixpath

from ithaca.kernel import shellwords
from ithaca.kernel.call import SimpleCommand

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.call import SimpleCommand


def leading_options(
    args: tuple[str, ...] | list[str], start: int, short_values: str, long_values: frozenset[str]
) -> tuple[int, list[tuple[str, str]]]:
    """Parse options from ``args[start]`` up to the first operand; return its index."""
    options: list[tuple[str, str]] = []
    index = start
    while index < len(args):
        token = args[index]
        if token == "--":
            return index + 1, options
        if len(token) < 2 or token[0] != "-":
            break
        index = _option(args, index, short_values, long_values, options)
    return index, options


def split_operands(
    args: tuple[str, ...], short_values: str = "", long_values: frozenset[str] = frozenset()
) -> tuple[list[str], list[tuple[str, str]]]:
    """Every operand and option of ``args`` (options may follow operands, GNU style)."""
    operands: list[str] = []
    options: list[tuple[str, str]] = []
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            operands.extend(args[index + 1 :])
            break
        if len(token) < 2 or token[0] != "-":
            operands.append(token)
            index += 1
        else:
            index = _option(args, index, short_values, long_values, options)
    return operands, options


def _option(
    args: tuple[str, ...] | list[str],
    index: int,
    short_values: str,
    long_values: frozenset[str],
    options: list[tuple[str, str]],
) -> int:
    """Record the option at ``args[index]`` (with its value); return the next index."""
    token = args[index]
    index += 1
    if token.startswith("--"):
        name, equals, value = token.partition("=")
        if not equals and name in long_values and index < len(args):
            value = args[index]
            index += 1
        options.append((name, value))
        return index
    for position in range(1, len(token)):
        letter = token[position]
        if letter in short_values:
            value = token[position + 1 :]
            if not value and index < len(args):
                value = args[index]
                index += 1
            options.append(("-" + letter, value))
            return index
        options.append(("-" + letter, ""))
    return index


class Unparseable(Exception):
    """The line holds something the parser cannot follow; the message says what."""


# Plain slotted classes rather than dataclasses: this module loads on every hook call.
class Word:
    __slots__ = ("value", "raw")

    def __init__(self, value: str, raw: str):
        self.value = value  # quotes removed, substitutions kept as written
        self.raw = raw  # exactly as in the source


class ParseState:
    """What the whole line has shown so far: ``opaque`` once anything hides what runs."""

    __slots__ = ("opaque",)

    def __init__(self) -> None:
        self.opaque = False


class _Wrapper:
    __slots__ = (
        "short_values",
        "long_values",
        "positionals",
        "takes_assignments",
        "opaque",
        "output_options",
    )

    def __init__(
        self,
        short_values: str = "",
        long_values: frozenset[str] = frozenset(),
        positionals: int = 0,
        takes_assignments: bool = False,
        opaque: bool = False,
        output_options: frozenset[str] = frozenset(),
    ):
        self.short_values = short_values
        self.long_values = long_values
        self.positionals = positionals
        self.takes_assignments = takes_assignments
        self.opaque = opaque
        self.output_options = output_options


# fmt: off
WRAPPERS = {
    "sudo": _Wrapper(
        short_values="ugCDprtTU",
        long_values=frozenset({
            "--user", "--group", "--close-from", "--chdir", "--prompt", "--role", "--type",
            "--command-timeout", "--other-user", "--host",
        }),
        takes_assignments=True,
        opaque=True,
    ),
    "doas": _Wrapper(short_values="uC", opaque=True),
    "env": _Wrapper(
        short_values="uCS",
        long_values=frozenset({"--unset", "--chdir", "--split-string"}),
        takes_assignments=True,
    ),
    "command": _Wrapper(),
    "builtin": _Wrapper(),
    "exec": _Wrapper(short_values="a", opaque=True),
    "nohup": _Wrapper(),
    "nice": _Wrapper(short_values="n", long_values=frozenset({"--adjustment"})),
    "time": _Wrapper(
        short_values="of",
        long_values=frozenset({"--output", "--format"}),
        output_options=frozenset({"-o", "--output"}),
    ),
    "timeout": _Wrapper(
        short_values="sk", long_values=frozenset({"--signal", "--kill-after"}), positionals=1
    ),
    "stdbuf": _Wrapper(
        short_values="ioe", long_values=frozenset({"--input", "--output", "--error"})
    ),
    "xargs": _Wrapper(  # opaque unless it runs a plain reader (``_xargs_runs_plainly``)
        short_values="adEILnPs",
        long_values=frozenset({
            "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars",
            "--process-slot-var",
        }),
    ),
    "setsid": _Wrapper(),
}
# fmt: on

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
OPAQUE_PROGRAMS = frozenset({"eval", "exec", "source", ".", "xargs", "sudo", "doas"})
# Programs none of whose options writes a file or starts another program, whatever words
# they are given: the read-only judgement takes them with any option, and ``xargs`` may
# hand them the words it reads. (``env`` is no such program: its words name what it runs.)
PLAIN_READERS = frozenset({
    "ls", "cat", "head", "tail", "wc", "stat", "du", "df", "pwd", "echo", "true", "false",
    "test", "[", "which", "type", "id", "whoami", "uname", "printenv", "basename", "dirname",
    "realpath", "readlink", "nl", "cut", "tr", "paste", "column", "diff", "cmp", "comm",
    "sha256sum", "md5sum", "od", "hexdump", "jq", "cd", "grep", "egrep", "fgrep", "sleep",
})  # fmt: skip
# Where a program named by its path is still the system's own; ``./cat`` or
# ``/tmp/x/git`` could be anything.
SYSTEM_DIRECTORIES = frozenset(
    {"/bin", "/usr/bin", "/usr/local/bin", "/sbin", "/usr/sbin", "/opt/homebrew/bin"}
)
_RESERVED_LEADING = frozenset(
    {"!", "{", "}", "if", "then", "elif", "else", "fi", "while", "until", "do", "done", "esac"}
)
_LOOP_HEADERS = frozenset({"for", "select"})

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")


def simple_command(
    words: list[Word], redirects: list[str], state: ParseState
) -> SimpleCommand | None:
    """One command's words as its simple command, or ``None`` when nothing is left.

    Marks ``state`` opaque when a wrapper or the program hides what runs.
    """
    while words and words[0].raw in _RESERVED_LEADING:
        words = words[1:]
    if words and words[0].raw in _LOOP_HEADERS:
        words = []
    assignments: list[str] = []
    while words and _is_assignment(words[0].raw):
        assignments.append(words[0].value)
        words = words[1:]
    redirects = list(redirects)
    words = _strip_wrappers(words, assignments, redirects, state)
    if words and ("$" in words[0].raw or "`" in words[0].raw):
        raise Unparseable("the program name is not a literal word")
    argv = tuple(word.value for word in words)
    if argv and posixpath.basename(argv[0]) in OPAQUE_PROGRAMS:
        state.opaque = True
    if argv or assignments or redirects:
        return SimpleCommand(argv, tuple(assignments), tuple(redirects))
    return None


def _is_assignment(word: str) -> bool:
    """Whether ``word`` starts with ``[A-Za-z_][A-Za-z0-9_]*(?:\\[[^\\]]*\\])?\\+?=``."""
    if not word or word[0] not in _NAME_START:
        return False
    end = 1
    while end < len(word) and word[end] in _NAME_CHARS:
        end += 1
    if word.startswith("[", end):
        close = word.find("]", end + 1)
        if close < 0:
            return False
        end = close + 1
    return word.startswith(("=", "+="), end)


def _strip_wrappers(
    words: list[Word], assignments: list[str], redirects: list[str], state: ParseState
) -> list[Word]:
    while words:
        name = posixpath.basename(words[0].value)
        wrapper = WRAPPERS.get(name)
        if wrapper is None:
            return words
        index, options = leading_options(
            [word.value for word in words], 1, wrapper.short_values, wrapper.long_values
        )
        if name == "command" and any(option in ("-v", "-V") for option, _ in options):
            return words
        rest = words[min(index + wrapper.positionals, len(words)) :]
        if wrapper.opaque or (name == "xargs" and not _xargs_runs_plainly(options, rest)):
            state.opaque = True
        outputs = []
        for option, value in options:
            if option in wrapper.output_options:
                outputs.append(value)
            elif option in ("-S", "--split-string"):
                rest = [Word(token, token) for token in _split_string(value)] + rest
        if name == "env":
            while rest and rest[0].value == "-":
                rest = rest[1:]
        skipped = 0
        while wrapper.takes_assignments and skipped < len(rest):
            if not _is_assignment(rest[skipped].raw):
                break
            skipped += 1
        if skipped == len(rest):
            return words
        assignments.extend(word.value for word in rest[:skipped])
        redirects.extend(outputs)
        words = rest[skipped:]
    return words


def system_program(word: str) -> str:
    """The program's name when ``word`` names it bare or in a system directory, else ``""``."""
    directory, slash, name = word.rpartition("/")
    return name if not slash or directory in SYSTEM_DIRECTORIES else ""


def _xargs_runs_plainly(options: list[tuple[str, str]], rest: list[Word]) -> bool:
    """Whether ``xargs`` runs a plain reader, named as a literal word that its input cannot
    replace: then what it runs is known, and the words it adds cannot make it write."""
    if not rest or system_program(rest[0].raw) not in PLAIN_READERS:
        return False
    for option, value in options:
        if option in ("-i", "--replace") or (option == "-I" and value in rest[0].raw):
            return False
    return True


def _split_string(value: str) -> list[str]:
    try:
        return shellwords.split(value)
    except ValueError as exc:
        raise Unparseable("unbalanced quotes") from exc


def _shell_flags_end(argv: tuple[str, ...]) -> tuple[int, bool]:
    """Index of a shell's first operand, and whether ``-c`` was among its flags."""
    index = 1
    has_c = False
    while index < len(argv):
        token = argv[index]
        if token == "--":
            return index + 1, has_c
        if token in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            index += 2
            continue
        if len(token) < 2 or token[0] not in "-+":
            break
        if token[0] == "-" and token[1] != "-" and "c" in token:
            has_c = True
        index += 1
    return index, has_c


def carried_body(argv: tuple[str, ...]) -> str | None:
    """The command text a ``sh -c`` or ``eval`` carries, if ``argv`` is one."""
    if not argv:
        return None
    program = posixpath.basename(argv[0])
    if program == "eval":
        return " ".join(argv[1:])
    if program in SHELLS:
        index, has_c = _shell_flags_end(argv)
        if has_c and index < len(argv):
            return argv[index]
    return None


def is_carrier(command: SimpleCommand) -> bool:
    """True for ``sh -c BODY`` and ``eval ARGS``, whose bodies appear as their own commands."""
    return carried_body(command.argv) is not None


def shell_c_body(argv: list[str] | tuple[str, ...]) -> str | None:
    """The body when ``argv`` is exactly ``[shell, -…c…, BODY]`` (how Codex wraps commands)."""
    if len(argv) != 3 or posixpath.basename(argv[0]) not in SHELLS:
        return None
    index, has_c = _shell_flags_end(tuple(argv))
    return argv[2] if has_c and index == 2 else None


def is_python(program: str) -> bool:
    """``(?:python|pypy)(?:\\d+(?:\\.\\d+)*)?``: ``python``, ``python3``, ``pypy3.10``…"""
    for name in ("python", "pypy"):
        if program.startswith(name):
            version = program[len(name) :]
            return not version or all(part.isdecimal() for part in version.split("."))
    return False


_ITHACA_MODULES = frozenset({"ithaca", "ithaca.cli"})
# fmt: off
_RUNNER_VALUES: dict[str, tuple[str, frozenset[str]]] = {
    "uv run": ("pw", frozenset({
        "--with", "--with-editable", "--with-requirements", "--python", "--project",
        "--directory", "--package", "--extra", "--group", "--only-group", "--no-group",
        "--env-file", "--index", "--default-index", "--index-url", "--extra-index-url",
        "--find-links", "--cache-dir", "--config-file", "--color",
    })),
    "uvx": ("pw", frozenset({
        "--from", "--with", "--with-editable", "--with-requirements", "--python", "--index",
        "--index-url", "--extra-index-url",
    })),
    "pipx run": ("", frozenset({"--spec", "--python", "--pip-args", "--index-url"})),
    "poetry run": ("CP", frozenset({"--directory", "--project"})),
    "hatch run": ("", frozenset()),
}
# fmt: on


def python_module(argv: tuple[str, ...]) -> tuple[str, tuple[str, ...]] | None:
    """``(module, args)`` when ``argv`` is ``python … -m module args``."""
    index = 1
    while index < len(argv):
        token = argv[index]
        if not token.startswith("-") or token in ("-", "--"):
            return None
        index += 1
        if token.startswith("--"):
            continue
        for position in range(1, len(token)):
            letter = token[position]
            if letter == "c":
                return None
            if letter in "mWX":
                value = token[position + 1 :]
                if not value and index < len(argv):
                    value = argv[index]
                    index += 1
                if letter == "m":
                    return value, argv[index:]
                break
    return None


def ithaca_invocation(command: SimpleCommand) -> tuple[str, ...] | None:
    """The Ithaca CLI arguments when ``command`` runs the Ithaca CLI, however spelled."""
    argv = command.argv
    if not argv:
        return None
    program = command.program
    if program in ("uv", "pipx", "poetry", "hatch"):
        if argv[1:3] == ("tool", "run") and program == "uv":
            runner, start = "uvx", 3
        elif argv[1:2] == ("run",):
            runner, start = f"{program} run", 2
        else:
            return None
    elif program == "uvx":
        runner, start = "uvx", 1
    else:
        return _direct_ithaca(argv)
    index, _ = leading_options(argv, start, *_RUNNER_VALUES[runner])
    if runner in ("uvx", "pipx run"):
        inner = argv[index:]
        return inner[1:] if inner and posixpath.basename(inner[0]) == "ithaca" else None
    return _direct_ithaca(argv[index:])


def _direct_ithaca(argv: tuple[str, ...]) -> tuple[str, ...] | None:
    if not argv:
        return None
    program = posixpath.basename(argv[0])
    if program == "ithaca":
        return argv[1:]
    if is_python(program):
        found = python_module(argv)
        if found and found[0] in _ITHACA_MODULES:
            return found[1]
    return None
