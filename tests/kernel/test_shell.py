import re
import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import shell_commands, shell_effects, shell_git_reads, shell_parse, shell_readers
from ithaca.kernel.shell_commands import ithaca_invocation
from ithaca.kernel.shell_effects import is_read_only, write_targets
from ithaca.kernel.shell_parse import MAX_DEPTH, parse


def argvs(command: str) -> list[tuple[str, ...]]:
    return [item.argv for item in parse(command).commands]


# ---- splitting, assignments, wrappers -----------------------------------------------------


@pytest.mark.parametrize("separator", [";", "&&", "||", "|", "&", "\n", "|&"])
def test_a_line_splits_into_simple_commands_on_every_separator(separator):
    assert argvs(f"ls -la {separator} rm -f x") == [("ls", "-la"), ("rm", "-f", "x")]


def test_leading_assignments_are_kept_apart_from_argv():
    (command,) = parse("FOO=1 BAR='a b' ls src").commands
    assert command.argv == ("ls", "src")
    assert command.assignments == ("FOO=1", "BAR=a b")


def test_a_quoted_assignment_is_a_program_name_not_an_assignment():
    (command,) = parse("'FOO=1' ls").commands
    assert command.argv == ("FOO=1", "ls")


@pytest.mark.parametrize(
    "line",
    [
        "timeout 5 rm x",
        "timeout -s KILL --kill-after=3 5 rm x",
        "nice -n 5 rm x",
        "nice -10 rm x",
        "env -i A=b rm x",
        "env -u HOME rm x",
        "env -S 'rm x'",
        "stdbuf -oL rm x",
        "stdbuf -o L -e 0 rm x",
        "sudo -u root rm x",
        "sudo -E A=b rm x",
        "doas -u root rm x",
        "command rm x",
        "builtin rm x",
        "exec -a name rm x",
        "nohup rm x",
        "setsid -f rm x",
        "time -p rm x",
        "/usr/bin/env rm x",
        "sudo nice -n 5 env A=b timeout 5 rm x",
    ],
)
def test_wrappers_and_their_options_are_stripped(line):
    assert argvs(line)[-1] == ("rm", "x")


def test_xargs_is_stripped_down_to_the_command_it_runs():
    assert argvs("find . -name '*.o' | xargs -n 1 -I{} rm {}") == [
        ("find", ".", "-name", "*.o"),
        ("rm", "{}"),
    ]


def test_env_assignments_join_the_command_assignments():
    (command,) = parse("X=1 env -i UPDATE_SNAPSHOTS=1 pytest").commands
    assert command.assignments == ("X=1", "UPDATE_SNAPSHOTS=1")


def test_a_wrapper_alone_stays_as_written_and_is_read_only():
    parsed = parse("nice -n 5")
    assert argvs("nice -n 5") == [("nice", "-n", "5")]
    assert is_read_only(parsed)


def test_command_v_is_a_lookup_not_a_run_of_the_named_program():
    assert argvs("command -v rm") == [("command", "-v", "rm")]
    assert is_read_only(parse("command -v rm"))


# ---- recursion --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "bash -c 'rm -rf build'",
        "sh -c 'rm -rf build'",
        "bash -lc 'rm -rf build'",
        "zsh -o errexit -c 'rm -rf build'",
        "dash -c 'rm -rf build' name arg",
        "ksh -c 'rm -rf build'",
        "eval 'rm -rf build'",
        "eval rm -rf build",
        "echo $(rm -rf build)",
        'echo "$(rm -rf build)"',
        "echo `rm -rf build`",
        "diff <(rm -rf build) b",
        "tee >(rm -rf build) < a",
        "X=$(rm -rf build) ls",
    ],
)
def test_nested_bodies_are_parsed_into_their_own_commands_and_make_the_line_opaque(line):
    parsed = parse(line)
    assert ("rm", "-rf", "build") in [item.argv for item in parsed.commands]
    assert parsed.opaque
    assert not is_read_only(parsed)
    assert "build" in write_targets(parsed)


