"""Which ``git`` command lines only read, for ``shell_readers`` (docs/hooks.md).

Git reads in most of its everyday forms, but many reading subcommands also have options
that write or start a program (``git diff --output=FILE``, ``--ext-diff``, ``git grep
-O<pager>``), and Git's own options before the subcommand can choose any setting (``-c
core.pager=…``). So Git's options before the subcommand, and each reading subcommand's
options, come from lists of those known to only read; ``branch`` and ``tag`` only list,
``config`` only gets, and ``stash``, ``reflog``, ``remote`` and ``worktree`` only in the
forms named below. Any other subcommand or option makes the command mutating.

``shell_readers`` imports this module only for ``git``: its lists are as long as all the
others together, and a hook call for ``find`` or ``rg`` need not load them.
"""

from __future__ import annotations

from ithaca.kernel.shell_readers import listed_operands, word_set

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    # Short options without a value, short options with one, long options, ``-5``.
    _Spec = tuple[str, str, str, bool]


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


# Git's own options before the subcommand. Not here: ``-c`` and ``--config-env`` (any
# setting, ``core.pager`` and ``core.fsmonitor`` among them), ``--exec-path=DIR``,
# ``-p``/``--paginate``, and ``--git-dir``/``--work-tree`` (another repository, whose
# settings name the programs its status and diff run).
_GIT_GLOBAL_VALUES = frozenset({"-C", "--namespace"})
# fmt: off
_GIT_GLOBAL_FLAGS = (
    "--no-pager -P --bare --no-replace-objects --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-advice --no-lazy-fetch "
    "--version --exec-path --html-path --man-path --info-path"
)
# The options of the reading subcommands, each list of those known to only read. Not
# in any: ``--output`` (writes the diff to a file), ``--ext-diff`` and ``--textconv`` (run
# the programs settings name), ``--show-signature`` (runs gpg), ``-O`` (an order file in
# a diff, a pager in ``git grep``) and ``--open-files-in-pager``.
_GIT_DIFF_LONGS = (
    "--patch --no-patch --unified --raw --patch-with-raw --indent-heuristic --no-indent-heuristic "
    "--minimal --patience --histogram --anchored --diff-algorithm --stat --stat-width "
    "--stat-name-width --stat-graph-width --stat-count --compact-summary --numstat --shortstat "
    "--dirstat --cumulative --dirstat-by-file --summary --patch-with-stat --name-only "
    "--name-status --submodule --color --no-color --color-moved --no-color-moved --color-moved-ws "
    "--no-color-moved-ws --word-diff --word-diff-regex --color-words --renames --no-renames "
    "--rename-empty --no-rename-empty --check --ws-error-highlight --full-index --binary --abbrev "
    "--no-abbrev --break-rewrites --find-renames --find-copies --find-copies-harder "
    "--irreversible-delete --diff-filter --find-object --pickaxe-all --pickaxe-regex --skip-to "
    "--rotate-to --relative --no-relative --text --ignore-cr-at-eol --ignore-space-at-eol "
    "--ignore-space-change --ignore-all-space --ignore-blank-lines --ignore-matching-lines "
    "--inter-hunk-context --function-context --exit-code --quiet --no-ext-diff --no-textconv "
    "--ignore-submodules --src-prefix --dst-prefix --no-prefix --default-prefix --line-prefix "
    "--ita-invisible-in-index --ita-visible-in-index --combined-all-paths --cc --dd --diff-merges "
    "--no-diff-merges --remerge-diff"
)
_GIT_REVISION_LONGS = (
    "--max-count --skip --since --after --since-as-filter --until --before --author --committer "
    "--grep-reflog --grep --all-match --invert-grep --regexp-ignore-case --basic-regexp "
    "--extended-regexp --fixed-strings --perl-regexp --remove-empty --merges --no-merges "
    "--min-parents --max-parents --no-min-parents --no-max-parents --first-parent "
    "--exclude-first-parent-only --not --all --branches --tags --remotes --glob --exclude "
    "--exclude-hidden --reflog --alternate-refs --single-worktree --ignore-missing --bisect "
    "--stdin --cherry-mark --cherry-pick --left-only --right-only --cherry --walk-reflogs --merge "
    "--boundary --simplify-by-decoration --show-pulls --full-history --dense --sparse "
    "--simplify-merges --ancestry-path --date-order --author-date-order --topo-order --reverse "
    "--no-walk --do-walk --pretty --format --abbrev-commit --no-abbrev-commit --oneline --encoding "
    "--expand-tabs --no-expand-tabs --notes --no-notes --show-notes --show-notes-by-default "
    "--relative-date --date --parents --children --left-right --graph --show-linear-break "
    "--decorate --no-decorate --decorate-refs --decorate-refs-exclude --source --clear-decorations "
    "--use-mailmap --no-use-mailmap --mailmap --no-mailmap --full-diff --log-size --follow "
    "--no-follow --count --max-age --min-age --objects --objects-edge --timestamp --header "
    "--object-names --no-object-names --in-commit-order --missing --filter --disk-usage "
    "--indexed-objects --bisect-all --bisect-vars --null"
)
_GIT_DIFF_FLAGS, _GIT_DIFF_VALUES = "pusRabwWDztmcr", "UBMClSGIX"
_GIT_LOG = (
    _GIT_DIFF_FLAGS + "iEFPg", _GIT_DIFF_VALUES + "nL",
    _GIT_DIFF_LONGS + " " + _GIT_REVISION_LONGS, True,
)
_GIT_DIFF = (
    _GIT_DIFF_FLAGS, _GIT_DIFF_VALUES,
    _GIT_DIFF_LONGS + " --cached --staged --merge-base --no-index --base --ours --theirs",
    True,
)
_GIT_READ_ONLY: dict[str, _Spec] = {
    "log": _GIT_LOG,
    "show": _GIT_LOG,
    "rev-list": _GIT_LOG,
    "diff": _GIT_DIFF,
    "shortlog": (
        "nseciEFPg", "w",
        _GIT_REVISION_LONGS + " --numbered --summary --email --group --committer",
        True,
    ),
    "status": (
        "sbvz", "u",
        (
            "--short --branch --show-stash --porcelain --long --verbose --untracked-files "
            "--ignore-submodules --ignored --column --no-column --ahead-behind --no-ahead-behind "
            "--renames --no-renames --find-renames --null"
        ),
        False,
    ),
    "blame": (
        "bltpcfnsewh", "LSMC",
        (
            "--root --show-stats --reverse --first-parent --porcelain --line-porcelain "
            "--incremental --encoding --contents --date --progress --no-progress --ignore-rev "
            "--ignore-revs-file --color-lines --color-by-age --minimal --score-debug --show-name "
            "--show-number --show-email --abbrev --since"
        ),
        False,
    ),
    "grep": (
        "aiIrwvhHEGPFnlLzocpWq", "ABCefm",
        (
            "--cached --untracked --no-index --index --exclude-standard --no-exclude-standard "
            "--recurse-submodules --no-recurse-submodules --text --no-textconv --ignore-case "
            "--max-depth --recursive --no-recursive --word-regexp --invert-match --full-name "
            "--extended-regexp --basic-regexp --perl-regexp --fixed-strings --line-number "
            "--no-line-number --column --files-with-matches --name-only --files-without-match "
            "--null --only-matching --count --color --no-color --break --heading --show-function "
            "--after-context --before-context --context --function-context --max-count --threads "
            "--and --or --not --quiet --all-match"
        ),
        True,
    ),
    "ls-files": (
        "cdmoiskuftvz", "xX",
        (
            "--cached --deleted --modified --others --ignored --stage --killed --unmerged "
            "--directory --no-empty-directory --eol --deduplicate --exclude --exclude-from "
            "--exclude-per-directory --exclude-standard --error-unmatch --with-tree --full-name "
            "--recurse-submodules --abbrev --debug --sparse --format --resolve-undo"
        ),
        False,
    ),
    "ls-tree": (
        "drtlz", "",
        (
            "--long --name-only --name-status --object-only --full-name --full-tree --abbrev "
            "--format"
        ),
        False,
    ),
    "rev-parse": (
        "q", "",
        (
            "--parseopt --sq-quote --keep-dashdash --stop-at-non-option --stuck-long --revs-only "
            "--no-revs --flags --no-flags --default --prefix --verify --quiet --sq --short --not "
            "--abbrev-ref --symbolic --symbolic-full-name --output-object-format --all --branches "
            "--tags --remotes --glob --exclude --exclude-hidden --disambiguate --local-env-vars "
            "--path-format --git-dir --git-common-dir --resolve-git-dir --git-path --show-toplevel "
            "--show-superproject-working-tree --shared-index-path --absolute-git-dir "
            "--is-inside-git-dir --is-inside-work-tree --is-bare-repository "
            "--is-shallow-repository --show-cdup --show-prefix --show-object-format "
            "--show-ref-format --since --after --until --before"
        ),
        False,
    ),
    "describe": (
        "", "",
        (
            "--dirty --broken --all --tags --contains --abbrev --candidates --exact-match --debug "
            "--long --match --exclude --always --first-parent"
        ),
        False,
    ),
    "cat-file": (
        "tsepzZ", "",
        (
            "--batch --batch-check --batch-command --batch-all-objects --buffer --follow-symlinks "
            "--unordered --allow-unknown-type --use-mailmap --no-use-mailmap --mailmap "
            "--no-mailmap --path"
        ),
        False,
    ),
    "show-ref": (
        "dsq", "",
        (
            "--head --branches --heads --tags --dereference --hash --verify --abbrev --quiet "
            "--exclude-existing --exists"
        ),
        False,
    ),
    "merge-base": (
        "a", "",
        "--all --octopus --independent --is-ancestor --fork-point",
        False,
    ),
    "version": ("", "", "--build-options", False),
}
_GIT_CONFIG_LONGS = (
    "--get --get-all --get-regexp --get-urlmatch --get-color --get-colorbool --list --global "
    "--system --local --worktree --file --blob --type --bool --int --bool-or-int --path "
    "--expiry-date --no-type --null --name-only --show-origin --show-scope --includes "
    "--no-includes --default --fixed-value --all --regexp --value --url --show-names"
)
_GIT_CONFIG_VALUES = "--file --blob --type --default --url --value"
_GIT_CONFIG_READS = frozenset({
    "--get", "--get-all", "--get-regexp", "--get-urlmatch", "--get-color", "--get-colorbool",
    "--list", "-l",
})
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
# fmt: on
_GIT_ENDS = ("--", "--end-of-options")


