"""The kernel guard: the gate every host runs before any part's own gates.

It leaves a call ticket for each of Ithaca's own MCP calls it lets through, so that the
server learns the calling host session from a trusted source
(``ithaca.kernel.mcp_calls``); it neither rewrites nor allows the call, so the user's
permission rules still apply. It denies an agent's writes under the state root
(``.ithaca/``) except the paths a part has allowed for a while (``write_allowances``),
any direct use of the state database, and any invocation of a user-only Ithaca command
however it is spelled. An allowance is its owner's: it counts only for a call its
holder acts for, as the owning part decides (``ithaca.kernel.allowances``; delivery's
gate says which execution sessions act for a call). The kernel never asks a part
directly. The work folder beside the state root (``.ithaca-work/``) is not state:
delivery's gate says whose each folder there is. The protocol
``ithaca.state-off-limits`` tells the agent the rule; this module enforces it.

Writes the shell parser cannot see are caught from the text instead: inline code handed
to an interpreter (``python -c``, ``node -e``…) that names the state folder, and targets
held in a shell variable the same line set to a path there (``D=.ithaca; rm -rf $D``).
These are heuristics against an over-eager agent, not a sandbox.
"""

from __future__ import annotations

import os

from ithaca.kernel import allowances, config
from ithaca.kernel.call import DECLARATIONS, Call, SimpleCommand, command_text
from ithaca.kernel.fingerprint import PROJECT_WIRING
from ithaca.kernel.gates import ABSTAIN, DISPLACED, GateContext, Opinion
from ithaca.kernel.project import STATE_DIR_NAME, WORK_DIR_NAME