@pytest.mark.parametrize(
    "template",
    ["bash -c {}", "eval {}"],
)
def test_nesting_up_to_the_limit_parses_and_one_more_level_is_unparseable(template):
    command = "rm x"
    for _ in range(MAX_DEPTH):
        command = template.format(shlex.quote(command))
    assert ("rm", "x") in argvs(command)
    deeper = parse(template.format(shlex.quote(command)))
    assert deeper.unparseable
    assert "deeper" in deeper.reason


def test_command_substitution_nesting_is_limited_the_same_way():
    command = "rm x"
    for _ in range(MAX_DEPTH):
        command = f"echo $({command})"
    assert ("rm", "x") in argvs(command)
    assert parse(f"echo $({command})").unparseable


def test_subshell_parentheses_split_commands_and_are_opaque():
    parsed = parse("(cd sub && ls) ; pwd")
    assert [item.argv for item in parsed.commands] == [("cd", "sub"), ("ls",), ("pwd",)]
    assert parsed.opaque


def test_arithmetic_and_parameter_expansion_are_not_command_substitution():
    parsed = parse("echo $((1 + 2)) ${HOME:-/root}")
    assert not parsed.opaque
    assert is_read_only(parsed)


def test_single_quoted_substitution_syntax_is_plain_data():
    parsed = parse("grep '$(rm x)' notes.txt")
    assert [item.argv for item in parsed.commands] == [("grep", "$(rm x)", "notes.txt")]
    assert is_read_only(parsed)


# ---- unparseable ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "echo 'unterminated",
        'echo "unterminated',
        "echo `unterminated",
        "echo $(unterminated",
        "ls )",
        "(ls",
        "$CMD --force",
        '"$CMD" --force',
        "`which rm` -rf x",
        "$(which rm) -rf x",
        "ls >",
        "echo ${unterminated",
    ],
)
def test_lines_the_parser_cannot_follow_are_unparseable_and_never_read_only(line):
    parsed = parse(line)
    assert parsed.unparseable
    assert parsed.reason
    assert parsed.commands == ()
    assert not is_read_only(parsed)


# ---- heredocs, comments, continuation ---------------------------------------------------


def test_heredoc_bodies_are_skipped_even_when_they_look_like_commands():
    line = "cat <<EOF > notes.md\nit's $(rm -rf /) `boom` (\nEOF\nls"
    parsed = parse(line)
    assert [item.argv for item in parsed.commands] == [("cat",), ("ls",)]
    assert write_targets(parsed) == ("notes.md",)
    assert not parsed.opaque


def test_tab_stripped_and_quoted_heredoc_delimiters_end_the_body():
    line = "cat <<-'END' | grep x\n\tbody 'unbalanced\n\tEND\nwc -l"
    assert argvs(line) == [("cat",), ("grep", "x"), ("wc", "-l")]


def test_a_comment_hides_the_rest_of_its_line_only():
    assert argvs("echo a#b # ; rm x\nls") == [("echo", "a#b"), ("ls",)]


def test_a_backslash_newline_continues_the_command():
    assert argvs("ls \\\n  -la") == [("ls", "-la")]


def test_shell_keywords_around_commands_are_not_programs():
    line = 'for f in *.py; do cat "$f"; done; if [ -f x ]; then head x; else pwd; fi'
    assert argvs(line) == [
        ("cat", "$f"),
        ("[", "-f", "x", "]"),
        ("head", "x"),
        ("pwd",),
    ]


# ---- redirections -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "redirects"),
    [
        ("ls > out.txt", ("out.txt",)),
        ("ls >> out.txt", ("out.txt",)),
        ("ls >| out.txt", ("out.txt",)),
        ("ls &> out.txt", ("out.txt",)),
        ("ls &>> out.txt", ("out.txt",)),
        ("cat <> out.txt", ("out.txt",)),
        ("ls 2> err.txt", ("err.txt",)),
        ("ls 1>out.txt", ("out.txt",)),
        ("ls >&out.txt", ("out.txt",)),
        (">out.txt ls", ("out.txt",)),
        ("ls > /dev/null", ()),
        ("ls 2>/dev/null", ()),
        ("ls &>/dev/null", ()),
        ("ls 2>&1", ()),
        ("ls >&2", ()),
        ("ls 3>&-", ()),
        ("wc -l < in.txt", ()),
        ("grep x <<< 'text'", ()),
    ],
)
def test_output_redirections_are_targets_except_dev_null_and_fd_duplication(line, redirects):
    (command,) = parse(line).commands
    assert command.redirects == redirects
    assert is_read_only(parse(line)) == (redirects == ())


