"""Which shell lines count as only reading, where a read-only program has options that write
files or start programs (issue 24, item 4).

A line judged read-only runs during a lockdown and never arms the end-of-turn critic, so
each program on the read-only list is read-only only in the forms known to read: its
options come from a list of those that only read, and any other option, like any program
not on the list, makes the line mutating.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import shell_effects, shell_git_reads, shell_readers
from ithaca.kernel.shell_effects import is_read_only
from ithaca.kernel.shell_parse import parse

# What agents run to look around; none of it may turn mutating.
EVERYDAY_READS = [
    "git status",
    "git status -sb",
    "git status --porcelain=v1 --untracked-files=no",
    "git log --oneline -n 5",
    "git log -5 --format='%h %s' --since=2.weeks --author=ann",
    "git log -p --follow -- src/app.py",
    "git log --graph --decorate --all --oneline",
    "git -C sub --no-pager log --oneline -5",
    "git diff HEAD~1 -- path",
    "git diff --cached --stat",
    "git diff --name-only main...HEAD",
    "git diff -U5 --word-diff HEAD",
    "git show --stat HEAD",
    "git show HEAD:src/app.py",
    "git grep -n parse -- '*.py'",
    "git grep -c -e foo -e bar",
    "git grep -3 -i TODO",
    "git blame -L 10,20 src/app.py",
    "git rev-parse --abbrev-ref HEAD",
    "git rev-parse --show-toplevel",
    "git ls-files -m",
    "git ls-tree -r --name-only HEAD",
    "git describe --tags --always",
    "git cat-file -p HEAD",
    "git shortlog -sn",
    "git merge-base HEAD main",
    "git rev-list --count HEAD",
    "git show-ref --heads",
    "git stash list --oneline",
    "git stash show -p stash@{0}",
    "git reflog -n 10",
    "git reflog show --date=iso main",
    "git config --get remote.origin.url",
    "git config --list --show-origin",
    "git config --file .gitmodules --get-regexp path",
    "git config get user.name",
    "git branch --sort=-committerdate --format='%(refname:short)'",
    "git worktree list --porcelain",
    "git --version",
    "/usr/bin/git status",
    "ls -la",
    "cat README.md",
    "head -n 20 src/app.py",
    "tail -f log.txt",
    "wc -l src/*.py",
    "grep -rn parse src",
    "rg -n pattern",
    "rg -tpy -C3 --hidden -g '!*.lock' parse src",
    "rg --files | rg test",
    "find . -name '*.py'",
    "find . -mtime -7 -type f -size +1k -print0",
    "find src -maxdepth 2 -newermt 2024-01-01 -not -path '*/.git/*'",
    "fd -e py -t f src",
    "sed -n 1,20p file",
    "sort -k 2 -t , data.csv",
    "tree -L 2 -I node_modules",
    "less README.md",
    "more +10 README.md",
    "file -b --mime-type logo.png",
    "date +%s",
    "date -d '-1 day' +%F",
    "printf '%s\\n' a b",
    "jq .name package.json",
    "GIT_PAGER=cat git log -3",
    "PAGER= git log -3",
    "LC_ALL=C sort data.txt",
    "NO_COLOR=1 COLUMNS=200 ls",
    'f=src/app.py; grep -n parse "$f"',
    'FILE=src/app.py; wc -l "$FILE"',
    "timeout 10 git log -1",
    "env LANG=C git status",
    "find . -name '*.py' | xargs grep -n parse",
    "git ls-files | xargs -n 50 wc -l",
    "find . -name '*.md' -print0 | xargs -0 -I{} head -n 1 {}",
]


@pytest.mark.parametrize("line", EVERYDAY_READS)
def test_everyday_reads_stay_read_only(line):
    assert is_read_only(parse(line)), parse(line)


# Each line writes a file or starts a program of the agent's choosing through an option,
# a setting or a wrapper of a program that is read-only in its other forms.
WRITERS_AND_RUNNERS = [
    # another repository, whose own settings name what its status and diff run
    "GIT_DIR=/tmp/made/.git git status",
    "GIT_WORK_TREE=/tmp/made git diff",
    "git --git-dir=/tmp/made/.git log -p",
    "git --work-tree /tmp/made status",
    # git grep opens the matching files in a pager of its choosing, as getopt abbreviates too
    "git grep -O'sh -c \"touch pwned\"' parse",
    "git grep -Ovim parse",
    "git grep -n -O parse",
    "git grep --open-files-in-pager=vim parse",
    "git grep --open-files=vim parse",
    "git grep parse -O'sh -c x'",
    # diffs written to a file, or made by the programs settings name
    "git log --output=patch.diff -p",
    "git log --outp=patch.diff -p",
    "git show --output patch.diff",
    "git diff --output=patch.diff",
    "git diff --ext-diff",
    "git log -p --textconv",
    "git log --show-signature",
    "git stash show --output=x",
    "git reflog --output=x",
    # Git's own options that choose programs or settings
    "git -c core.pager='sh -c x' log",
    "git -c color.ui=never status",
    "git --config-env=core.pager=X log",
    "git --exec-path=/tmp/bin log",
    "git -p log",
    "git --paginate log",
    # a reading word that is the value of an option before it
    "git config --file --get user.name x",
    "git config -f --list x y",
    "git branch --sort -l new-branch",
    # settings handed to a read-only program through its environment
    "GIT_PAGER='sh -c x' git -p log",
    "PAGER=less git log",
    "GIT_EXTERNAL_DIFF=./x git diff",
    "GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0=x git log",
    "GIT_CONFIG_GLOBAL=./evil.cfg git log",
    "HOME=. git log",
    "LESSOPEN='|sh -c x %s' less README.md",
    "LESS=+!x less README.md",
    "RIPGREP_CONFIG_PATH=./rg.cfg rg parse",
    "PATH=./bin ls",
    "env GIT_PAGER='sh -c x' git -p log",
    "PATH=./bin:$PATH; ls",
    "GIT_PAGER=x; git log",
    "LD_PRELOAD=./x.so; cat x",
    "printf -v PATH %s ./bin",
    # find's actions
    "find . -delete",
    "find . -exec rm {} ;",
    "find . -execdir cat {} +",
    "find . -ok rm {} ;",
    "find . -okdir rm {} ;",
    "find . -fprint out.txt",
    "find . -fprint0 out.txt",
    "find . -fprintf out.txt %p",
    "find . -fls out.txt",
    # sed, awk and scripting languages
    "sed -i 's/a/b/' x",
    "sed --in-place 's/a/b/' x",
    "sed -n '1w out.txt' x",
    "sed -n '1e rm x' x",
    "sed 's/a/b/w out.txt' x",
    "awk '{ system(\"rm x\") }' x",
    "awk '{ print > \"out.txt\" }' x",
    "awk '{ print | \"sh\" }' x",
    "perl -i -pe 's/a/b/' x",
    "perl -e 'unlink q(x)'",
    "python -c 'print(1)'",
    "python3 -c 'import os'",
    # output files and helper programs of sorting, listing, searching and paging
    "sort -o out.txt in.txt",
    "sort --output=out.txt in.txt",
    "sort --compress-program=sh in.txt",
    "sort --comp=sh in.txt",
    "tree -o out.txt",
    "tree -R -H . -L 1",
    "rg --pre sh parse",
    "rg --pre=./x --pre-glob '*.py' parse",
    "rg -z parse",
    "rg --search-zip parse",
    "rg --hostname-bin=./x parse",
    "ag --pager=sh parse",
    "ag --page sh parse",
    "less -o log.txt README.md",
    "less -Olog.txt README.md",
    "less --log-file=log.txt README.md",
    "less '+!rm x' README.md",
    "less -k keys README.md",
    "less -t main",
    "more '+!rm x' README.md",
    "man ls",
    "file -C -m magic",
    "file -z archive.gz",
    "date -s 2020-01-01",
    "date --set=2020-01-01",
    "date 0101000025",
    "uniq in.txt out.txt",
    "fd -x rm",
    "fd --exec-batch rm",
    # programs that write or fetch
    "tee out.txt",
    "ls | tee out.txt",
    "tar xf a.tar",
    "tar cf a.tar src",
    "curl -o page.html https://example.com",
    "curl https://example.com",
    "wget https://example.com",
    "yq -i '.a = 1' x.yaml",
    # xargs runs what its input names, or a program whose options it feeds
    "ls | xargs rm",
    "ls | xargs git log",
    "ls | xargs rg parse",
    "ls | xargs sort",
    "ls | xargs env",
    "ls | xargs -I cat cat x",
    "ls | xargs -I{} {}",
    "ls | xargs -i cat {}",
    "ls | xargs --replace cat {}",
    "ls | xargs sh -c 'cat \"$@\"' sh",
    "ls | xargs ./cat",
    # wrappers are judged by what they run
    "env git grep -O'sh -c x' parse",
    "timeout 5 git grep -Ox parse",
    "nice -n 5 git log --output=x",
    "command git grep -Ox parse",
    "nohup sort -o out.txt in.txt",
    "stdbuf -oL git grep -Ox parse",
    "time -o t.txt ls",
]


@pytest.mark.parametrize("line", WRITERS_AND_RUNNERS)
def test_options_and_settings_that_write_or_run_programs_make_a_line_mutating(line):
    assert not is_read_only(parse(line)), parse(line)


UNKNOWN = [
    "git log --frobnicate",
    "git status --frobnicate",
    "git grep -Z parse",
    "git diff -O order.txt",
    "git notes list",
    "git reflog main",
    "git reflog expire --all",
    "rg --frobnicate parse",
    "find . -frobnicate",
    "sort --frobnicate x",
    "tree --frobnicate",
    "less --frobnicate x",
    "date --frobnicate",
    "fd --frobnicate",
    "mytool --help",
    "./cat README.md",
    "bin/grep -n x",
    "/tmp/tools/git status",
    "/ls",
]


@pytest.mark.parametrize("line", UNKNOWN)
def test_a_program_or_option_ithaca_does_not_know_is_mutating(line):
    assert not is_read_only(parse(line)), parse(line)


def test_the_configured_read_only_commands_are_still_taken_with_any_option():
    """``[ulysses] read_only_commands`` is the team's word for a program, whatever its options."""
    assert is_read_only(parse("make -j4 check"), extra_read_only=("make",))
    assert is_read_only(parse("FOO=1 ./tools/lint --all"), extra_read_only=("lint",))


