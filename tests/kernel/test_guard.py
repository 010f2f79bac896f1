"""The kernel guard: state writes, the database and user-only commands."""

from __future__ import annotations

import pytest

from ithaca.kernel.classify import classify_call
from ithaca.kernel.gates import GateContext
from ithaca.kernel.guard import decide
from ithaca.kernel.project import find_project


@pytest.fixture
def ctx(project_dir):
    project = find_project(project_dir)
    return GateContext(
        host="claude",
        event="PreToolUse",
        payload={},
        project=project,
        config={},
        conn=None,
        session_id="s1",
    )


def _call(project_dir, tool, tool_input):
    root = str(project_dir)
    return classify_call("claude", tool, tool_input, root, project_root=root)


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Write", {"file_path": ".ithaca/protocols/x.json", "content": "{}"}),
        ("Edit", {"file_path": ".ithaca/config.toml", "old_string": "a", "new_string": "b"}),
        ("Bash", {"command": "echo '{}' > .ithaca/protocols/x.json"}),
        ("Bash", {"command": "rm -rf .ithaca"}),
        ("Bash", {"command": "cd sub && sed -i s/a/b/ ../.ithaca/config.toml"}),
    ],
)
def test_writes_under_the_state_root_are_denied(project_dir, ctx, tool, tool_input):
    (project_dir / "sub").mkdir(exist_ok=True)
    opinion = decide(_call(project_dir, tool, tool_input), ctx)
    assert opinion.effect == "deny"
    assert opinion.code == "STATE_WRITE_DENIED"


def test_the_state_database_is_off_limits(project_dir, ctx):
    call = _call(project_dir, "Bash", {"command": "sqlite3 .ithaca/.runtime/state.db .dump"})
    assert decide(call, ctx).code == "STATE_DB_DENIED"


@pytest.mark.parametrize(
    "command",
    [
        "ithaca protocols approve apr_7K2M9QXD",
        "python -m ithaca protocols approve apr_7K2M9QXD",
        "bash -c 'ithaca protocols create --id x.y'",
        "FOO=1 ithaca --project . protocols remove team.x",
        "uv run ithaca protocols admit",
    ],
)
def test_user_only_commands_are_denied_however_spelled(project_dir, ctx, command):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert opinion.effect == "deny"
    assert opinion.code == "AUTHORITY_USER_ONLY"


def test_writes_elsewhere_and_reads_of_state_files_pass(project_dir, ctx):
    for tool, tool_input in [
        ("Write", {"file_path": "src/app.py", "content": ""}),
        ("Bash", {"command": "cat .ithaca/protocols/x.json"}),
        ("Bash", {"command": "ithaca protocols list --json"}),
    ]:
        assert decide(_call(project_dir, tool, tool_input), ctx).effect == "abstain"


def test_the_users_ithaca_settings_are_off_limits(project_dir, ctx):
    import os

    settings = os.path.join(os.environ["ITHACA_HOME"], "config.toml")
    for tool, tool_input in [
        ("Write", {"file_path": settings, "content": "[protocols]\nstrict = false\n"}),
        ("Bash", {"command": f"echo 'strict = false' >> {settings}"}),
    ]:
        opinion = decide(_call(project_dir, tool, tool_input), ctx)
        assert opinion.code == "STATE_WRITE_DENIED", tool


def test_git_clean_of_ignored_files_is_denied_but_a_plain_clean_is_not(project_dir, ctx):
    for command in ("git clean -fdx", "git clean -f -X", "cd sub && git clean -xfd"):
        (project_dir / "sub").mkdir(exist_ok=True)
        assert decide(_call(project_dir, "Bash", {"command": command}), ctx).effect == "deny"
    assert decide(_call(project_dir, "Bash", {"command": "git clean -fd"}), ctx).effect != "deny"


@pytest.mark.parametrize(
    "command",
    [
        "ithaca uninstall claude",
        "ithaca --project . install claude",
        "echo '{}' | ithaca hook claude UserPromptSubmit",
        "ithaca-hook claude UserPromptSubmit < payload.json",
        "python -S -c 'from ithaca.hosts.dispatch import main; main()' claude PreToolUse",
    ],
)
def test_an_agent_cannot_speak_for_the_host_or_unwire_ithaca(project_dir, ctx, command):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert (opinion.effect, opinion.code) == ("deny", "HOST_COMMAND")


@pytest.mark.parametrize(
    "command",
    [
        "git -C . clean -fdx",
        "cd .ithaca/.runtime && sqlite3 state.db 'delete from journal'",
        "find .ithaca -delete",
        "find .ithaca/protocols -name '*.json' -exec rm {} +",
    ],
)
def test_indirect_ways_of_destroying_state_are_denied(project_dir, ctx, command):
    assert decide(_call(project_dir, "Bash", {"command": command}), ctx).effect == "deny"


