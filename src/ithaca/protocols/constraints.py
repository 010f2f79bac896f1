"""Typed constraints: which of a bundle's constraints fire on one tool call.

A protocol's ``rules`` are prose for the model; its ``constraints`` are the part code can
check before a call runs (docs/protocols.md, "Constraints"). This module is pure: it takes
already-validated constraint dicts and a classified ``Call`` and says which constraints
fire, with a reason code and a sentence for the user. Reading state predicates, approval
records and the host's answer belongs to the enforcer, which passes in a ``state``
callable and an ``approved`` flag. It runs inside the PreToolUse hook, so it uses only
the standard library and caches pattern parsing.

Matching leans towards firing when a call is ambiguous, because a missed deny is worse
than an extra prompt:

- An unparseable shell command fires every ``deny_command`` and every ``require_approval``
  that lists commands (it might hide any of them).
- A write target whose path is decided by the shell (it contains ``$`` or a backtick)
  fires every ``deny_path`` and every ``require_approval`` that lists paths.
- A glob target such as ``src/*.key`` fires when some path starting with its literal
  part could match the pattern.
- A state predicate that raises, or returns anything but a bool, is unmet.

The glob and shell-word helpers are imported where a pattern is matched: a prompt's hook,
which checks records but matches no call, loads neither.
"""

from __future__ import annotations

from ithaca.kernel.call import Call, SimpleCommand
from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
    from collections.abc import Callable, Iterable, Sequence
    from typing import Any, TypeVar

    Result = TypeVar("Result")
else:
    from ithaca.kernel.tuples import namedtuple

_GLOB_CHARS = frozenset("*?[{")
_SHELL_DECIDED_CHARS = ("$", "`")
_SHOWN_CHARS = 160
_VERBS = {
    "deny": "is not allowed",
    "ask": "needs the user's confirmation",
    "approval": "needs the user's approval",
}
_SEVERITY = {"allow": 0, "ask": 1, "approval": 2, "deny": 3}


MEMO_SIZE = 1024


class Fired(namedtuple("Fired", "protocol_id index kind effect reason_code reason")):
    """One constraint that fired on a call.

    ``effect`` is ``deny``, ``ask`` or ``approval`` (a ``require_approval`` with no
    granted approval: the enforcer turns it into a stored request and a deny).
    """

    __slots__ = ()


# --- command patterns -------------------------------------------------------------


def _is_option(token: str) -> bool:
    return token.startswith("-") and token != "-"