LOG_OPTIONS = set(
    f"{shell_git_reads._GIT_DIFF_LONGS} {shell_git_reads._GIT_REVISION_LONGS}".split()
)


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=16))
def test_a_long_option_off_the_list_makes_git_log_mutating(name):
    option = f"--{name}"
    listed = option in LOG_OPTIONS or option == "--end-of-options"
    assert is_read_only(parse(f"git log {option}")) is listed


@given(st.sampled_from(sorted(LOG_OPTIONS)), st.text(alphabet="abc=./ ", max_size=8))
def test_a_listed_option_reads_whatever_its_value(option, value):
    assert is_read_only(parse(f"git log '{option}={value}' -- src"))


def test_every_program_judged_by_its_options_has_a_judge():
    assert {*shell_readers._JUDGES, "git"} == shell_effects._OPTION_READERS


@pytest.mark.parametrize(
    ("line", "lists"),
    [
        ("cat a | ls -la | nice wc -l", []),
        ("find . -name '*.py'", ["shell_readers"]),
        ("git status", ["shell_git_reads", "shell_readers"]),
    ],
)
def test_the_option_lists_load_only_for_a_program_that_has_one(line, lists):
    """Every module costs a hook call its import; ``cat`` and ``ls`` need no list."""
    probe = (
        "import sys\n"
        "from ithaca.kernel.shell_effects import is_read_only\n"
        "from ithaca.kernel.shell_parse import parse\n"
        f"assert is_read_only(parse({line!r}))\n"
        "lists = ('shell_git_reads', 'shell_readers')\n"
        "print(*[name for name in lists if f'ithaca.kernel.{name}' in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.split() == lists