def test_a_digit_separated_from_the_operator_is_an_argument_not_a_descriptor():
    (command,) = parse("echo 2 > out.txt").commands
    assert command.argv == ("echo", "2")
    assert command.redirects == ("out.txt",)


# ---- write targets ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "targets"),
    [
        ("ls | tee -a log1 log2", ("log1", "log2")),
        ("cp -r a b dest/", ("dest/",)),
        ("cp -t dest a b", ("dest",)),
        ("mv --target-directory=dest a", ("dest", "a")),
        ("mv -S .bak old new", ("old", "new")),
        ("dd if=/dev/zero of=disk.img bs=1M", ("disk.img",)),
        ("git checkout -- a.py b.py", ("a.py", "b.py")),
        ("git checkout HEAD~1 a.py", ("a.py",)),
        ("git checkout main", ()),
        ("git restore --staged a.py", ("a.py",)),
        ("git rm -r --cached build", ("build",)),
        ("install -m 644 build/app /usr/local/bin/app", ("/usr/local/bin/app",)),
        ("install -d dir1 dir2", ("dir1", "dir2")),
        ("ln -s ../target link", ("link",)),
        ("ln -s /etc/hosts", ("hosts",)),
        ("rm -rf -- a -b", ("a", "-b")),
        ("rmdir -p empty/dir", ("empty/dir",)),
        ("touch -d yesterday stamp", ("stamp",)),
        ("mkdir -p -m 755 out/dir", ("out/dir",)),
        ("chmod -R 755 bin script.sh", ("bin", "script.sh")),
        ("chmod -w locked.txt", ("locked.txt",)),
        ("chmod --reference=ref.txt a.txt", ("a.txt",)),
        ("chown -R user:group data", ("data",)),
        ("truncate -s 0 log.txt", ("log.txt",)),
        ("unlink old", ("old",)),
        ("sed -i 's/a/b/' f1 f2", ("f1", "f2")),
        ("sed -i.bak -e 's/a/b/' -e 's/c/d/' f1", ("f1",)),
        ("sed --in-place -f script.sed f1", ("f1",)),
        ("sed 's/a/b/' f1", ()),
        ("perl -pi -e 's/a/b/' f1 f2", ("f1", "f2")),
        ("perl -i.orig fix.pl f1", ("f1",)),
        ("perl -ne 'print' f1", ()),
        ("echo x > a; echo y > a", ("a",)),
        ("cd .ithaca && rm state.db", (".ithaca/state.db",)),
        ("cd sub; cd deeper; touch f; touch /tmp/abs", ("sub/deeper/f", "/tmp/abs")),
        ("bash -c 'echo hi > nested.txt'", ("nested.txt",)),
        ("make -C build", ()),
    ],
)
def test_write_targets_name_what_each_command_writes(line, targets):
    assert write_targets(parse(line)) == targets


def test_time_output_file_is_a_write_target():
    assert write_targets(parse("time -o timing.txt ls")) == ("timing.txt",)


# ---- read-only judgement ----------------------------------------------------------------