EVENTS = ("PreToolUse",)
# The host's own settings files: removing Ithaca's entries there unwires every gate.
HOST_FILES = frozenset(PROJECT_WIRING)
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
    displaced = ctx.scratch.get(DISPLACED)
    if displaced is not None and call.mutating:
        return Opinion(
            "deny",
            "STATE_ROOT_DISPLACED",
            f"Ithaca: this call runs where {displaced} would be the state folder, but this"
            f" session belongs to the project at {ctx.project.root}, whose rules apply."
            " Another .ithaca/ is not obeyed: work from the project, and leave state"
            " folders to `ithaca init`.",
        )
    if call.tool_class == "ithaca" and call.tool.startswith("mcp__") and ctx.session_id:
        return _ticket_call(call, ctx)
    denied = _ithaca_command_denied(call)
    if denied is not None:
        return denied
    undecided = [argv for argv in call.ithaca_commands if _undecided_command_path(argv)]
    if (call.mutating or undecided) and _names_host_wiring(call):
        return _host_wiring_denied()
    if undecided:
        return _unverifiable(f"`ithaca {' '.join(undecided[0])}` leaves its command to the shell")
    state_root = ctx.project.state_root
    user_settings = os.path.realpath(config.home())
    allowed = allowances.counted(ctx)
    state_variables = _state_variables(call.commands, state_root)
    for target in call.write_targets:
        path = _absolute(ctx.project.root, target)
        if _may_touch(target, STATE_DIR_NAME) and not _shell_decided(target):
            path = os.path.join(state_root, "*")  # a glob such as `.ith*` can reach it
        elif _shell_decided(target) and _names_state(target, state_root, state_variables):
            path = state_root  # `"$PWD/.ithaca"`, `$D`: decided by the shell, aimed at the state
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
            return _state_write_denied(f"{target} is under {os.path.basename(state_root)}/")
    if call.mutating:
        for command in call.commands:
            words = _inline_code_words(command.argv)
            if any(_names_state(word, state_root, state_variables) for word in words):
                return _state_write_denied(
                    f"`{command.program}` runs inline code that names"
                    f" {os.path.basename(state_root)}/"
                )
    if any(_cleans_ignored_files(command.argv) for command in call.commands):
        return Opinion(
            "deny",
            "STATE_WRITE_DENIED",
            "Ithaca: `git clean -x` would delete .ithaca/.runtime/ (Ithaca's state, which Git"
            " ignores) and the sessions' outputs in .ithaca-work/. Clean without -x, or ask"
            " the user.",
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
    hidden = _hidden_ithaca_code(call)
    if hidden is not None:
        return _unverifiable(hidden)
    return ABSTAIN


def _state_write_denied(subject: str) -> Opinion:
    return Opinion(
        "deny",
        "STATE_WRITE_DENIED",
        f"Ithaca: {subject}, which only Ithaca writes."
        " Change Ithaca state through its tools and commands.",
    )


# How an interpreter takes code on its command line, by program family: long options
# whose value is code, short letters whose value is code, letters taking a value (attached
# or the next word), letters taking only an attached value, and letters after which a file
# or module runs instead. Shells are listed so that `sh -c BODY ARGS` finds its BODY.
_INLINE: dict[str, tuple[frozenset[str], str, str, str, str]] = {
    "python": (frozenset(), "c", "WX", "", "m"),
    "pypy": (frozenset(), "c", "WX", "", "m"),
    "node": (frozenset({"--eval", "--print"}), "ep", "r", "", ""),
    "nodejs": (frozenset({"--eval", "--print"}), "ep", "r", "", ""),
    "bun": (frozenset({"--eval", "--print"}), "ep", "r", "", ""),
    "perl": (frozenset(), "eE", "", "0CdDFiIlmMx", ""),
    "ruby": (frozenset(), "e", "CEIr", "0FiKlTWx", ""),
    "php": (frozenset(), "rBRE", "cdz", "", "fF"),
    **{shell: (frozenset(), "c", "oO", "", "") for shell in ("sh", "bash", "zsh", "dash", "ksh")},
}
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh"})
# Tools that run a program inside an environment: `uv run python -c …`.
_RUNNERS = frozenset({"uv", "poetry", "pdm", "hatch", "pipenv", "rye", "conda", "mamba"})


def _inline_code_words(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The inline code an interpreter runs and the words it passes that code, or ``()``.

    A shell's ``-c`` body is parsed into commands of its own, so for a shell only the words
    the body receives as ``$0``, ``$1``… count, and only when the body reads a variable.
    """
    if argv and argv[0].rsplit("/", 1)[-1] in _RUNNERS and "run" in argv:
        rest = argv[argv.index("run") + 1 :]
        argv = next((rest[i:] for i, word in enumerate(rest) if _family(word)), ())
    family = _family(argv[0]) if argv else None
    if family is None:
        return ()
    if family == "deno":
        return argv[2:] if argv[1:2] == ("eval",) else ()
    code = _inline_code_index(argv, *_INLINE[family])
    if code is None:
        return ()
    if family in _SHELLS:
        while code < len(argv) and argv[code][:1] in ("-", "+"):
            code += 1  # `bash -ce BODY`: the body is the first operand
        return argv[code + 1 :] if "$" in "".join(argv[code : code + 1]) else ()
    return argv[1:]


def _family(word: str) -> str | None:
    """``python3.11`` → ``python``, ``php8.2`` → ``php``; ``None`` for other programs."""
    family = word.rsplit("/", 1)[-1].rstrip("0123456789.")
    return family if family in _INLINE or family == "deno" else None


def _inline_code_index(
    argv: tuple[str, ...],
    long_code: frozenset[str],
    code: str,
    valued: str,
    attached: str,
    stops: str,
) -> int | None:
    """Index of the word holding the inline code, scanning options up to the first operand."""
    index = 1
    while index < len(argv):
        token = argv[index]
        index += 1
        if token.split("=", 1)[0] in long_code:
            return index - 1 if "=" in token else index
        if token.startswith("--") or (token[:1] == "+" and len(token) > 1):
            continue  # `--norc`, `+o pipefail`: options without inline code
        if len(token) < 2 or token[0] != "-":
            return None  # a script or a lone `-`: the code comes from elsewhere
        for position, letter in enumerate(token[1:], start=2):
            if letter in stops:
                return None
            if letter in code:
                return index - 1 if position < len(token) else index
            if letter in attached:
                break
            if letter in valued:
                index += position == len(token)  # `-W ignore`: the value is the next word
                break
    return None


def _state_variables(commands: tuple[SimpleCommand, ...], state_root: str) -> frozenset[str]:
    """Shell variables the line sets to a path naming the state folder and uses afterwards."""
    aimed: set[str] = set()
    used: set[str] = set()
    for command in commands:
        words = (*command.argv, *command.redirects)
        used.update(name for name in aimed if any(_uses_variable(w, name) for w in words))
        for name, value in _assignments(command):
            if _names_state(value, state_root, aimed):
                aimed.add(name)
            else:
                aimed.discard(name)
    return frozenset(used)


def _assignments(command: SimpleCommand) -> list[tuple[str, str]]:
    words = list(command.assignments)
    if command.program in DECLARATIONS:
        words += [word for word in command.argv[1:] if not word.startswith(("-", "+"))]
    pairs = []
    for word in words:
        name, equals, value = word.partition("=")
        name = name.split("[", 1)[0].rstrip("+")
        if equals and name.isidentifier():
            pairs.append((name, value))
    return pairs


def _names_state(word: str, state_root: str, variables: set[str] | frozenset[str]) -> bool:
    """Whether ``word`` names the state folder, literally or through one of ``variables``
    (the work folder ``.ithaca-work``, whose name starts alike, is not the state folder)."""
    if _names_folder(word, STATE_DIR_NAME) or _names_folder(word, state_root):
        return True
    return "$" in word and any(_uses_variable(word, name) for name in variables)


def _names_folder(word: str, name: str) -> bool:
    """Whether ``name`` occurs in ``word`` other than as the start of the work folder's."""
    work = name + WORK_DIR_NAME[len(STATE_DIR_NAME) :] if name.endswith(STATE_DIR_NAME) else None
    start = word.find(name)
    while start >= 0:
        if work is None or not word.startswith(work, start):
            return True
        start = word.find(name, start + 1)
    return False


def _uses_variable(word: str, name: str) -> bool:
    """Whether ``word`` expands ``$name`` or ``${name…}``."""
    for reference in ("$" + name, "${" + name):
        start = word.find(reference)
        while start >= 0:
            end = start + len(reference)
            if end == len(word) or not (word[end].isalnum() or word[end] == "_"):
                return True
            start = word.find(reference, end)
    return False


def _shell_decided(word: str) -> bool:
    return "$" in word or "`" in word


def _has_glob(word: str) -> bool:
    return any(char in word for char in "*?[")


def _may_touch(target: str, name: str) -> bool:
    """Whether a glob target's first component could expand to ``name`` (``.ith*``); the
    shell expands to hidden names only from a pattern that starts with a dot."""
    first = target.split("/", 1)[0]
    if not (first.startswith(".") and _has_glob(first)):
        return False
    from ithaca.kernel.globmatch import fnmatchcase

    return fnmatchcase(name, first)


def _names_database(word: str) -> bool:
    """``state.db`` (or its -wal/-shm), also as a glob aimed at it (``stat?.db``, or
    ``*.db`` inside the runtime folder), but not a bare ``*``."""
    name = os.path.basename(word)
    if name.startswith("state.db"):
        return True
    if not _has_glob(name):
        return False
    from ithaca.kernel.globmatch import fnmatchcase

    if not fnmatchcase("state.db", name):
        return False
    literal = name[: min(name.find(c) for c in "*?[" if c in name)]
    return bool(literal) or ".runtime" in word


def _names_host_wiring(call: Call) -> bool:
    """A mutating shell line whose text names Ithaca's host wiring, however it is hidden
    from the parser (``echo '…' | bash``, heredocs, ``python -c``, substitutions)."""
    text = command_text(call)
    if "ithaca" not in text:
        return False
    spaced = " ".join(text.replace("'", " ").replace('"', " ").split())
    return any(phrase in spaced for phrase in _HOST_PHRASES)


def _ticket_call(call: Call, ctx: GateContext) -> Opinion:
    """Let an Ithaca MCP call through to the host's own permission rules, with a ticket
    for the server (left by ``commit``); a different session supplied is refused, since it
    would act on another session's state."""
    supplied = call.tool_input.get("session")
    if supplied is not None and supplied != ctx.session_id:
        return Opinion(
            "deny",
            "SESSION_MISMATCH",
            f"Ithaca refused this call: it names session {supplied!r} but runs in session"
            f" {ctx.session_id!r}. Leave `session` out; Ithaca knows the caller.",
        )
    ctx.scratch["guard_ticket"] = True
    return ABSTAIN


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> None:
    """Leave the ticket of an Ithaca MCP call that the hooks let through."""
    if call is None or not ctx.scratch.get("guard_ticket") or final.effect in ("deny", "block"):
        return
    from ithaca.kernel import mcp_calls

    assert ctx.conn is not None and ctx.session_id is not None
    tool_use_id = ctx.payload.get("tool_use_id")
    mcp_calls.issue(
        ctx.conn,
        host=ctx.host,
        session_id=ctx.session_id,
        agent_id=call.agent_id,
        tool=call.tool.rsplit("__", 1)[1],
        arguments=call.tool_input,
        tool_use_id=tool_use_id if isinstance(tool_use_id, str) else None,
        now=ctx.now,
    )


def _ithaca_command_denied(call: Call) -> Opinion | None:
    """A refusal for the first Ithaca command of the line that wires the host or is the
    user's to run, else None."""
    if not call.ithaca_commands:
        return None
    from ithaca.kernel.authority import command_kind, user_only_command

    for argv in call.ithaca_commands:
        if command_kind(argv) == "host":
            return _host_wiring_denied()
        command = user_only_command(argv)
        if command is not None:
            spelled = "ithaca " + " ".join(command)
            return Opinion(
                "deny",
                "AUTHORITY_USER_ONLY",
                f"Ithaca: `{spelled}` is the user's to run in their own terminal. "
                "Show the user the exact command and wait; never run it yourself.",
            )
    return None


def _undecided_command_path(argv: tuple[str, ...]) -> bool:
    """Whether the shell, not the text, decides which Ithaca command runs: a substitution,
    variable or glob among the first two command words or the options before them
    (``ithaca ultragoal $OP``, ``ithaca ultra*``). Values may vary: those of later words and
    of the group options (``ithaca --project "$PWD" …``, ``--session "$ITHACA_SESSION_ID"``)."""
    from ithaca.kernel.authority import GROUP_VALUE_OPTIONS

    literal = 0
    value_next = False
    for word in argv:
        if value_next:
            value_next = False
            continue
        if word in GROUP_VALUE_OPTIONS:
            value_next = True
            continue
        if word.split("=", 1)[0] in GROUP_VALUE_OPTIONS:
            continue
        if _shell_decided(word) or _has_glob(word):
            return True
        if not word.startswith("-"):
            literal += 1
            if literal == 2:
                return False
    return False


def _hidden_ithaca_code(call: Call) -> str | None:
    """Why a line may run Ithaca where the parser cannot follow: an unparseable line, Python
    code given inline or on standard input, or text fed to a shell reading standard input,
    each mentioning ``ithaca``. ``None`` when nothing is hidden."""
    text = command_text(call)
    if not _mentions_ithaca(text):
        return None
    if call.unparseable:
        return "UNPARSEABLE"
    for command in call.commands:
        family = _family(command.argv[0]) if command.argv else None
        if family in ("python", "pypy"):
            code = _inline_code_index(command.argv, *_INLINE[family])
            if code is not None and _mentions_ithaca(command.argv[code]):
                return f"`{command.program} -c` runs code that mentions ithaca"
            if _reads_standard_input(command.argv):
                return f"`{command.program}` reads code that mentions ithaca from standard input"
        elif family in _SHELLS and _reads_standard_input(command.argv):
            return f"`{command.program}` runs commands from standard input that mention ithaca"
    return None


def _mentions_ithaca(text: str) -> bool:
    """``ithaca`` other than as the state folder's name (``.ithaca``), which the state
    checks above judge."""
    start = text.find("ithaca")
    while start >= 0:
        if start == 0 or text[start - 1] != ".":
            return True
        start = text.find("ithaca", start + 1)
    return False


def _reads_standard_input(argv: tuple[str, ...]) -> bool:
    """An interpreter given no script or inline code, or given ``-``: it runs its input."""
    operands = [word for word in argv[1:] if not word.startswith("-") or word == "-"]
    inline = any(word[:1] == "-" and word[1:2] != "-" and "c" in word[1:] for word in argv[1:])
    return not inline and (not operands or operands[0] == "-")


def _unverifiable(why: str) -> Opinion:
    if why == "UNPARSEABLE":
        return Opinion(
            "deny",
            "AUTHORITY_UNPARSEABLE_COMMAND",
            "Ithaca: this shell line mentions ithaca but cannot be parsed, so Ithaca cannot"
            " tell which command it runs. Run each Ithaca command on its own, plainly spelled.",
        )
    return Opinion(
        "deny",
        "AUTHORITY_UNVERIFIABLE_COMMAND",
        f"Ithaca: {why}, so Ithaca cannot verify which command runs. Spell the Ithaca"
        " command out literally (`ithaca <part> <subcommand> …`).",
    )


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


def _absolute(base: str, target: str) -> str:
    return os.path.normpath(os.path.join(base, target))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
