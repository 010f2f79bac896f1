"""The options that decide whether a reading program only reads (docs/hooks.md).

``find``, ``sort``, ``rg``, ``git`` and the other programs here read in their everyday
forms, and each also has options that write a file or start another program (``find
-delete``, ``sort -o FILE``, ``rg --pre CMD``, ``less -o FILE``, ``git diff
--output=FILE``). So each has the list of its options known to only read, and any option
not on it, one that writes or one Ithaca does not know, makes the command mutating: like
``shell_effects``, this errs towards "mutating". ``listed_operands`` reads a command's
words against such a list. Git's lists, one per reading subcommand, are in
``shell_git_reads``.

``shell_effects`` imports this module only for a program named in its ``_OPTION_READERS``:
the lists are long, and a hook call for ``cat`` or ``ls`` need not load them. Flag
patterns are matched with string methods (no ``re``); each helper names the pattern it
implements.
"""

from __future__ import annotations

from ithaca.kernel.shell_commands import split_operands

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def only_reads(program: str, argv: tuple[str, ...]) -> bool:
    """Whether ``argv`` runs ``program`` only with options known to only read; ``False``
    for a program without a list here."""
    if program == "git":
        # Git's lists load only for ``git``: they are as long as all the others, and
        # every module costs a hook call ~0.3 M instructions to import.
        from ithaca.kernel.shell_git_reads import git_reads

        return git_reads(argv)
    judge = _JUDGES.get(program)
    return judge is not None and judge(argv)


_END_OF_OPTIONS = ("--",)
# The option lists below are kept as text, each a set only once a command needs it:
# hundreds of small constants would cost every hook call that loads this module.
_WORDS: dict[str, frozenset[str]] = {}


def word_set(text: str) -> frozenset[str]:
    """The set of the space-separated words of ``text`` (made once per text)."""
    found = _WORDS.get(text)
    if found is None:
        found = _WORDS[text] = frozenset(text.split())
    return found


def listed_operands(
    args: tuple[str, ...],
    flags: str,
    values: str,
    longs: str,
    numbers: bool = False,
    *,
    optional: str = "",
    long_values: str = "",
    skip: bool = False,
    ends: tuple[str, ...] = _END_OF_OPTIONS,
    seen: list[str] | None = None,
) -> list[str] | None:
    """The operands of ``args`` when every option is one of those named, else ``None``.

    ``flags`` are the short options without a value; ``values`` those whose value is the
    rest of the word or the next word, ``optional`` those whose value can only be the rest
    of the word; ``longs`` every allowed ``--name`` (as ``--name=value`` too); ``numbers``
    allows ``-5``. With ``skip``, for a program whose option parser these tables describe
    exactly (getopt's), the word after ``-k`` or a name in ``long_values`` is skipped as
    its value. Without it, that word is judged as if it stood alone, which can only find
    more options than the program sees, never fewer. ``seen`` collects the name of each
    option found (``--name``, ``-k``).
    """
    allowed, valued = word_set(longs), word_set(long_values)
    operands: list[str] = []
    index = 0
    while index < len(args):
        token = args[index]
        index += 1
        if token in ends:
            operands.extend(args[index:])
            break
        if len(token) < 2 or token[0] != "-":
            operands.append(token)
        elif token[1] == "-":
            name, equals, _ = token.partition("=")
            if name not in allowed:
                return None
            if seen is not None:
                seen.append(name)
            if skip and not equals and name in valued:
                index += 1
        elif not (numbers and _is_number(token[1:])):
            for position in range(1, len(token)):
                letter = token[position]
                if letter not in flags and letter not in values and letter not in optional:
                    return None
                if seen is not None:
                    seen.append("-" + letter)
                if letter in values and skip and position == len(token) - 1:
                    index += 1
                if letter in values or letter in optional:
                    break
    return operands


def _is_number(text: str) -> bool:
    """``[0-9]+``: an option such as ``git log -5``."""
    return bool(text) and all(char in "0123456789" for char in text)


def _is_sed_print(script: str) -> bool:
    """``(?:\\d+|\\$)(?:,(?:\\d+|\\$))?p``: ``sed -n`` printing a line or a range."""
    addresses = script[:-1].split(",") if script.endswith("p") else []
    return 0 < len(addresses) <= 2 and all(
        address == "$" or address.isdecimal() for address in addresses
    )


def _sed_reads(argv: tuple[str, ...]) -> bool:
    return (
        len(argv) >= 3
        and argv[1] == "-n"
        and _is_sed_print(argv[2])
        and not any(arg.startswith("-") for arg in argv[3:])
    )


