"""One shell parser for every gate: simple commands, write targets, read-only judgement.

Gates must agree on what a shell line does, so there is one parser (DESIGN.md, kernel
contract 1). It is a small scanner rather than ``shlex`` alone because ``shlex`` cannot
see what matters here: newlines as separators, ``$(…)`` and backtick bodies, heredoc
bodies (which must be skipped, since they are data), redirections and their file
descriptors. ``env -S`` strings are split as ``shlex.split`` does (``shellwords``).

The parser errs towards "mutating": anything it cannot follow (unbalanced quotes,
nesting deeper than ``MAX_DEPTH``, a program name that is not a literal word) makes the
line *unparseable*, and constructs that hide what runs (substitutions, subshells,
``eval``, ``sh -c``, ``sudo``, ``xargs``…) make it *opaque*. Both are never read-only.
Nested bodies are still parsed, so their commands reach deny rules and the Ithaca
authority guard.

Every shell tool call runs this module in a fresh hook process, so it scans with string
methods instead of regular expressions: importing ``re`` would cost more than the parse.
Each helper names the pattern it implements.
"""

from __future__ import annotations

import posixpath

from ithaca.kernel import shellwords
from ithaca.kernel.call import SimpleCommand

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
    from collections.abc import Callable
else:
    from ithaca.kernel.tuples import namedtuple

MAX_DEPTH = 4


class ParsedShell(
    namedtuple("ParsedShell", "commands unparseable reason opaque", defaults=(False, None, False))
):
    """A shell line as a flat list of simple commands, nested bodies included.

    ``opaque`` marks constructs the read-only judgement treats as mutating outright;
    ``unparseable`` (with a ``reason``) means ``commands`` is empty and cannot be trusted.
    """

    __slots__ = ()


class _Unparseable(Exception):
    pass


# Plain slotted classes rather than dataclasses: this module loads on every hook call.
class _Word:
    __slots__ = ("value", "raw")

    def __init__(self, value: str, raw: str):
        self.value = value  # quotes removed, substitutions kept as written
        self.raw = raw  # exactly as in the source


class _Pending:
    """The command being read: its words, redirection targets and nested commands."""

    __slots__ = ("words", "redirects", "nested")

    def __init__(self) -> None:
        self.words: list[_Word] = []
        self.redirects: list[str] = []
        self.nested: list[SimpleCommand] = []


class _State:
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
_WRAPPERS = {
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
    "xargs": _Wrapper(
        short_values="adEILnPs",
        long_values=frozenset({
            "--arg-file", "--delimiter", "--max-args", "--max-procs", "--max-chars",
            "--process-slot-var",
        }),
        opaque=True,
    ),
    "setsid": _Wrapper(),
}
# fmt: on

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
_OPAQUE_PROGRAMS = frozenset({"eval", "exec", "source", ".", "xargs", "sudo", "doas"})
_RESERVED_LEADING = frozenset(
    {"!", "{", "}", "if", "then", "elif", "else", "fi", "while", "until", "do", "done", "esac"}
)
_LOOP_HEADERS = frozenset({"for", "select"})

