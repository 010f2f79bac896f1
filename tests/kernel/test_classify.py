import os

import pytest

from ithaca.kernel.classify import classify_call


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / "src").mkdir(parents=True)
    (root / ".ithaca").mkdir()
    (tmp_path / "outside").mkdir()
    return root


def call(project, tool, tool_input, cwd=None, **options):
    return classify_call(
        "claude",
        tool,
        tool_input,
        str(cwd or project),
        project_root=str(project),
        **options,
    )


def bash(project, command, cwd=None, **options):
    return call(project, "Bash", {"command": command}, cwd, **options)


# ---- tool classes -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input", "tool_class", "mutating"),
    [
        ("Edit", {"file_path": "a.py"}, "edit", True),
        ("Write", {"file_path": "a.py"}, "edit", True),
        ("MultiEdit", {"file_path": "a.py"}, "edit", True),
        ("NotebookEdit", {"notebook_path": "n.ipynb"}, "edit", True),
        ("apply_patch", {"input": ""}, "edit", True),
        ("Task", {"prompt": "x"}, "delegate", True),
        ("Agent", {"prompt": "x"}, "delegate", True),
        ("spawn_agent", {"message": "x"}, "delegate", True),
        ("Read", {"file_path": "a.py"}, "read", False),
        ("Glob", {"pattern": "*.py"}, "read", False),
        ("Grep", {"pattern": "x"}, "read", False),
        ("LS", {"path": "."}, "read", False),
        ("update_plan", {}, "read", False),
        ("TodoWrite", {}, "read", False),
        ("WebFetch", {"url": "https://example.org"}, "web", False),
        ("WebSearch", {"query": "x"}, "web", False),
        ("mcp__ithaca__load_protocols", {"eventId": "evt_1"}, "ithaca", False),
        ("mcp__docs__search", {}, "mcp", True),
        ("SomethingNew", {}, "other", True),
    ],
)
def test_each_tool_has_its_class_and_mutation_rule(project, tool, tool_input, tool_class, mutating):
    result = call(project, tool, tool_input)
    assert (result.tool_class, result.mutating) == (tool_class, mutating)
    assert result.tool == tool


@pytest.mark.parametrize("tool", ["Bash", "shell", "local_shell", "exec_command", "shell_command"])
def test_every_host_shell_tool_is_parsed(project, tool):
    result = call(project, tool, {"command": "rm -f src/x"})
    assert result.tool_class == "shell"
    assert result.mutating
    assert result.write_targets == ("src/x",)


def test_the_ithaca_class_follows_the_configured_server_name(project):
    assert call(project, "mcp__gov__ulysses", {}, server_name="gov").tool_class == "ithaca"
    assert call(project, "mcp__ithaca__ulysses", {}, server_name="gov").tool_class == "mcp"


def test_read_only_tools_globs_exempt_matching_mcp_and_other_tools(project):
    globs = ("mcp__docs__*", "Lookup")
    assert not call(project, "mcp__docs__search", {}, read_only_tools=globs).mutating
    assert not call(project, "Lookup", {}, read_only_tools=globs).mutating
    assert call(project, "mcp__other__search", {}, read_only_tools=globs).mutating
    assert call(project, "lookup", {}, read_only_tools=globs).mutating


def test_read_only_tools_cannot_exempt_edits_or_shell(project):
    assert call(project, "Write", {"file_path": "a"}, read_only_tools=("*",)).mutating
    assert bash(project, "rm x", read_only_tools=("*",)).mutating


def test_session_and_agent_ids_are_carried(project):
    result = call(project, "Read", {}, session_id="s1", agent_id="a1")
    assert (result.session_id, result.agent_id, result.host) == ("s1", "a1", "claude")


# ---- shell calls ------------------------------------------------------------------------


def test_a_read_only_shell_line_is_not_mutating(project):
    result = bash(project, "git status && ls src | wc -l")
    assert not result.mutating
    assert [item.argv for item in result.commands] == [
        ("git", "status"),
        ("ls", "src"),
        ("wc", "-l"),
    ]


def test_an_unparseable_shell_line_is_mutating_and_flagged(project):
    result = bash(project, "echo 'oops")
    assert result.unparseable
    assert result.mutating


def test_a_missing_command_is_unparseable(project):
    result = call(project, "Bash", {})
    assert result.unparseable
    assert result.mutating


def test_tests_are_read_only_can_be_turned_off(project):
    assert not bash(project, "pytest -q").mutating
    assert bash(project, "pytest -q", tests_are_read_only=False).mutating