# ``find``: the primaries that take one word, and those that take none. Not here, so never
# read-only: ``-exec``, ``-execdir``, ``-ok``, ``-okdir``, ``-delete``, ``-fprint``,
# ``-fprint0``, ``-fprintf``, ``-fls`` and whatever a newer ``find`` adds.
# fmt: off
_FIND_WITH_VALUE = (
    "-name -iname -path -ipath -wholename -iwholename -regex -iregex -lname -ilname -type -xtype "
    "-size -mtime -mmin -atime -amin -ctime -cmin -newer -anewer -cnewer -used -perm -user -group "
    "-uid -gid -links -inum -samefile -fstype -maxdepth -mindepth -regextype -printf -context "
    "-files0-from -D"
)
_FIND_PLAIN = (
    "-print -print0 -ls -prune -quit -true -false -empty -nouser -nogroup -readable -writable "
    "-executable -depth -d -follow -xdev -mount -noleaf -ignore_readdir_race "
    "-noignore_readdir_race -daystart -warn -nowarn -not -a -and -o -or -H -L -P -help --help "
    "-version --version"
)
# fmt: on


def _find_reads(argv: tuple[str, ...]) -> bool:
    index = 1
    while index < len(argv):
        token = argv[index]
        index += 1
        if token in word_set(_FIND_WITH_VALUE) or (token.startswith("-newer") and len(token) == 8):
            index += 1  # ``-newerXY``; ``find`` takes the next word as the value, always
        elif (
            len(token) > 1
            and token[0] == "-"
            and token not in word_set(_FIND_PLAIN)
            and not (token.startswith("-O") and _is_number(token[2:]))
        ):
            return False
    return True


# fmt: off
_FD = (
    "HIusigFalLpq01hV", "dtEeScjo",
    (
        "--hidden --no-hidden --no-ignore --ignore --no-ignore-vcs --ignore-vcs --no-require-git "
        "--require-git --no-ignore-parent --unrestricted --case-sensitive --ignore-case --glob "
        "--regex --fixed-strings --and --absolute-path --relative-path --list-details --follow "
        "--no-follow --full-path --print0 --max-depth --min-depth --exact-depth --exclude --prune "
        "--type --extension --size --changed-within --changed-before --newer --older --owner "
        "--format --color --hyperlink --threads --max-results --quiet --show-errors "
        "--base-directory --path-separator --search-path --strip-cwd-prefix --one-file-system "
        "--ignore-file --no-global-ignore-file --help --version"
    ),
)
_SORT = (
    "bdfgiMhnRrVcCmsuz", "ktST",
    (
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
        "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort "
        "--random-source --reverse --sort --version-sort --batch-size --check --key --merge "
        "--stable --buffer-size --field-separator --temporary-directory --parallel --unique "
        "--zero-terminated --debug --files0-from --help --version"
    ),
)
_SORT_VALUES = (
    "--random-source --sort --batch-size --key --buffer-size --field-separator "
    "--temporary-directory --parallel --files0-from"
)
_TREE = (  # not ``-o FILE``, nor ``-R``, which writes an ``00Tree.html`` in each folder
    "adlfxiqNQpugshDFvtcUrCASnJX", "LPIHT",
    (
        "--help --version --inodes --device --noreport --nolinks --dirsfirst --filesfirst --du "
        "--si --prune --timefmt --sort --gitignore --gitfile --info --infofile --matchdirs "
        "--metafirst --ignore-case --fromfile --fromtabfile --fflinks --charset --filelimit "
        "--hintro --houtro"
    ),
)
_RG = (  # not ``--pre``, ``--pre-glob``, ``--hostname-bin`` nor ``-z``/``--search-zip``
    "abcFHhIiLlNnoPpqSsUuVvwx0", "ABCdEefgjMmrTt",
    (
        "--after-context --before-context --context --count --count-matches --case-sensitive "
        "--ignore-case --smart-case --color --colors --column --no-column --context-separator "
        "--no-context-separator --crlf --debug --trace --dfa-size-limit --regex-size-limit "
        "--encoding --engine --regexp --file --files --files-with-matches --files-without-match "
        "--fixed-strings --no-fixed-strings --follow --no-follow --glob --iglob "
        "--glob-case-insensitive --heading --no-heading --hidden --no-hidden --ignore-file "
        "--ignore-file-case-insensitive --include-zero --invert-match --json --line-buffered "
        "--block-buffered --line-number --no-line-number --line-regexp --max-columns "
        "--max-columns-preview --max-count --max-depth --maxdepth --max-filesize --mmap --no-mmap "
        "--multiline --multiline-dotall --no-config --no-ignore --no-ignore-dot "
        "--no-ignore-exclude --no-ignore-files --no-ignore-global --no-ignore-parent "
        "--no-ignore-vcs --no-require-git --no-messages --no-filename --with-filename --null "
        "--null-data --one-file-system --only-matching --passthru --passthrough --path-separator "
        "--pcre2 --no-pcre2 --pretty --quiet --replace --no-search-zip --sort --sortr --sort-files "
        "--stats --text --no-text --binary --no-binary --byte-offset --threads --trim --type "
        "--type-not --type-add --type-clear --type-list --unrestricted --vimgrep --word-regexp "
        "--field-context-separator --field-match-separator --help --version --pcre2-version "
        "--no-unicode --generate"
    ),
)
_LESS = (  # not ``-o``/``-O`` (a log file), ``-k`` (key bindings), ``-t``/``-T`` (tags)
    "aBcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX~", "bDhjpPxyz#",
    (
        "--help --version --LINE-NUMBERS --line-numbers --chop-long-lines --RAW-CONTROL-CHARS "
        "--raw-control-chars --no-init --quit-if-one-screen --quit-at-eof --QUIT-AT-EOF "
        "--ignore-case --IGNORE-CASE --no-lessopen --force --silent --quiet --QUIET "
        "--squeeze-blank-lines --tabs --pattern --prompt --long-prompt --LONG-PROMPT "
        "--status-column --hilite-unread --HILITE-UNREAD --hilite-search --HILITE-SEARCH "
        "--jump-target --shift --no-keypad --mouse --use-color --window --header --wordwrap --dumb "
        "--clear-screen --CLEAR-SCREEN"
    ),
)
_MORE = (
    "dlfpcsue", "n",
    (
        "--silent --logical --no-pause --print-over --clean-print --squeeze --plain --exit-on-eof "
        "--lines --help --version"
    ),
    True,
)
_FILE = (  # not ``-C`` (compiles a magic file), nor ``-z``/``-Z``, which run decompressors
    "bcdEhiIklLnNprsSv0", "efFmP",
    (
        "--apple --extension --mime-encoding --mime-type --brief --checking-printout --debug "
        "--exclude --exclude-quiet --files-from --separator --no-dereference --mime --keep-going "
        "--list --dereference --magic-file --no-buffer --no-pad --print0 --preserve-date "
        "--parameter --raw --special-files --no-sandbox --help --version"
    ),
)
_FILE_VALUES = "--exclude --exclude-quiet --files-from --separator --magic-file --parameter"
_DATE = (  # not ``-s``/``--set``
    "uR", "dfr",
    (
        "--date --file --iso-8601 --rfc-email --rfc-3339 --reference --utc --universal --debug "
        "--resolution --help --version"
    ),
)
_DATE_VALUES = "--date --file --reference --rfc-3339"
# fmt: on