def test_host_and_user_only_ithaca_commands_do_not_skip_protocol_checks(project_dir):
    assert _call(project_dir, "Bash", {"command": "ithaca protocols list --json"}).tool_class == (
        "ithaca"
    )
    for command in ("ithaca uninstall claude", "ithaca protocols approve apr_X"):
        call = _call(project_dir, "Bash", {"command": command})
        assert (call.tool_class, call.mutating) == ("shell", True), command


@pytest.mark.parametrize(
    "command",
    [
        "ithaca uninstall${EMPTY} claude",
        "i=ithaca; $i uninstall claude",
        "python -c \"from ithaca.cli.entry import cli; cli(['uninstall', 'claude'])\"",
        "python -m ithaca.__main__ uninstall claude",
        "echo 'ithaca uninstall claude' | bash",
        "git -c alias.u='!ithaca uninstall claude' u",
    ],
)
def test_host_wiring_hidden_from_the_parser_is_still_denied(project_dir, ctx, command):
    assert decide(_call(project_dir, "Bash", {"command": command}), ctx).code == "HOST_COMMAND"


@pytest.mark.parametrize(
    ("command", "code"),
    [
        ("ithaca $(echo uninstall) claude", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("ithaca ultragoal $OPERATION", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("ithaca proto* approve apr_X", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("python -c 'import ithaca; print(1)'", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("python3 - <<'EOF'\nimport ithaca\nEOF", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("echo 'ithaca protocols approve apr_X' | bash", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("bash -lx < notes-about-ithaca.txt", "AUTHORITY_UNVERIFIABLE_COMMAND"),
        ("ithaca protocols list 'unterminated", "AUTHORITY_UNPARSEABLE_COMMAND"),
    ],
)
def test_a_line_that_hides_which_ithaca_command_runs_is_denied(project_dir, ctx, command, code):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert (opinion.effect, opinion.code) == ("deny", code)


@pytest.mark.parametrize(
    "command",
    [
        'ithaca ultragoal set-blocked --reason "$REASON"',
        "ithaca --project . protocols list --json",
        'ithaca --project "$PWD" context',
        'ithaca ultragoal --session "$ITHACA_SESSION_ID" status',
        "echo 'ithaca protocols approve apr_X' | grep approve",
        "git commit -m 'Run ithaca protocols approve apr_X next'",
        "python tools/report.py --about ithaca",
        "bash scripts/check.sh ithaca",
    ],
)
def test_values_decided_by_the_shell_and_mere_mentions_pass(project_dir, ctx, command):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert opinion.effect != "deny", opinion


def test_an_mcp_call_naming_another_session_is_refused(project_dir, ctx):
    own = _call(project_dir, "mcp__ithaca__ultragoal", {"operation": "get"})
    passed = decide(own, ctx)
    assert (passed.effect, passed.updated_input) == ("abstain", None)  # the user's rules decide
    other = _call(project_dir, "mcp__ithaca__ultragoal", {"operation": "get", "session": "x-2"})
    assert (decide(other, ctx).effect, decide(other, ctx).code) == ("deny", "SESSION_MISMATCH")


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Edit", {"file_path": ".claude/settings.json", "old_string": "a", "new_string": "b"}),
        ("Write", {"file_path": ".mcp.json", "content": "{}"}),
        ("Bash", {"command": "echo '{}' > .claude/settings.local.json"}),
        ("Write", {"file_path": ".codex/hooks.json", "content": "{}"}),
        ("Bash", {"command": "sed -i /ithaca/d .codex/config.toml"}),
    ],
)
def test_the_hosts_wiring_files_are_off_limits(project_dir, ctx, tool, tool_input):
    assert decide(_call(project_dir, tool, tool_input), ctx).code == "HOST_SETTINGS_DENIED"


@pytest.mark.parametrize(
    "command",
    [
        "rm -rf .ith*",
        'rm -rf "$PWD/.ithaca"',
        "sqlite3 .ithaca/.runtime/stat?.db 'delete from journal'",
        "sqlite3 state[.]db .dump",
    ],
)
def test_globs_and_shell_decided_paths_aimed_at_state_are_denied(project_dir, ctx, command):
    assert decide(_call(project_dir, "Bash", {"command": command}), ctx).effect == "deny"


@pytest.mark.parametrize(
    "command",
    ["rm -rf *", "rm -f *.db", "pip install -e . && ithaca status", "grep -r 'ithaca install' ."],
)
def test_ordinary_commands_near_those_patterns_pass(project_dir, ctx, command):
    assert decide(_call(project_dir, "Bash", {"command": command}), ctx).effect == "abstain"


@pytest.mark.parametrize(
    "command",
    [
        'python3 -c \'open(".ithaca/decisions/baseline/dec-auth.json","w").write("x")\'',
        "node -e \"require('fs').writeFileSync('.ithaca/tasks/tasks.json','x')\"",
        "python3.11 -Bc 'import shutil; shutil.rmtree(\".ithaca\")'",
        "python3 -c 'import shutil,sys; shutil.rmtree(sys.argv[1])' .ithaca",
        'uv run python -c \'open(".ithaca/config.toml","w")\'',
        "node -pe \"require('fs').rmSync('.ithaca',{recursive:true})\"",
        "bun --eval \"require('fs').rmSync('.ithaca',{recursive:true})\"",
        "deno eval 'Deno.removeSync(\".ithaca\", {recursive: true})'",
        "perl -e 'unlink \".ithaca/config.toml\"'",
        'ruby -rjson -e \'File.write(".ithaca/config.toml", "")\'',
        "php -r 'unlink(\".ithaca/config.toml\");'",
        'sh -c \'python3 -c "open(\\".ithaca/x\\",\\"w\\")"\'',
        "bash -c 'rm -rf \"$1\"' _ .ithaca",
    ],
)
def test_inline_code_naming_the_state_folder_is_denied(project_dir, ctx, command):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert (opinion.effect, opinion.code) == ("deny", "STATE_WRITE_DENIED")
    assert "runs inline code that names .ithaca/" in opinion.reason


def test_inline_code_naming_the_real_state_root_is_denied(project_dir, ctx):
    code = f"import os; os.remove({str(project_dir / '.ithaca' / 'config.toml')!r})"
    opinion = decide(_call(project_dir, "Bash", {"command": f'python3 -c "{code}"'}), ctx)
    assert opinion.code == "STATE_WRITE_DENIED"


@pytest.mark.parametrize(
    "command",
    [
        "D=.ithaca; rm -rf $D",
        "export D=.ithaca; rm -rf ${D}/tasks",
        'D="$PWD/.ithaca"; E=$D/tasks; cd $E && rm -f *',
        "D=.ithaca bash -c 'rm -rf $D'",
        "D=.ithaca; echo x > $D/config.toml",
        "D=.ithaca; python3 -c \"import shutil; shutil.rmtree('$D')\"",
    ],
)
def test_a_variable_set_to_the_state_folder_is_followed(project_dir, ctx, command):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert (opinion.effect, opinion.code) == ("deny", "STATE_WRITE_DENIED")


@pytest.mark.parametrize(
    "command",
    [
        "cat .ithaca/decisions/baseline/x.json",
        "python -c 'print(1)'",
        "python -W ignore -c 'print(1)' && cat .ithaca/config.toml",
        "grep -r foo .ithaca",
        "git diff .ithaca",
        "ithaca context",
        "python3 -m json.tool .ithaca/config.toml",
        "python -m pytest -c .ithaca/x.ini",
        "python3 script.py -c .ithaca",
        "node script.js -e .ithaca",
        "bash -c 'cat .ithaca/config.toml'",
        "D=.ithaca; ls $D && make",
        "D=.ithaca; D=src; rm -rf $D",
        "D=.ithaca; rm -rf $DIR",
    ],
)
def test_reads_of_state_and_unrelated_interpreter_calls_pass(project_dir, ctx, command):
    assert decide(_call(project_dir, "Bash", {"command": command}), ctx).effect == "abstain"


@pytest.mark.parametrize(
    "command",
    [
        'echo x > "$PWD/.ithaca-work/outputs/ses_1/output.json"',
        "D=.ithaca-work/outputs; cp a.json $D/ses_1/",
        'python3 -c \'open(".ithaca-work/outputs/ses_1/output.json", "w")\'',
    ],
)
def test_the_work_folder_is_not_the_state_folder(project_dir, ctx, command):
    # Whose folder in .ithaca-work/ it is, is the delivery gate's to say.
    assert decide(_call(project_dir, "Bash", {"command": command}), ctx).effect == "abstain"


@pytest.mark.parametrize(
    "command",
    [
        'rm -rf "$PWD/.ithaca-work/../.ithaca"',
        "D=.ithaca-work/../.ithaca; rm -rf $D",
        "python3 -c 'import shutil; shutil.rmtree(\".ithaca-work/../.ithaca\")'",
    ],
)
def test_the_state_folder_named_beside_the_work_folder_is_still_denied(project_dir, ctx, command):
    opinion = decide(_call(project_dir, "Bash", {"command": command}), ctx)
    assert (opinion.effect, opinion.code) == ("deny", "STATE_WRITE_DENIED")