READ_ONLY = [
    "ls -la src | grep py | wc -l",
    "cat README.md && head -n 5 x",
    "rg -n TODO src; ag foo",
    "jq . data.json",
    "sleep 0.3",
    "echo hello > /dev/null 2>&1",
    "env",
    "time ls",
    "timeout 10 cat x",
    "find . -name '*.py' -type f",
    "fd -e py src",
    "sort -k 2 data.txt",
    "sort -t o data.txt",
    "tree -L 2",
    "uniq data.txt",
    "sed -n '1,20p' file.txt",
    "sed -n '$p' file.txt",
    "git status",
    "git -C sub --no-pager log --oneline -5",
    "git diff HEAD~1 -- src",
    "git branch",
    "git branch -a -vv",
    "git branch --list 'feat/*'",
    "git branch --contains abc123",
    "git tag",
    "git tag -l 'v1.*'",
    "git tag -n5",
    "git stash list",
    "git stash show -p",
    "git remote -v",
    "git remote get-url origin",
    "git config --get user.name",
    "git config --get-regexp alias",
    "git config --list",
    "git worktree list",
    "git reflog",
    "git reflog show main",
    "git grep -c pattern",
    "pytest -q tests",
    "python -m pytest -x",
    "python3 -m pytest",
    ".venv/bin/python -m pytest tests",
    "uv run pytest",
    "uv run --frozen --offline pytest -q",
    "go test ./...",
    "cargo test",
    "npm test",
    "npm run test",
    "pnpm test",
    "yarn test",
    "npx jest",
    "npx vitest run",
    "node --test",
    "ithaca protocols list",
    "python -m ithaca ulysses status",
    "cd src && ls",
    "X=1",
]

MUTATING = [
    "rm -rf build",
    "touch new.txt",
    "echo hi > out.txt",
    "ls | tee listing.txt",
    "cp a b",
    "awk '{print}' x",
    "python -c 'print(1)'",
    "python script.py",
    "make",
    "find . -name '*.pyc' -delete",
    "find . -exec rm {} ;",
    "find . -execdir cat {} +",
    "find . -ok rm {} ;",
    "find . -fprint out.txt",
    "find . -fls out.txt",
    "fd -x rm",
    "fd -X rm",
    "fd --exec rm",
    "fd --exec-batch rm",
    "sort -o out.txt in.txt",
    "sort -ro out.txt in.txt",
    "sort --output=out.txt in.txt",
    "sort --out=out.txt in.txt",
    "tree -o out.txt",
    "uniq in.txt out.txt",
    "sed 's/a/b/' x",
    "sed -n 's/a/b/p' x",
    "sed -n '1p' -i x",
    "sed -i 's/a/b/' x",
    "git commit -m x",
    "git push",
    "git -c core.pager=rm log",
    "git --config-env=core.pager=X log",
    "git diff --output=patch.diff",
    "git branch new-branch",
    "git branch -D old",
    "git branch -m a b",
    "git tag v1.0",
    "git tag -d v1.0",
    "git stash",
    "git stash pop",
    "git remote add origin url",
    "git config user.name x",
    "git worktree add ../x",
    "git reflog expire --all",
    "git checkout main",
    "pytest --snapshot-update",
    "pytest --inline-snapshot=fix",
    "pytest --inline-snapshot=review,create",
    "pytest --force-regen",
    "npx jest -u",
    "npx jest --updateSnapshot",
    "npx playwright test --update-snapshots",
    "npm test -- --update",
    "go test ./... -update",
    "UPDATE=1 pytest",
    "SNAPSHOT_UPDATE=1 python -m pytest",
    "env INSTA_UPDATE=always cargo test",
    "sudo ls",
    "exec ls",
    "xargs rm",
    "source env.sh",
    ". env.sh",
    "eval ls",
    "bash -c ls",
    "echo $(ls)",
    "echo `ls`",
    "(ls)",
    "ls && rm x",
    "ithaca protocols list > out.txt",
]


@pytest.mark.parametrize("line", READ_ONLY)
def test_inspection_commands_are_read_only(line):
    assert is_read_only(parse(line)), parse(line)


@pytest.mark.parametrize("line", MUTATING)
def test_commands_that_can_change_things_are_not_read_only(line):
    assert not is_read_only(parse(line)), parse(line)


def test_test_runners_are_mutating_when_tests_are_not_read_only():
    parsed = parse("pytest -q")
    assert is_read_only(parsed)
    assert not is_read_only(parsed, tests_are_read_only=False)


def test_configured_read_only_commands_are_read_only_by_basename():
    parsed = parse("/usr/bin/make check")
    assert not is_read_only(parsed)
    assert is_read_only(parsed, extra_read_only=("make",))


def test_configured_read_only_commands_still_may_not_redirect():
    assert not is_read_only(parse("make check > log"), extra_read_only=("make",))


