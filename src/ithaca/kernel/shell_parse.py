"""The one shell parser for every gate: a line becomes a flat list of simple commands.

Gates must agree on what a shell line does, so there is one parser (DESIGN.md, kernel
contract 1). It is a small scanner rather than ``shlex`` alone because ``shlex`` cannot
see what matters here: newlines as separators, ``$(…)`` and backtick bodies, heredoc
bodies (which must be skipped, since they are data), redirections and their file
descriptors. What each command's words then run is ``shell_commands``' job; what the
commands write and whether they are read-only are judged from the result
(``shell_effects``).

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

from ithaca.kernel.call import SimpleCommand
from ithaca.kernel.shell_commands import (
    ParseState,
    Unparseable,
    Word,
    carried_body,
    simple_command,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
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


class _Pending:
    """The command being read: its words, redirection targets and nested commands."""

    __slots__ = ("words", "redirects", "nested")

    def __init__(self) -> None:
        self.words: list[Word] = []
        self.redirects: list[str] = []
        self.nested: list[SimpleCommand] = []


_NOT_PLAIN = frozenset(" \t\n;&|()<>'\"\\$`")
_NOT_DOUBLE_PLAIN = frozenset('"\\$`')
_SEPARATORS = (";;&", ";;", ";&", "&&", "&>>", "&>", "||", "|&", ";", "&", "|")
_REDIRECTIONS = ("<<<", "<<-", "<<", "<>", "<&", "<", ">>", ">|", ">&", ">")
_INPUT_REDIRECTIONS = frozenset({"<", "<<<", "<&"})
_WORD_BREAK = frozenset(" \t\n;&|()")


def parse(command: str) -> ParsedShell:
    """Split a shell line into simple commands; never raises."""
    state = ParseState()
    try:
        commands = _Scanner(command, 0, state).sequence(closed_by_paren=False)
    except Unparseable as exc:
        return ParsedShell((), unparseable=True, reason=str(exc), opaque=state.opaque)
    return ParsedShell(tuple(commands), opaque=state.opaque)


def _parse_nested(text: str, depth: int, state: ParseState) -> list[SimpleCommand]:
    if depth > MAX_DEPTH:
        raise Unparseable(f"nesting deeper than {MAX_DEPTH}")
    return _Scanner(text, depth, state).sequence(closed_by_paren=False)


class _Scanner:
    """Reads one text; ``$(…)`` bodies share it (and its pending heredocs)."""

    __slots__ = ("text", "pos", "depth", "state", "heredocs")

    def __init__(self, text: str, depth: int, state: ParseState):
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
                    raise Unparseable("unbalanced parentheses")
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
            raise Unparseable("unterminated command substitution")
        if subshells:
            raise Unparseable("unbalanced parentheses")
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
            raise Unparseable(f"redirection {operator} has no target")
        target = self._word(pending.nested)
        if operator in ("<<", "<<-"):
            self.heredocs.append((target.value, operator == "<<-"))
            return
        duplicates_fd = operator == ">&" and _is_fd_duplicate(target.value)
        if not (operator in _INPUT_REDIRECTIONS or duplicates_fd or target.value == "/dev/null"):
            pending.redirects.append(target.value)

    def _word(self, nested: list[SimpleCommand]) -> Word:
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
                    raise Unparseable("unbalanced quotes")
                parts.append(text[self.pos + 1 : end])
                self.pos = end + 1
            elif char == '"':
                parts.append(self._double_quoted(nested))
            elif char == "$":
                parts.append(self._dollar(nested))
            else:
                parts.append(self._backtick(nested))
        return Word("".join(parts), text[start : self.pos])

    def _double_quoted(self, nested: list[SimpleCommand]) -> str:
        text = self.text
        self.pos += 1
        parts: list[str] = []
        while True:
            if self.pos >= len(text):
                raise Unparseable("unbalanced quotes")
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
                raise Unparseable("unbalanced quotes")
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
            raise Unparseable(f"unterminated {what}")
        body = text[start:end]
        if "$(" in body[2:] or "`" in body:
            raise Unparseable(f"command substitution inside {what}")
        self.pos = end
        return body

    def _substitution(self, body_start: int, nested: list[SimpleCommand]) -> str:
        """``$(…)``, ``<(…)`` and ``>(…)``: parse the body in place, keep the text."""
        self.state.opaque = True
        if self.depth + 1 > MAX_DEPTH:
            raise Unparseable(f"nesting deeper than {MAX_DEPTH}")
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
                raise Unparseable("unbalanced quotes")
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


def _is_fd_duplicate(target: str) -> bool:
    """``\\d*-?``: the file descriptor ``>&`` duplicates (or ``-`` to close one)."""
    digits = target[:-1] if target.endswith("-") else target
    return not digits or digits.isdecimal()


def _assemble(pending: _Pending, depth: int, state: ParseState) -> list[SimpleCommand]:
    """One command's simple command, then its nested ones, then those of the body it
    carries (``sh -c BODY``, ``eval ARGS``)."""
    command = simple_command(pending.words, pending.redirects, state)
    result = [] if command is None else [command]
    result.extend(pending.nested)
    body = None if command is None else carried_body(command.argv)
    if body is not None:
        state.opaque = True
        result.extend(_parse_nested(body, depth + 1, state))
    return result