def _basename(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def _memoised(function: Callable[[str], Result]) -> Callable[[str], Result]:
    """Remember up to ``MEMO_SIZE`` results by argument (``functools.lru_cache`` without
    ``functools``, which hook processes otherwise never load). Errors are not kept."""
    cache: dict[str, Result] = {}

    def cached(key: str) -> Result:
        if key in cache:
            return cache[key]
        found = function(key)
        if len(cache) < MEMO_SIZE:
            cache[key] = found
        return found

    return cached


@_memoised
def parse_command_pattern(pattern: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split a command pattern into its positional prefix and its option globs.

    Raises ``INVALID_CONSTRAINT`` when the pattern has unbalanced quotes or no tokens.
    """
    from ithaca.kernel.shellwords import split

    try:
        tokens = split(pattern)
    except ValueError as exc:
        raise InvalidInput(
            "INVALID_CONSTRAINT", f"command pattern {pattern!r} cannot be split: {exc}"
        ) from None
    if not tokens:
        raise InvalidInput("INVALID_CONSTRAINT", "a command pattern must not be empty")
    positional = [t for t in tokens if not _is_option(t)]
    options = tuple(t for t in tokens if _is_option(t))
    if positional:
        positional[0] = _basename(positional[0])
    return tuple(positional), options


def command_pattern_matches(pattern: str, argv: Sequence[str]) -> bool:
    """Whether one simple command's argv matches a command pattern (docs/protocols.md,
    "Constraints").

    The pattern's non-option tokens must glob-match, in order, a prefix of the command's
    non-option tokens, with ``argv[0]`` compared by basename. Each option token of the
    pattern must glob-match some option token anywhere in the command. A lone ``-`` is
    an operand, not an option.

    Because option values are operands, a global option that takes a value shifts the
    positions: ``git -C repo push`` has the non-option tokens ``git repo push``, so
    ``git * push`` matches it and ``git push`` does not.
    """
    from ithaca.kernel.globmatch import fnmatchcase

    if not argv:
        return False
    positional, options = parse_command_pattern(pattern)
    command_positional = [_basename(argv[0])]
    command_options: list[str] = []
    for token in argv[1:]:
        (command_options if _is_option(token) else command_positional).append(token)
    if len(positional) > len(command_positional):
        return False
    if not all(fnmatchcase(t, p) for t, p in zip(command_positional, positional, strict=False)):
        return False
    return all(any(fnmatchcase(t, o) for t in command_options) for o in options)


# --- path patterns ----------------------------------------------------------------


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s not in ("", ".")]


@_memoised
def _pattern_segments(pattern: str) -> tuple[bool, tuple[str, ...]]:
    """(absolute, segments) of a path pattern; a basename pattern becomes ``**/name``."""
    if "/" not in pattern:
        return False, ("**", pattern)
    segments = _segments(pattern)
    if pattern.endswith("/"):
        segments.append("**")
    return pattern.startswith("/"), tuple(segments)


def _skip_wildcards(items: Sequence[str], states: set[int], wildcard: str) -> set[int]:
    """Add the positions reached by letting each ``wildcard`` item match nothing."""
    pending = list(states)
    while pending:
        i = pending.pop()
        if i < len(items) and items[i] == wildcard and i + 1 not in states:
            states.add(i + 1)
            pending.append(i + 1)
    return states


def _step(items: Sequence[str], states: set[int], piece: str, wildcard: str) -> set[int]:
    """Positions in a glob reachable after consuming one more piece of the subject.

    Used twice: over path segments (``items`` are pattern segments, the wildcard is
    ``**``) and over characters (``items`` are one segment's matchers, the wildcard ``*``).
    """
    from ithaca.kernel.globmatch import fnmatchcase

    moved = set()
    for i in states:
        if i == len(items):
            continue
        if items[i] == wildcard:
            moved.add(i)
        elif fnmatchcase(piece, items[i]):
            moved.add(i + 1)
    return _skip_wildcards(items, moved, wildcard)


def _glob_tokens(glob: str) -> list[str]:
    """Split a segment glob into single-character matchers (``*``, ``?``, ``[…]``, a char)."""
    tokens = []
    i = 0
    while i < len(glob):
        end = i + 1
        if glob[i] == "[":
            j = i + 1
            if j < len(glob) and glob[j] == "!":
                j += 1
            if j < len(glob) and glob[j] == "]":
                j += 1
            j = glob.find("]", j)
            if j != -1:
                end = j + 1
        tokens.append(glob[i:end])
        i = end
    return tokens


def _glob_accepts_prefix(glob: str, prefix: str) -> bool:
    """Whether some string that starts with ``prefix`` matches the segment ``glob``."""
    tokens = _glob_tokens(glob)
    states = _skip_wildcards(tokens, {0}, "*")
    for char in prefix:
        states = _step(tokens, states, char, "*")
        if not states:
            return False
    return True


def _literal_prefix(target: str) -> str | None:
    """The part of ``target`` before its first glob character, or None if it has none."""
    for i, char in enumerate(target):
        if char in _GLOB_CHARS:
            return target[:i]
    return None


def path_pattern_matches(pattern: str, target: str) -> bool:
    """Whether a write target matches a path glob (docs/protocols.md, "Constraints").

    ``*`` matches within one segment and ``**`` any number of segments, none included (so
    ``secrets/**`` also covers ``rm -r secrets``). A pattern without ``/`` matches the
    basename at any depth; otherwise it is anchored at the project root, or absolute when
    it starts with ``/``. A trailing ``/`` covers the directory and everything below it.
    Targets are project-relative POSIX paths, or absolute when outside the project.

    A target that still contains glob characters (``*?[{``) matches when some path
    starting with its literal part could match the pattern.
    """
    absolute, pattern_segments = _pattern_segments(pattern)
    if "/" in pattern and absolute != target.startswith("/"):
        return False
    prefix = _literal_prefix(target)
    literal, partial = (target, "") if prefix is None else prefix.rpartition("/")[::2]
    states = _skip_wildcards(pattern_segments, {0}, "**")
    for segment in _segments(literal):
        states = _step(pattern_segments, states, segment, "**")
    if prefix is None:
        return len(pattern_segments) in states
    return any(
        i < len(pattern_segments) and _glob_accepts_prefix(pattern_segments[i], partial)
        for i in states
    )


def tool_pattern_matches(pattern: str, tool_name: str) -> bool:
    """Whether a raw tool name matches a tool glob (``fnmatchcase``, case-sensitive)."""
    from ithaca.kernel.globmatch import fnmatchcase

    return fnmatchcase(tool_name, pattern)


# --- evaluation -------------------------------------------------------------------


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


def _shown_command(command: SimpleCommand) -> str:
    import shlex  # only once a command rule fired, to quote it in the reason

    return _shown(shlex.join(command.argv))


def _is_shell_decided(target: str) -> bool:
    return any(char in target for char in _SHELL_DECIDED_CHARS)


def _matched_command(patterns: list[str], call: Call) -> str | None:
    """A sentence fragment naming the first simple command matching a pattern."""
    for command in call.commands:
        for pattern in patterns:
            if command_pattern_matches(pattern, command.argv):
                return f"Command `{_shown_command(command)}` (matching `{pattern}`)"
    return None


def _matched_target(patterns: list[str], call: Call) -> str | None:
    """A sentence fragment naming the first write target matching a pattern."""
    for target in call.write_targets:
        if _is_shell_decided(target):
            return f"Writing `{_shown(target)}`, a path only the shell decides,"
        for pattern in patterns:
            if path_pattern_matches(pattern, target):
                return f"Writing `{_shown(target)}` (matching `{pattern}`)"
    return None


def _matched_tool(patterns: list[str], call: Call) -> str | None:
    for pattern in patterns:
        if tool_pattern_matches(pattern, call.tool):
            return f"Tool `{call.tool}` (matching `{pattern}`)"
    return None


_UNPARSEABLE = "A shell command that cannot be parsed (it may hide a restricted command)"


def _deny_tool_subject(constraint: dict[str, Any], call: Call) -> str | None:
    subject = _matched_tool(constraint.get("tools", []), call)
    if subject is None and call.tool_class in constraint.get("classes", []):
        subject = f"Tool `{call.tool}` (class `{call.tool_class}`)"
    return subject


def _deny_command_subject(constraint: dict[str, Any], call: Call) -> str | None:
    if call.unparseable:
        return _UNPARSEABLE
    return _matched_command(constraint["commands"], call)


def _deny_path_subject(constraint: dict[str, Any], call: Call) -> str | None:
    return _matched_target(constraint["paths"], call)


def _approval_subject(constraint: dict[str, Any], call: Call) -> str | None:
    subject = None
    if constraint.get("commands"):
        subject = (
            _UNPARSEABLE if call.unparseable else _matched_command(constraint["commands"], call)
        )
    if subject is None and constraint.get("paths"):
        subject = _matched_target(constraint["paths"], call)
    if subject is None and constraint.get("tools"):
        subject = _matched_tool(constraint["tools"], call)
    return subject


TURN_KINDS = ("require_verification",)
_SUBJECT_FINDERS = {
    "deny_tool": _deny_tool_subject,
    "deny_command": _deny_command_subject,
    "deny_path": _deny_path_subject,
    "require_approval": _approval_subject,
}


def _state_in_scope(constraint: dict[str, Any], call: Call) -> bool:
    scope = constraint.get("for", "mutating")
    if scope == "any":
        return True
    if scope == "mutating":
        return call.mutating
    return call.mutating and call.tool_class in scope


def _require_state(
    constraint: dict[str, Any], call: Call, state: Callable[[str], bool]
) -> str | None:
    """The reason sentence when the state requirement is unmet for an in-scope call."""
    if not _state_in_scope(constraint, call):
        return None
    name = constraint["state"]
    expect = constraint.get("expect", True)
    try:
        value = state(name)
    except Exception:  # an unreadable predicate is unmet, whatever went wrong
        found = "it could not be checked"
    else:
        if value is expect:
            return None
        found = f"it is {str(value).lower()}" if isinstance(value, bool) else "it is unknown"
    return f"This call requires state `{name}` to be {str(expect).lower()}, but {found}."


def evaluate(
    constraints: Iterable[tuple[str, int, dict[str, Any]]],
    call: Call,
    *,
    state: Callable[[str], bool],
    approved: bool,
) -> list[Fired]:
    """The constraints that fire on ``call``, in input order.

    Each item is ``(protocol_id, index, constraint)`` with the constraint already
    validated. ``state(name)`` reads a registered state predicate; it is called only
    for ``require_state`` constraints whose scope covers the call. ``approved`` says
    whether a granted approval covers this exact action; it silences
    ``require_approval`` only (turning ``ask`` into allow is ``combine``'s job).
    """
    fired = []
    for protocol_id, index, constraint in constraints:
        outcome = _outcome(constraint, call, state, approved)
        if outcome is not None:
            fired.append(Fired(protocol_id, index, constraint["kind"], *outcome))
    return fired


def _outcome(
    constraint: dict[str, Any], call: Call, state: Callable[[str], bool], approved: bool
) -> tuple[str, str, str] | None:
    """(effect, reason_code, reason) when the constraint fires on ``call``, else None."""
    kind = constraint["kind"]
    given_reason = constraint.get("reason")
    effect = constraint.get("effect", "deny")
    if kind == "require_state":
        unmet = _require_state(constraint, call, state)
        return None if unmet is None else (effect, "STATE_REQUIRED", given_reason or unmet)
    if kind in TURN_KINDS:
        return None  # judged when the turn ends (``critic``), never on one call
    if kind not in _SUBJECT_FINDERS:
        raise InvalidInput("UNKNOWN_CONSTRAINT_KIND", f"unknown constraint kind {kind!r}")
    if kind == "require_approval" and approved:
        return None
    subject = _SUBJECT_FINDERS[kind](constraint, call)
    if subject is None:
        return None
    if kind == "require_approval":
        effect, reason_code = "approval", "APPROVAL_REQUIRED"
    elif subject == _UNPARSEABLE:
        reason_code = "UNPARSEABLE_COMMAND"
    else:
        reason_code = f"CONSTRAINT_{effect.upper()}"
    generated = f"{subject} {_VERBS[effect]}."
    if subject == _UNPARSEABLE:
        # The protocol's own reason speaks about the commands it names; say why it
        # applies to a command nobody could read, then quote it.
        return effect, reason_code, f"{generated} {given_reason or ''}".rstrip()
    return effect, reason_code, given_reason or generated


def combine(effects: Iterable[str], *, approved: bool = False) -> str:
    """The most severe effect: ``deny`` > ``approval`` > ``ask`` > ``allow``.

    ``approval`` outranks ``ask`` because asking the host's user does not grant an
    Ithaca approval. With ``approved``, ``ask`` becomes ``allow``; nothing overrides a
    deny.
    """
    worst = max(effects, key=_SEVERITY.__getitem__, default="allow")
    return "allow" if worst == "ask" and approved else worst