def _fd_reads(argv: tuple[str, ...]) -> bool:
    return listed_operands(argv[1:], *_FD) is not None


def _sort_reads(argv: tuple[str, ...]) -> bool:
    return listed_operands(argv[1:], *_SORT, long_values=_SORT_VALUES, skip=True) is not None


def _tree_reads(argv: tuple[str, ...]) -> bool:
    return listed_operands(argv[1:], *_TREE) is not None


def _rg_reads(argv: tuple[str, ...]) -> bool:
    return listed_operands(argv[1:], *_RG) is not None


def _ag_reads(argv: tuple[str, ...]) -> bool:
    """``ag`` has an option for each file type (``--python``…), so its list would never
    be whole; its one option that starts a program is ``--pager``, which getopt also
    takes abbreviated."""
    for arg in argv[1:]:
        if arg == "--":
            return True
        name = arg.partition("=")[0]
        if len(name) > 3 and "--pager".startswith(name):
            return False
    return True


def _less_reads(argv: tuple[str, ...]) -> bool:
    """Without a terminal ``less`` copies its files out, as ``cat`` does; its commands
    (``!``, ``|``, ``s``, ``v``) need keys typed into it, except those given as ``+cmd``."""
    operands = listed_operands(argv[1:], *_LESS)
    return operands is not None and not any(word.startswith("+") for word in operands)


def _more_reads(argv: tuple[str, ...]) -> bool:
    operands = listed_operands(argv[1:], *_MORE)
    return operands is not None and all(
        word[:1] != "+" or word[1:2] == "/" or _is_number(word[1:]) for word in operands
    )


def _file_reads(argv: tuple[str, ...]) -> bool:
    return listed_operands(argv[1:], *_FILE, long_values=_FILE_VALUES, skip=True) is not None


def _date_reads(argv: tuple[str, ...]) -> bool:
    """``date -d …`` and ``date +FORMAT`` read; ``-s`` and a bare date operand set the clock."""
    operands = listed_operands(argv[1:], *_DATE, optional="I", long_values=_DATE_VALUES, skip=True)
    return operands is not None and all(word.startswith("+") for word in operands)


def _printf_reads(argv: tuple[str, ...]) -> bool:
    """``printf -v NAME`` sets a shell variable, which may be one a later program reads."""
    return not argv[1:2] or not argv[1].startswith("-v")


def _uniq_reads(argv: tuple[str, ...]) -> bool:
    """``uniq IN OUT`` writes OUT."""
    operands, _ = split_operands(
        argv[1:], "fsw", frozenset({"--skip-fields", "--skip-chars", "--check-chars"})
    )
    return len(operands) <= 1


# Each program's judge of its arguments (the whole argv); Git's is in ``shell_git_reads``.
# ``_OPTION_READERS`` in ``shell_effects`` names the same programs.
_JUDGES: dict[str, Callable[[tuple[str, ...]], bool]] = {
    "find": _find_reads,
    "fd": _fd_reads,
    "sort": _sort_reads,
    "tree": _tree_reads,
    "uniq": _uniq_reads,
    "sed": _sed_reads,
    "rg": _rg_reads,
    "ag": _ag_reads,
    "less": _less_reads,
    "more": _more_reads,
    "file": _file_reads,
    "date": _date_reads,
    "printf": _printf_reads,
}