# ---- Ithaca CLI invocations -------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        "ithaca protocols approve apr_X",
        ".venv/bin/ithaca protocols approve apr_X",
        "/opt/tools/bin/ithaca protocols approve apr_X",
        "python -m ithaca protocols approve apr_X",
        "python3 -m ithaca protocols approve apr_X",
        "python3.11 -I -m ithaca protocols approve apr_X",
        "python -mithaca protocols approve apr_X",
        "python -m ithaca.cli protocols approve apr_X",
        "uv run ithaca protocols approve apr_X",
        "uv run --with rich -p 3.11 ithaca protocols approve apr_X",
        "uv run python -m ithaca protocols approve apr_X",
        "uvx ithaca protocols approve apr_X",
        "uvx --from ithaca ithaca protocols approve apr_X",
        "pipx run ithaca protocols approve apr_X",
        "poetry run ithaca protocols approve apr_X",
        "hatch run ithaca protocols approve apr_X",
        "FOO=1 python -m ithaca protocols approve apr_X",
        "timeout 30 ithaca protocols approve apr_X",
    ],
)
def test_every_spelling_of_the_ithaca_cli_is_recognised(line):
    (command,) = parse(line).commands
    assert ithaca_invocation(command) == ("protocols", "approve", "apr_X")


@pytest.mark.parametrize(
    "line",
    [
        "ithaca-hook claude PreToolUse",
        "python -c 'import ithaca'",
        "python ithaca.py",
        "python -m pytest ithaca",
        "echo ithaca protocols approve",
        "uv pip install ithaca",
    ],
)
def test_mentions_of_ithaca_are_not_cli_invocations(line):
    assert [ithaca_invocation(item) for item in parse(line).commands] == [None]


# ---- properties -------------------------------------------------------------------------

SHELLISH = st.text(alphabet=st.sampled_from(list("ab -$`'\"\\()|&;<>\n#{}=1\t")), max_size=60)


@given(st.one_of(st.text(max_size=200), SHELLISH))
def test_parse_never_raises_and_unparseable_text_is_never_read_only(text):
    parsed = parse(text)
    if parsed.unparseable:
        assert parsed.reason
        assert not is_read_only(parsed)
        assert not is_read_only(parsed, extra_read_only=("a", "b"))


@given(st.lists(st.text(min_size=0, max_size=20), max_size=6))
def test_quoted_arguments_are_data_whatever_they_contain(words):
    parsed = parse(shlex.join(["echo", *words]))
    assert [item.argv for item in parsed.commands] == [("echo", *words)]
    assert is_read_only(parsed)


# ---- the scanner's helpers agree with the patterns they stand for -------------------------

WORD_PIECES = ["python", "pypy", "py", "3", ".", "11", "٣", "²", "x", "-", "$", ",", "p", "=", "+"]


@pytest.mark.parametrize(
    ("helper", "pattern", "whole", "alphabet"),
    [
        (
            shell_commands._is_assignment,
            r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^\]]*\])?\+?=",
            False,
            "aZ_0[]+=x ",
        ),
        (shell_parse._is_fd_duplicate, r"\d*-?", True, "01٣²-x"),
        (shell_commands.is_python, r"(?:python|pypy)(?:\d+(?:\.\d+)*)?", True, None),
        (shell_effects._is_option_mode, r"-[rwxXst]+", True, "-rwxXstu+"),
        (shell_readers._is_sed_print, r"(?:\d+|\$)(?:,(?:\d+|\$))?p", True, None),
        (shell_readers._is_number, r"[0-9]+", True, "09٣²x-"),
        (shell_git_reads._git_branch_flags, r"-[alrvi]+", True, "-alrvix"),
        (shell_git_reads._git_tag_flags, r"-(?:[li]+|n\d*)", True, "-lin1٣x"),
    ],
)
@given(data=st.data())
def test_each_scanner_helper_accepts_exactly_what_its_pattern_does(
    helper, pattern, whole, alphabet, data
):
    if alphabet is None:
        word = "".join(data.draw(st.lists(st.sampled_from(WORD_PIECES), max_size=5)))
    else:
        word = data.draw(st.text(alphabet=alphabet, max_size=8))
    found = re.fullmatch(pattern, word) if whole else re.match(pattern, word)
    assert helper(word) is (found is not None)