_NAME_START = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_")
_NAME_CHARS = _NAME_START | frozenset("0123456789")
_NOT_PLAIN = frozenset(" \t\n;&|()<>'\"\\$`")
_NOT_DOUBLE_PLAIN = frozenset('"\\$`')
_SEPARATORS = (";;&", ";;", ";&", "&&", "&>>", "&>", "||", "|&", ";", "&", "|")
_REDIRECTIONS = ("<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">")
_INPUT_REDIRECTIONS = frozenset({"<", "<<<", "<&"})
_WORD_BREAK = frozenset(" \t\n;&|()")


def parse(command: str) -> ParsedShell:
    """Split a shell line into simple commands; never raises."""
    state = _State()
    try:
        commands = _Scanner(command, 0, state).sequence(closed_by_paren=False)
    except _Unparseable as exc:
        return ParsedShell((), unparseable=True, reason=str(exc), opaque=state.opaque)
    return ParsedShell(tuple(commands), opaque=state.opaque)


def _parse_nested(text: str, depth: int, state: _State) -> list[SimpleCommand]:
    if depth > MAX_DEPTH:
        raise _Unparseable(f"nesting deeper than {MAX_DEPTH}")
    return _Scanner(text, depth, state).sequence(closed_by_paren=False)


class _Scanner:
    """Reads one text; ``$(…)`` bodies share it (and its pending heredocs)."""

    __slots__ = ("text", "pos", "depth", "state", "heredocs")

    def __init__(self, text: str, depth: int, state: _State):
        self.text = text
        self.pos = 0
        self.depth = depth
        self.state = state
        self.heredocs: list[tuple[str, bool]] = []

    def sequence(self, *, closed_by_paren: bool) -> list[SimpleCommand]:
        text = self.text
        commands: list[SimpleCommand] = []
        pending = _Pending()
        subshells = 0
        while True:
            self._skip_blanks()
            if self.pos >= len(text):
                break
            char = text[self.pos]
            if char == "\n":
                self.pos += 1
                pending = self._finish(pending, commands)
                self._skip_heredoc_bodies()
            elif char == "#":
                end = text.find("\n", self.pos)
                self.pos = len(text) if end < 0 else end
            elif char == "(":
                self.pos += 1
                pending = self._finish(pending, commands)
                self.state.opaque = True
                subshells += 1
            elif char == ")":
                self.pos += 1
                pending = self._finish(pending, commands)
                if subshells:
                    subshells -= 1
                elif closed_by_paren:
                    return commands
                else:
                    raise _Unparseable("unbalanced parentheses")
            elif char in ";&|":
                operator = next(op for op in _SEPARATORS if text.startswith(op, self.pos))
                self.pos += len(operator)
                if operator.startswith("&>"):
                    self._redirect(operator, pending)
                else:
                    pending = self._finish(pending, commands)
            elif char in "<>" and not text.startswith("(", self.pos + 1):
                self._redirect(self._redirection_operator(), pending)
            else:
                word = self._word(pending.nested)
                if word.raw.isdigit() and self._at_redirection():
                    self._redirect(self._redirection_operator(), pending)
                else:
                    pending.words.append(word)
        if closed_by_paren:
            raise _Unparseable("unterminated command substitution")
        if subshells:
            raise _Unparseable("unbalanced parentheses")
        self._finish(pending, commands)
        return commands

    def _finish(self, pending: _Pending, commands: list[SimpleCommand]) -> _Pending:
        if pending.words or pending.redirects or pending.nested:
            commands.extend(_assemble(pending, self.depth, self.state))
            return _Pending()
        return pending

    def _skip_blanks(self) -> None:
        """Past ``(?:[ \\t]|\\\\\\n)*``: blanks and line continuations."""
        text = self.text
        while self.pos < len(text):
            if text[self.pos] in " \t":
                self.pos += 1
            elif text.startswith("\\\n", self.pos):
                self.pos += 2
            else:
                return

    def _skip_heredoc_bodies(self) -> None:
        text = self.text
        for delimiter, strip_tabs in self.heredocs:
            while self.pos < len(text):
                end = text.find("\n", self.pos)
                line = text[self.pos :] if end < 0 else text[self.pos : end]
                self.pos = len(text) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
        self.heredocs.clear()

    def _at_redirection(self) -> bool:
        text = self.text
        return (
            self.pos < len(text)
            and text[self.pos] in "<>"
            and not text.startswith("(", self.pos + 1)
        )

    def _redirection_operator(self) -> str:
        operator = next(op for op in _REDIRECTIONS if self.text.startswith(op, self.pos))
        self.pos += len(operator)
        return operator

    def _redirect(self, operator: str, pending: _Pending) -> None:
        self._skip_blanks()
        text = self.text
        if (
            self.pos >= len(text)
            or text[self.pos] in _WORD_BREAK
            or (text[self.pos] in "<>" and not text.startswith("(", self.pos + 1))
        ):
            raise _Unparseable(f"redirection {operator} has no target")
        target = self._word(pending.nested)
        if operator in ("<<", "<<-"):
            self.heredocs.append((target.value, operator == "<<-"))
            return
        duplicates_fd = operator == ">&" and _is_fd_duplicate(target.value)
        if not (operator in _INPUT_REDIRECTIONS or duplicates_fd or target.value == "/dev/null"):
            pending.redirects.append(target.value)

    def _word(self, nested: list[SimpleCommand]) -> _Word:
        text = self.text
        start = self.pos
        parts: list[str] = []
        while self.pos < len(text):
            plain_end = _run_end(text, self.pos, _NOT_PLAIN)
            if plain_end > self.pos:
                parts.append(text[self.pos : plain_end])
                self.pos = plain_end
                continue
            char = text[self.pos]
            if char in _WORD_BREAK:
                break
            if char in "<>":
                if not text.startswith("(", self.pos + 1):
                    break
                parts.append(self._substitution(self.pos + 2, nested))
            elif char == "\\":
                following = text[self.pos + 1 : self.pos + 2]
                if following != "\n":
                    parts.append(following or "\\")
                self.pos += 2
            elif char == "'":
                end = text.find("'", self.pos + 1)
                if end < 0:
                    raise _Unparseable("unbalanced quotes")
                parts.append(text[self.pos + 1 : end])
                self.pos = end + 1
            elif char == '"':
                parts.append(self._double_quoted(nested))
            elif char == "$":
                parts.append(self._dollar(nested))
            else:
                parts.append(self._backtick(nested))
        return _Word("".join(parts), text[start : self.pos])

    def _double_quoted(self, nested: list[SimpleCommand]) -> str:
        text = self.text
        self.pos += 1
        parts: list[str] = []
        while True:
            if self.pos >= len(text):
                raise _Unparseable("unbalanced quotes")
            char = text[self.pos]
            if char == '"':
                self.pos += 1
                return "".join(parts)
            if char == "\\":
                following = text[self.pos + 1 : self.pos + 2]
                if following in ("$", "`", '"', "\\"):
                    parts.append(following)
                    self.pos += 2
                elif following == "\n":
                    self.pos += 2
                else:
                    parts.append("\\")
                    self.pos += 1
            elif char == "$":
                parts.append(self._dollar(nested))
            elif char == "`":
                parts.append(self._backtick(nested))
            else:
                plain_end = _run_end(text, self.pos, _NOT_DOUBLE_PLAIN)
                parts.append(text[self.pos : plain_end])
                self.pos = plain_end

    def _dollar(self, nested: list[SimpleCommand]) -> str:
        text = self.text
        start = self.pos
        following = text[start + 1 : start + 2]
        if following == "(":
            if text.startswith("((", start + 1):
                return self._balanced(start, "(", ")", 2, "arithmetic")
            return self._substitution(start + 2, nested)
        if following == "{":
            return self._balanced(start, "{", "}", 1, "parameter expansion")
        if following == "'":
            end = start + 2
            while end < len(text) and text[end] != "'":
                end += 2 if text[end] == "\\" else 1
            if end >= len(text):
                raise _Unparseable("unbalanced quotes")
            self.pos = end + 1
            return text[start + 2 : end]
        if following == '"':
            self.pos += 1
            return self._double_quoted(nested)
        self.pos += 1
        return "$"

    def _balanced(self, start: int, opener: str, closer: str, depth: int, what: str) -> str:
        """``$((…))`` and ``${…}``: literal text; a command inside them is not followed."""
        text = self.text
        end = start + 1 + depth
        while depth and end < len(text):
            if text[end] == opener:
                depth += 1
            elif text[end] == closer:
                depth -= 1
            end += 1
        if depth:
            raise _Unparseable(f"unterminated {what}")
        body = text[start:end]
        if "$(" in body[2:] or "`" in body:
            raise _Unparseable(f"command substitution inside {what}")
        self.pos = end
        return body

    def _substitution(self, body_start: int, nested: list[SimpleCommand]) -> str:
        """``$(…)``, ``<(…)`` and ``>(…)``: parse the body in place, keep the text."""
        self.state.opaque = True
        if self.depth + 1 > MAX_DEPTH:
            raise _Unparseable(f"nesting deeper than {MAX_DEPTH}")
        start = self.pos
        self.pos = body_start
        self.depth += 1
        try:
            nested.extend(self.sequence(closed_by_paren=True))
        finally:
            self.depth -= 1
        return self.text[start : self.pos]

    def _backtick(self, nested: list[SimpleCommand]) -> str:
        self.state.opaque = True
        text = self.text
        start = self.pos
        end = start + 1
        body: list[str] = []
        while True:
            if end >= len(text):
                raise _Unparseable("unbalanced quotes")
            char = text[end]
            if char == "`":
                break
            if char == "\\" and text[end + 1 : end + 2] in ("`", "$", "\\"):
                body.append(text[end + 1])
                end += 2
            else:
                body.append(char)
                end += 1
        self.pos = end + 1
        nested.extend(_parse_nested("".join(body), self.depth + 1, self.state))
        return text[start : self.pos]


def _run_end(text: str, start: int, stops: frozenset[str]) -> int:
    """The end of the run of characters from ``start`` that are not in ``stops``."""
    end = start
    while end < len(text) and text[end] not in stops:
        end += 1
    return end


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


def _is_fd_duplicate(target: str) -> bool:
    """``\\d*-?``: the file descriptor ``>&`` duplicates (or ``-`` to close one)."""
    digits = target[:-1] if target.endswith("-") else target
    return not digits or digits.isdecimal()


def _assemble(pending: _Pending, depth: int, state: _State) -> list[SimpleCommand]:
    """Turn one command's words into its simple command, then its nested ones."""
    words = pending.words
    while words and words[0].raw in _RESERVED_LEADING:
        words = words[1:]
    if words and words[0].raw in _LOOP_HEADERS:
        words = []
    assignments: list[str] = []
    while words and _is_assignment(words[0].raw):
        assignments.append(words[0].value)
        words = words[1:]
    redirects = list(pending.redirects)
    words = _strip_wrappers(words, assignments, redirects, state)
    if words and ("$" in words[0].raw or "`" in words[0].raw):
        raise _Unparseable("the program name is not a literal word")
    argv = tuple(word.value for word in words)
    result = []
    if argv or assignments or redirects:
        result.append(SimpleCommand(argv, tuple(assignments), tuple(redirects)))
    result.extend(pending.nested)
    if argv and posixpath.basename(argv[0]) in _OPAQUE_PROGRAMS:
        state.opaque = True
    body = _carried_body(argv)
    if body is not None:
        state.opaque = True
        result.extend(_parse_nested(body, depth + 1, state))
    return result


def _strip_wrappers(
    words: list[_Word], assignments: list[str], redirects: list[str], state: _State
) -> list[_Word]:
    while words:
        name = posixpath.basename(words[0].value)
        wrapper = _WRAPPERS.get(name)
        if wrapper is None:
            return words
        index, options = _leading_options(
            [word.value for word in words], 1, wrapper.short_values, wrapper.long_values
        )
        if name == "command" and any(option in ("-v", "-V") for option, _ in options):
            return words
        if wrapper.opaque:
            state.opaque = True
        rest = words[min(index + wrapper.positionals, len(words)) :]
        outputs = []
        for option, value in options:
            if option in wrapper.output_options:
                outputs.append(value)
            elif option in ("-S", "--split-string"):
                rest = [_Word(token, token) for token in _split_string(value)] + rest
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


def _split_string(value: str) -> list[str]:
    try:
        return shellwords.split(value)
    except ValueError as exc:
        raise _Unparseable("unbalanced quotes") from exc


def _leading_options(
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


def _operands(
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


def _carried_body(argv: tuple[str, ...]) -> str | None:
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
    return _carried_body(command.argv) is not None


def shell_c_body(argv: list[str] | tuple[str, ...]) -> str | None:
    """The body when ``argv`` is exactly ``[shell, -…c…, BODY]`` (how Codex wraps commands)."""
    if len(argv) != 3 or posixpath.basename(argv[0]) not in SHELLS:
        return None
    index, has_c = _shell_flags_end(tuple(argv))
    return argv[2] if has_c and index == 2 else None


# ---- Ithaca CLI invocations -------------------------------------------------------------


def _is_python(program: str) -> bool:
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
    index, _ = _leading_options(argv, start, *_RUNNER_VALUES[runner])
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
    if _is_python(program):
        found = python_module(argv)
        if found and found[0] in _ITHACA_MODULES:
            return found[1]
    return None


# ---- write targets ------------------------------------------------------------------------

_COPY_VALUES = {"cp": "St", "mv": "St", "install": "gmoSt", "ln": "St"}
_OPERAND_VALUES = {
    "rm": "",
    "rmdir": "",
    "unlink": "",
    "touch": "drt",
    "mkdir": "m",
    "chmod": "",
    "chown": "",
    "truncate": "sr",
}


def _is_option_mode(arg: str) -> bool:
    """``-[rwxXst]+``: a ``chmod`` mode that looks like an option (``-w``)."""
    return len(arg) > 1 and arg[0] == "-" and all(char in "rwxXst" for char in arg[1:])


def write_targets(parsed: ParsedShell) -> tuple[str, ...]:
    """Raw (unresolved) paths the commands write, in order, without repeats.

    A relative target after ``cd DIR`` is reported as ``DIR/target``, so a later
    ``rm x`` in ``cd .ithaca && rm x`` is seen where it lands.
    """
    targets: list[str] = []
    directory = ""
    for command in parsed.commands:
        for target in (*command.redirects, *_command_targets(command)):
            if directory and not target.startswith(("/", "~")):
                target = posixpath.join(directory, target)
            if target not in targets:
                targets.append(target)
        if command.program in ("cd", "pushd"):
            directory = _change_directory(directory, command.argv[1:])
    return tuple(targets)


def _change_directory(current: str, args: tuple[str, ...]) -> str:
    operands, _ = _operands(args)
    if not operands:
        return "~"
    if operands[0] == "-":
        return "$OLDPWD"
    return posixpath.join(current, operands[0]) if current else operands[0]


def _command_targets(command: SimpleCommand) -> list[str]:
    program = command.program
    args = command.argv[1:]
    if program == "tee":
        return [path for path in _operands(args)[0] if path != "-"]
    if program in _COPY_VALUES:
        operands, options = _operands(args, _COPY_VALUES[program], frozenset({"--suffix"}))
        named = [value for name, value in options if name in ("-t", "--target-directory")]
        if program == "mv":
            return named + operands  # a move also removes its sources
        if named:
            return named
        if program == "install" and any(name in ("-d", "--directory") for name, _ in options):
            return operands
        if program == "ln" and len(operands) == 1:
            return [posixpath.basename(operands[0].rstrip("/"))]
        return operands[-1:]
    if program in _OPERAND_VALUES:
        return _operand_targets(program, args)
    if program == "find" and any(arg in _FIND_REMOVALS for arg in args):
        return _find_roots(args)
    if program == "dd":
        return [arg[3:] for arg in args if arg.startswith("of=")]
    if program == "git":
        return _git_targets(args)
    if program == "sed":
        return _sed_files(args)
    if program == "perl":
        return _perl_files(args)
    return []


_FIND_REMOVALS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir"})


def _find_roots(args: tuple[str, ...]) -> list[str]:
    """The starting points of a ``find`` that deletes or runs commands on what it finds."""
    roots = []
    for arg in args:
        if arg.startswith(("-", "(", "!")):
            break
        roots.append(arg)
    return roots or ["."]


def _git_targets(args: tuple[str, ...]) -> list[str]:
    """Paths that ``git checkout|restore|rm|mv`` overwrite or remove in the work tree."""
    words = [arg for arg in args if not arg.startswith("-")]
    if not words or words[0] not in ("checkout", "restore", "rm", "mv"):
        return []
    if "--" in args:
        return list(args[args.index("--") + 1 :])
    if words[0] == "checkout":
        return words[2:]  # ``checkout BRANCH`` alone moves HEAD; paths follow a tree-ish
    return words[1:]


def _operand_targets(program: str, args: tuple[str, ...]) -> list[str]:
    if program == "chmod":
        # The mode is the first operand, unless it looks like an option (``-w``) or
        # ``--reference`` replaces it.
        mode_pending = not any(arg.startswith("--reference") for arg in args)
        kept = []
        for arg in args:
            if mode_pending and _is_option_mode(arg):
                mode_pending = False
            else:
                kept.append(arg)
        operands, _ = _operands(tuple(kept))
        return operands[1:] if mode_pending else operands
    operands, options = _operands(args, _OPERAND_VALUES[program])
    if program == "chown" and not any(name == "--reference" for name, _ in options):
        return operands[1:]
    return operands


def _sed_files(args: tuple[str, ...]) -> list[str]:
    operands, options = _operands(
        args, "efl", frozenset({"--expression", "--file", "--line-length"})
    )
    names = {name for name, _ in options}
    if not names & {"-i", "--in-place"}:
        return []
    return operands if names & {"-e", "-f", "--expression", "--file"} else operands[1:]


def _perl_files(args: tuple[str, ...]) -> list[str]:
    in_place = False
    has_code = False
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            index += 1
            break
        if len(token) < 2 or token[0] != "-":
            break
        index += 1
        for position in range(1, len(token)):
            letter = token[position]
            if letter in "eEIMm":
                has_code = has_code or letter in "eE"
                if not token[position + 1 :] and index < len(args):
                    index += 1
                break
            if letter == "i":
                in_place = True
                break
            if letter in "l0xCdDF":
                break
    if not in_place:
        return []
    files = list(args[index:])
    return files if has_code else files[1:]


# ---- read-only judgement ------------------------------------------------------------------

_ALWAYS_READ_ONLY = frozenset({
    "ls", "cat", "head", "tail", "wc", "stat", "file", "du", "df", "pwd", "echo", "printf",
    "true", "false", "test", "[", "which", "type", "id", "whoami", "date", "uname", "env",
    "printenv", "basename", "dirname", "realpath", "readlink", "nl", "cut", "tr", "paste",
    "column", "diff", "cmp", "comm", "sha256sum", "md5sum", "od", "hexdump", "less", "more", "jq",
    "cd", "grep", "egrep", "fgrep", "rg", "ag", "sleep"
})  # fmt: skip
_IDLE_WRAPPERS = frozenset(_WRAPPERS) - _OPAQUE_PROGRAMS
_FIND_ACTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fls"})


def _is_sed_print(script: str) -> bool:
    """``(?:\\d+|\\$)(?:,(?:\\d+|\\$))?p``: ``sed -n`` printing a line or a range."""
    addresses = script[:-1].split(",") if script.endswith("p") else []
    return 0 < len(addresses) <= 2 and all(
        address == "$" or address.isdecimal() for address in addresses
    )


def _git_branch_flags(token: str) -> bool:
    """``-[alrvi]+``: ``git branch`` flags that only list."""
    return len(token) > 1 and token[0] == "-" and all(char in "alrvi" for char in token[1:])


def _git_tag_flags(token: str) -> bool:
    """``-(?:[li]+|n\\d*)``: ``git tag`` flags that only list."""
    flags = token[1:]
    if not token.startswith("-") or not flags:
        return False
    if flags[0] == "n":
        return not flags[1:] or flags[1:].isdecimal()
    return all(char in "li" for char in flags)


_GIT_READ_ONLY = frozenset({
    "status", "log", "diff", "show", "blame", "grep", "ls-files", "ls-tree", "rev-parse",
    "describe", "cat-file", "shortlog", "show-ref", "merge-base", "rev-list"
})  # fmt: skip
_GIT_GLOBAL_VALUES = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
# fmt: off
_GIT_LISTING_OPTIONS = frozenset({
    "--ignore-case", "--omit-empty", "--color", "--no-color", "--column", "--no-column",
    "--sort", "--format", "--contains", "--no-contains", "--merged", "--no-merged",
    "--points-at",
})
_GIT_LISTING = {
    "branch": (
        _git_branch_flags,
        _GIT_LISTING_OPTIONS | {
            "--all", "--remotes", "--verbose", "--show-current", "--abbrev", "--no-abbrev",
        },
    ),
    "tag": (_git_tag_flags, _GIT_LISTING_OPTIONS),
}
_GIT_LISTING_VALUES = frozenset({
    "--sort", "--format", "--points-at", "--contains", "--no-contains", "--merged", "--no-merged",
})
_UPDATE_FLAGS = frozenset({
    "--snapshot-update", "--force-regen", "-u", "--update", "--updateSnapshot",
    "--update-snapshots", "-update",
})
# fmt: on
_INLINE_SNAPSHOT_UPDATES = frozenset({"create", "fix", "update", "trim"})
_UV_TEST_FLAGS = frozenset({"--frozen", "--locked", "--offline"})


def is_read_only(
    parsed: ParsedShell,
    *,
    tests_are_read_only: bool = True,
    extra_read_only: tuple[str, ...] | frozenset[str] = (),
) -> bool:
    """True when no command of the line can change anything (ulysses §5.3)."""
    if parsed.unparseable or parsed.opaque:
        return False
    return all(
        _command_read_only(command, tests_are_read_only, extra_read_only)
        for command in parsed.commands
    )


def _command_read_only(
    command: SimpleCommand, tests_are_read_only: bool, extra: tuple[str, ...] | frozenset[str]
) -> bool:
    if command.redirects:
        return False
    if not command.argv:
        return True
    program = command.program
    argv = command.argv
    if program in _ALWAYS_READ_ONLY or program in _IDLE_WRAPPERS or program in extra:
        return True
    if program == "find":
        return not any(arg in _FIND_ACTIONS or arg.startswith("-fprint") for arg in argv[1:])
    if program == "fd":
        return not (
            _has_short_option(argv, "x", "etEdScj")
            or _has_short_option(argv, "X", "etEdScj")
            or any(arg.startswith("--exec") for arg in argv[1:])
        )
    if program in ("sort", "tree"):
        return not (
            _has_short_option(argv, "o", "ktST" if program == "sort" else "LPIHT")
            or any(_abbreviates(arg, "output") for arg in argv[1:])
        )
    if program == "uniq":
        operands, _ = _operands(
            argv[1:], "fsw", frozenset({"--skip-fields", "--skip-chars", "--check-chars"})
        )
        return len(operands) <= 1
    if program == "sed":
        return (
            len(argv) >= 3
            and argv[1] == "-n"
            and _is_sed_print(argv[2])
            and not any(arg.startswith("-") for arg in argv[3:])
        )
    if program == "git":
        return _git_read_only(argv)
    invocation = ithaca_invocation(command)
    if invocation is not None:
        from ithaca.kernel.authority import command_kind  # only Ithaca's own commands

        return command_kind(invocation) == "agent"
    if _is_test_run(command):
        return tests_are_read_only and not _requests_update(command)
    return False


def _has_short_option(argv: tuple[str, ...], letter: str, value_letters: str) -> bool:
    skip_next = False
    for token in argv[1:]:
        if skip_next:
            skip_next = False
            continue
        if token == "--":
            return False
        if len(token) < 2 or token[0] != "-" or token[1] == "-":
            continue
        for position in range(1, len(token)):
            if token[position] == letter:
                return True
            if token[position] in value_letters:
                skip_next = position == len(token) - 1
                break
    return False


def _abbreviates(token: str, long_name: str) -> bool:
    name = token[2:].partition("=")[0]
    return token.startswith("--") and bool(name) and long_name.startswith(name)


def _git_read_only(argv: tuple[str, ...]) -> bool:
    if any(arg.startswith("--output") for arg in argv):
        return False
    index = 1
    while index < len(argv):
        token = argv[index]
        if token == "-c" or token.startswith("--config-env"):
            return False
        if not token.startswith("-"):
            break
        index += 2 if token in _GIT_GLOBAL_VALUES else 1
    else:
        return True
    subcommand, args = argv[index], argv[index + 1 :]
    if subcommand in _GIT_READ_ONLY:
        return True
    if subcommand in _GIT_LISTING:
        return _git_listing(args, *_GIT_LISTING[subcommand])
    if subcommand == "stash":
        return args[:1] in (("list",), ("show",))
    if subcommand == "remote":
        return args[:1] == ("get-url",) or all(arg in ("-v", "--verbose") for arg in args)
    if subcommand == "config":
        return any(arg.startswith("--get") or arg in ("--list", "-l") for arg in args)
    if subcommand == "worktree":
        return args[:1] == ("list",)
    if subcommand == "reflog":
        return args[:1] not in (("expire",), ("delete",), ("drop",))
    return False


def _git_listing(args: tuple[str, ...], short: Callable[[str], bool], long: frozenset[str]) -> bool:
    listing = False
    has_operands = False
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if token in ("-l", "--list"):
            listing = True
        elif token.startswith("--"):
            name, equals, _ = token.partition("=")
            if name not in long:
                return False
            if (
                not equals
                and name in _GIT_LISTING_VALUES
                and index < len(args)
                and not args[index].startswith("-")
            ):
                index += 1
        elif token.startswith("-"):
            if not short(token):
                return False
            listing = listing or "l" in token
        else:
            has_operands = True
    return listing or not has_operands


def _is_test_run(command: SimpleCommand) -> bool:
    argv = command.argv
    program = command.program
    if program == "uv" and argv[1:2] == ("run",):
        index = 2
        while index < len(argv) and argv[index] in _UV_TEST_FLAGS:
            index += 1
        return _is_pytest(argv[index:])
    if program in ("go", "cargo", "pnpm", "yarn"):
        return argv[1:2] == ("test",)
    if program == "npm":
        return argv[1:2] == ("test",) or argv[1:3] == ("run", "test")
    if program == "npx":
        return argv[1:2] == ("jest",) or argv[1:3] == ("vitest", "run")
    if program == "node":
        return "--test" in argv[1:]
    return _is_pytest(argv)


def _is_pytest(argv: tuple[str, ...]) -> bool:
    if not argv:
        return False
    program = posixpath.basename(argv[0])
    if program == "pytest":
        return True
    if _is_python(program):
        found = python_module(argv)
        return found is not None and found[0] == "pytest"
    return False


def _requests_update(command: SimpleCommand) -> bool:
    for arg in command.argv[1:]:
        name, _, value = arg.partition("=")
        if name in _UPDATE_FLAGS:
            return True
        if name == "--inline-snapshot" and _INLINE_SNAPSHOT_UPDATES & set(value.split(",")):
            return True
    return any("UPDATE" in item.partition("=")[0].upper() for item in command.assignments)
