"""What a parsed shell line does to files: the paths it writes, and whether it can change
anything at all (ulysses §5.3).

The kernel guard and the path rules judge a shell call by the files it would change, as an
``Edit`` is judged by its ``file_path``. Beyond output redirections, this knows the
programs that write or remove their operands (``cp``, ``mv``, ``rm``, ``touch``, ``chmod``,
``sed -i``, ``perl -i``, ``git checkout -- …``…). A program it does not know names no
target, and the read-only judgement still treats it as mutating.

Read-only lines pass gates that hold back mutating calls, so that judgement errs towards
"mutating": an unparseable or opaque line, any output redirection and any program not
known to only read make the line mutating. Known programs are read-only only in the
forms that cannot write (``sed -n 5p``, ``sort`` without ``-o``, ``find`` without
``-exec`` or ``-delete``, listing forms of ``git branch`` and ``git tag``…). Test runs
count as read-only when the project says so, unless they update snapshots. An Ithaca
command is read-only when it is one an agent may run.

Hooks run this on every shell call, so flag patterns are matched with string methods
(no ``re``); each helper names the pattern it implements.
"""

from __future__ import annotations

import posixpath

from ithaca.kernel.shell_commands import (
    OPAQUE_PROGRAMS,
    WRAPPERS,
    is_python,
    ithaca_invocation,
    python_module,
    split_operands,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

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


_ALWAYS_READ_ONLY = frozenset({
    "ls", "cat", "head", "tail", "wc", "stat", "file", "du", "df", "pwd", "echo", "printf",
    "true", "false", "test", "[", "which", "type", "id", "whoami", "date", "uname", "env",
    "printenv", "basename", "dirname", "realpath", "readlink", "nl", "cut", "tr", "paste",
    "column", "diff", "cmp", "comm", "sha256sum", "md5sum", "od", "hexdump", "less", "more", "jq",
    "cd", "grep", "egrep", "fgrep", "rg", "ag", "sleep"
})  # fmt: skip
_IDLE_WRAPPERS = frozenset(WRAPPERS) - OPAQUE_PROGRAMS
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
        operands, _ = split_operands(
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
