"""What a parsed shell line does to files: the paths it writes, and whether it can change
anything at all (docs/hooks.md, "What counts as mutating").

The kernel guard and the path rules judge a shell call by the files it would change, as an
``Edit`` is judged by its ``file_path``. Beyond output redirections, this knows the
programs that write or remove their operands (``cp``, ``mv``, ``rm``, ``touch``, ``chmod``,
``sed -i``, ``perl -i``, ``git checkout -- …``…). A program it does not know names no
target, and the read-only judgement still treats it as mutating.

Read-only lines pass gates that hold back mutating calls (a lockdown, the end-of-turn
critic), so that judgement errs towards "mutating": an unparseable or opaque line, any
output redirection and any program not known to only read make the line mutating. The
``PLAIN_READERS`` (``cat``, ``grep``…) have no option that writes or starts a program;
every other program on the list (``git``, ``find``, ``rg``, ``sort``…) is read-only only
with the options known to only read, which ``shell_readers`` lists and judges. A listed
program counts only when named bare or in a system directory, and only with settings that
choose no program or settings file (``GIT_PAGER=cat``, not ``GIT_PAGER=less`` or
``LESSOPEN=…``). Test runs count as read-only when the project says so, unless they update
snapshots. An Ithaca command is read-only when it is one an agent may run.

Hooks run this on every shell call, so flag patterns are matched with string methods
(no ``re``); each helper names the pattern it implements.
"""

from __future__ import annotations

import posixpath

from ithaca.kernel.shell_commands import (
    OPAQUE_PROGRAMS,
    PLAIN_READERS,
    WRAPPERS,
    is_python,
    ithaca_invocation,
    python_module,
    split_operands,
    system_program,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.call import SimpleCommand
    from ithaca.kernel.shell_parse import ParsedShell


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
    operands, _ = split_operands(args)
    if not operands:
        return "~"
    if operands[0] == "-":
        return "$OLDPWD"
    return posixpath.join(current, operands[0]) if current else operands[0]


def _command_targets(command: SimpleCommand) -> list[str]:
    program = command.program
    args = command.argv[1:]
    if program == "tee":
        return [path for path in split_operands(args)[0] if path != "-"]
    if program in _COPY_VALUES:
        operands, options = split_operands(args, _COPY_VALUES[program], frozenset({"--suffix"}))
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
        operands, _ = split_operands(tuple(kept))
        return operands[1:] if mode_pending else operands
    operands, options = split_operands(args, _OPERAND_VALUES[program])
    if program == "chown" and not any(name == "--reference" for name, _ in options):
        return operands[1:]
    return operands


def _sed_files(args: tuple[str, ...]) -> list[str]:
    operands, options = split_operands(
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


# ---- the judgement ---------------------------------------------------------------------

# The programs read-only only with the options known to only read, which
# ``shell_readers.only_reads`` judges. A program here or in ``PLAIN_READERS`` is read-only
# only when named bare or in a system directory.
_OPTION_READERS = frozenset({
    "find", "fd", "sort", "tree", "uniq", "sed", "git", "rg", "ag", "less", "more", "file",
    "date", "printf",
})  # fmt: skip
_IDLE_WRAPPERS = frozenset(WRAPPERS) - OPAQUE_PROGRAMS
# The variables a command may set for a read-only program: none of them names a program
# to run or a file of settings. (``GIT_PAGER=less``, ``LESSOPEN``, ``PATH``, ``HOME``,
# ``GIT_CONFIG_*``, ``GIT_EXTERNAL_DIFF``, ``RIPGREP_CONFIG_PATH``… all may.)
# fmt: off
_QUIET_VARIABLES = frozenset({
    "LANG", "LANGUAGE", "TZ", "COLUMNS", "LINES", "TERM", "NO_COLOR", "FORCE_COLOR",
    "CLICOLOR", "CLICOLOR_FORCE", "GREP_COLOR", "GREP_COLORS", "LS_COLORS", "TIME_STYLE",
    "GIT_OPTIONAL_LOCKS", "GIT_TERMINAL_PROMPT",
    "GIT_LITERAL_PATHSPECS", "GIT_NO_REPLACE_OBJECTS", "GIT_FLUSH",
})
_PAGER_VARIABLES = frozenset({"PAGER", "GIT_PAGER", "MANPAGER"})
# What the programs on the read-only list read from their environment to find a program
# or a file of settings: a line that sets one, even without ``export``, changes it for
# every later command when the shell had it exported already.
_STEERING_VARIABLES = frozenset({
    "PATH", "HOME", "IFS", "ENV", "BASH_ENV", "SHELL", "EDITOR", "VISUAL", "TMPDIR",
    "RIPGREP_CONFIG_PATH", "MANOPT", "JQ_LIBRARY_PATH", "POSIXLY_CORRECT",
})
_STEERING_PREFIXES = ("GIT_", "LESS", "LD_", "DYLD_", "XDG_")
_UPDATE_FLAGS = frozenset({
    "--snapshot-update", "--force-regen", "-u", "--update", "--updateSnapshot",
    "--update-snapshots", "-update",
})
# fmt: on
_INLINE_SNAPSHOT_UPDATES = frozenset({"create", "fix", "update", "trim"})
_UV_TEST_FLAGS = frozenset({"--frozen", "--locked", "--offline"})


def _variable(assignment: str) -> tuple[str, str]:
    """``(NAME, value)`` of ``NAME=value``, ``NAME+=value`` or ``NAME[i]=value``."""
    name, _, value = assignment.partition("=")
    return name.rstrip("+").partition("[")[0], value


def _quiet_setting(assignment: str) -> bool:
    """Whether ``NAME=value`` before a read-only program leaves what it runs and reads
    alone: a lower-case shell variable, a locale, a colour or width setting, or a pager
    that is ``cat``."""
    name, value = _variable(assignment)
    if name in _PAGER_VARIABLES:
        return value in ("", "cat")
    return name[:1].islower() or name.startswith("LC_") or name in _QUIET_VARIABLES


def _inert_assignment(assignment: str) -> bool:
    """Whether ``NAME=value`` on its own, with no program, changes no later program's run."""
    if _quiet_setting(assignment):
        return True
    name, _ = _variable(assignment)
    steering = name in _STEERING_VARIABLES or name in _PAGER_VARIABLES
    return not (steering or name.startswith(_STEERING_PREFIXES))


def is_read_only(
    parsed: ParsedShell,
    *,
    tests_are_read_only: bool = True,
    extra_read_only: tuple[str, ...] | frozenset[str] = (),
) -> bool:
    """True when no command of the line can change anything."""
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
    argv = command.argv
    if not argv:
        return all(_inert_assignment(item) for item in command.assignments)
    if command.program in extra:
        return True
    name = system_program(argv[0])
    by_options = name in _OPTION_READERS
    if by_options or name in PLAIN_READERS or name in _IDLE_WRAPPERS:
        if not all(_quiet_setting(item) for item in command.assignments):
            return False
        if not by_options:
            return True
        # Only a program with a list of options loads the lists: each module costs every
        # hook call ~0.3 M instructions to import, and ``cat`` or ``ls`` needs none.
        from ithaca.kernel.shell_readers import only_reads

        return only_reads(name, argv)
    invocation = ithaca_invocation(command)
    if invocation is not None:
        from ithaca.kernel.authority import command_kind  # only Ithaca's own commands

        return command_kind(invocation) == "agent"
    if _is_test_run(command):
        return tests_are_read_only and not _requests_update(command)
    return False


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
    if is_python(program):
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