def git_reads(argv: tuple[str, ...]) -> bool:
    """Whether ``argv`` (``git …``, the whole argv) only reads."""
    index = 1
    while index < len(argv):
        token = argv[index]
        if not token.startswith("-"):
            break
        name, equals, _ = token.partition("=")
        if token in _GIT_GLOBAL_VALUES:
            index += 2
        elif token in word_set(_GIT_GLOBAL_FLAGS) or (equals and name in _GIT_GLOBAL_VALUES):
            index += 1
        else:
            return False
    else:
        return True  # no subcommand: Git prints its usage, version or a path
    subcommand, args = argv[index], argv[index + 1 :]
    spec = _GIT_READ_ONLY.get(subcommand)
    if spec is not None:
        return listed_operands(args, *spec, ends=_GIT_ENDS) is not None
    if subcommand in _GIT_LISTING:
        return _git_listing(args, *_GIT_LISTING[subcommand])
    if subcommand == "stash":
        spec = {"list": _GIT_LOG, "show": _GIT_DIFF}.get(args[0] if args else "")
        return spec is not None and listed_operands(args[1:], *spec, ends=_GIT_ENDS) is not None
    if subcommand == "reflog":
        named = args[:1] in (("show",), ("list",), ("exists",))
        rest = args[1:] if named else args
        if not named and rest and not rest[0].startswith("-"):
            return False  # ``expire``, ``delete``, ``drop``, or a word Git may take for one
        return listed_operands(rest, *_GIT_LOG, ends=_GIT_ENDS) is not None
    if subcommand == "remote":
        return args[:1] == ("get-url",) or all(arg in ("-v", "--verbose") for arg in args)
    if subcommand == "config":
        # Without a reading action (``--get``…, ``--list``, or Git 2.46's ``get`` and
        # ``list``), ``git config NAME VALUE`` sets; a value option's word is skipped, so
        # ``--file --get`` names a file and is no action.
        seen: list[str] = []
        operands = listed_operands(
            args, "lz", "f", _GIT_CONFIG_LONGS, ends=_GIT_ENDS, seen=seen,
            long_values=_GIT_CONFIG_VALUES, skip=True,
        )  # fmt: skip
        return operands is not None and (
            not _GIT_CONFIG_READS.isdisjoint(seen) or operands[:1] in (["get"], ["list"])
        )
    if subcommand == "worktree":
        return args[:1] == ("list",) and (
            listed_operands(args[1:], "vz", "", "--porcelain --verbose --expire") is not None
        )
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
            if not equals and name in _GIT_LISTING_VALUES and index < len(args):
                # ``--sort KEY`` takes the next word whatever it is; ``--contains`` and
                # the like take it only when it is no option.
                required = name in ("--sort", "--format", "--points-at")
                if required or not args[index].startswith("-"):
                    index += 1
        elif token.startswith("-"):
            if not short(token):
                return False
            listing = listing or "l" in token
        else:
            has_operands = True
    return listing or not has_operands