def test_extra_read_only_commands_are_read_only_but_do_not_hide_writes(project):
    assert bash(project, "mytool x").mutating
    assert not bash(project, "mytool x | head", read_only_commands=("mytool",)).mutating
    assert bash(project, "mytool x > out", read_only_commands=("mytool",)).mutating


def test_a_codex_argv_is_joined_for_the_parser(project):
    result = call(project, "shell", {"command": ["rm", "-rf", "my dir"]})
    assert [item.argv for item in result.commands] == [("rm", "-rf", "my dir")]
    assert result.write_targets == ("my dir",)


def test_codex_bash_lc_wrapper_is_judged_by_the_line_it_carries(project):
    read = call(project, "shell", {"command": ["bash", "-lc", "ls -la | head"]})
    assert not read.mutating
    write = call(project, "shell", {"command": ["bash", "-lc", "echo x > src/out.txt"]})
    assert write.mutating
    assert write.write_targets == ("src/out.txt",)


def test_codex_workdir_moves_where_targets_resolve(project):
    result = call(project, "shell", {"command": ["touch", "new.py"], "workdir": "src"})
    assert result.write_targets == ("src/new.py",)


def test_an_agent_written_bash_c_stays_opaque(project):
    result = bash(project, "bash -c 'ls'")
    assert result.mutating


def test_exec_command_reads_its_cmd_field(project):
    result = call(project, "exec_command", {"cmd": "rm -f src/a"})
    assert result.write_targets == ("src/a",)


# ---- Ithaca CLI invocations -------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "ithaca protocols get team.x",
        ".venv/bin/ithaca protocols get team.x",
        "python -m ithaca protocols get team.x",
        "python3 -m ithaca protocols get team.x",
        "uv run ithaca protocols get team.x",
        "uv run python -m ithaca protocols get team.x",
        "FOO=1 python -m ithaca protocols get team.x",
        "bash -c 'ithaca protocols get team.x'",
        "eval ithaca protocols get team.x",
        "ithaca protocols get team.x 2>&1 > /dev/null",
        ["ithaca", "protocols", "get", "team.x"],
        ["bash", "-lc", "ithaca protocols get team.x"],
    ],
)
def test_an_ithaca_cli_call_is_class_ithaca_however_spelled(project, command):
    result = call(project, "Bash", {"command": command})
    assert result.tool_class == "ithaca"
    assert not result.mutating
    assert result.ithaca_commands == (("protocols", "get", "team.x"),)


def test_user_only_and_host_commands_are_shell_calls_the_guard_sees(project):
    for command in ("ithaca protocols approve apr_X", "ithaca uninstall claude"):
        result = bash(project, command)
        assert (result.tool_class, result.mutating) == ("shell", True)
        assert result.ithaca_commands == (tuple(command.split()[1:]),)


def test_ithaca_hook_is_not_the_cli(project):
    result = bash(project, "ithaca-hook claude PreToolUse")
    assert result.tool_class == "shell"
    assert result.ithaca_commands == ()


def test_ithaca_mixed_with_other_commands_is_a_shell_call_that_still_lists_the_invocation(project):
    result = bash(project, "ithaca protocols approve apr_X && rm -rf src")
    assert result.tool_class == "shell"
    assert result.mutating
    assert result.ithaca_commands == (("protocols", "approve", "apr_X"),)


def test_ithaca_inside_a_substitution_is_found(project):
    result = bash(project, "echo $(ithaca ulysses status)")
    assert result.tool_class == "shell"
    assert result.ithaca_commands == (("ulysses", "status"),)


def test_ithaca_writing_a_file_through_a_redirection_is_a_shell_call(project):
    result = bash(project, "ithaca protocols list > src/list.txt")
    assert result.tool_class == "shell"
    assert result.mutating
    assert result.write_targets == ("src/list.txt",)


def test_ithaca_beside_read_only_commands_is_not_mutating(project):
    result = bash(project, "cd src && ithaca ulysses reflect --hypothesis h")
    assert result.tool_class == "shell"
    assert not result.mutating


# ---- write targets ----------------------------------------------------------------------


def test_relative_targets_resolve_against_cwd_and_become_project_relative(project):
    result = bash(project, "rm a.txt ../top.txt", cwd=project / "src")
    assert result.write_targets == ("src/a.txt", "top.txt")


def test_absolute_targets_inside_the_project_become_relative(project):
    result = bash(project, f"touch {project}/src/b.py {project}")
    assert result.write_targets == ("src/b.py", ".")


def test_targets_outside_the_project_stay_absolute(project):
    outside = os.path.realpath(project.parent / "outside")
    result = bash(project, "echo x > ../outside/f.txt; rm /etc/hosts")
    assert result.write_targets == (f"{outside}/f.txt", "/etc/hosts")


def test_a_symlinked_parent_is_followed_to_where_the_write_lands(project):
    (project / "link").symlink_to(project.parent / "outside")
    (project / "src" / "alias").symlink_to(project / ".ithaca")
    outside = os.path.realpath(project.parent / "outside")
    result = bash(project, "touch link/f src/alias/state.db src/alias")
    assert result.write_targets == (f"{outside}/f", ".ithaca/state.db", "src/alias")


def test_a_project_root_given_through_a_symlink_still_yields_relative_targets(project):
    alias = project.parent / "alias"
    alias.symlink_to(project)
    result = classify_call(
        "claude", "Bash", {"command": "rm src/x"}, str(alias), project_root=str(alias)
    )
    assert result.write_targets == ("src/x",)


def test_targets_with_globs_or_variables_are_kept_as_written(project):
    result = bash(project, "rm src/*.pyc; echo x > $HOME/f; touch `date`", cwd=project / "src")
    assert result.write_targets == ("src/*.pyc", "$HOME/f", "`date`")


def test_changing_into_the_state_folder_does_not_hide_a_write_to_it(project):
    result = bash(project, "cd .ithaca && rm state.db")
    assert result.write_targets == (".ithaca/state.db",)


def test_edit_targets_come_from_file_path_and_notebook_path(project):
    assert call(project, "Edit", {"file_path": str(project / "src/a.py")}).write_targets == (
        "src/a.py",
    )
    notebook = call(project, "NotebookEdit", {"notebook_path": "n.ipynb"}, cwd=project / "src")
    assert notebook.write_targets == ("src/n.ipynb",)


PATCH = """*** Begin Patch
*** Add File: src/new.py
+print(1)
*** Update File: src/old.py
*** Move to: src/renamed.py
@@
-a
+b
*** Delete File: docs/gone.md
*** End Patch
"""


@pytest.mark.parametrize(
    "tool_input",
    [{"input": PATCH}, {"patch": PATCH}, {"command": ["apply_patch", PATCH]}],
)
def test_apply_patch_targets_come_from_its_file_headers(project, tool_input):
    result = call(project, "apply_patch", tool_input)
    assert result.tool_class == "edit"
    assert result.write_targets == ("src/new.py", "src/old.py", "src/renamed.py", "docs/gone.md")


def test_apply_patch_run_through_the_shell_reports_its_headers(project):
    result = call(project, "shell", {"command": f"apply_patch <<'EOF'\n{PATCH}EOF\n"})
    assert result.mutating
    assert result.write_targets == ("src/new.py", "src/old.py", "src/renamed.py", "docs/gone.md")


# ---- action digest ----------------------------------------------------------------------


def test_the_same_shell_call_has_the_same_digest(project):
    assert (
        bash(project, "rm -rf build").action_digest == bash(project, "rm -rf build").action_digest
    )


def test_a_changed_command_or_cwd_changes_the_digest(project):
    base = bash(project, "rm -rf build").action_digest
    assert bash(project, "rm -rf build2").action_digest != base
    assert bash(project, "rm -rf build", cwd=project / "src").action_digest != base
    assert call(project, "shell", {"command": "rm -rf build"}).action_digest != base


def test_the_shell_digest_does_not_depend_on_where_the_project_lives(tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    for root in (first, second):
        (root / "src").mkdir(parents=True)
    digests = {
        classify_call(
            "claude", "Bash", {"command": "make"}, str(root / "src"), project_root=str(root)
        ).action_digest
        for root in (first, second)
    }
    assert len(digests) == 1


def test_edit_digests_use_project_relative_paths(project):
    absolute = call(project, "Write", {"file_path": str(project / "src/a.py"), "content": "x"})
    relative = call(project, "Write", {"file_path": "a.py", "content": "x"}, cwd=project / "src")
    changed = call(project, "Write", {"file_path": "a.py", "content": "y"}, cwd=project / "src")
    assert absolute.action_digest == relative.action_digest
    assert changed.action_digest != absolute.action_digest


def test_the_tool_name_is_part_of_the_digest(project):
    edit = call(project, "Edit", {"file_path": "a.py"}).action_digest
    write = call(project, "Write", {"file_path": "a.py"}).action_digest
    assert edit != write
