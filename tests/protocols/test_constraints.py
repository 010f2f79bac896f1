"""Typed constraints (protocols reference §9.3–9.5) against hand-made calls."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel.call import Call, SimpleCommand
from ithaca.kernel.errors import InvalidInput
from ithaca.protocols.constraints import (
    Fired,
    combine,
    command_pattern_matches,
    evaluate,
    path_pattern_matches,
    tool_pattern_matches,
)


def shell_call(
    *lines: str, targets: tuple[str, ...] = (), mutating: bool = True, unparseable: bool = False
) -> Call:
    return Call(
        host="claude-code",
        tool="Bash",
        tool_class="shell",
        mutating=mutating,
        tool_input={"command": " && ".join(lines)},
        cwd="/project",
        action_digest="0" * 64,
        commands=tuple(SimpleCommand(tuple(shlex.split(line))) for line in lines),
        write_targets=targets,
        unparseable=unparseable,
    )


def tool_call(tool: str, tool_class: str, *, mutating: bool, targets=()) -> Call:
    return Call(
        host="claude-code",
        tool=tool,
        tool_class=tool_class,
        mutating=mutating,
        tool_input={},
        cwd="/project",
        action_digest="0" * 64,
        write_targets=targets,
    )


def edit_call(path: str) -> Call:
    return tool_call("Edit", "edit", mutating=True, targets=(path,))


def read_call() -> Call:
    return tool_call("Read", "read", mutating=False)


def run(constraints, call, *, state=lambda name: True, approved=False) -> list[Fired]:
    return evaluate(
        [("acme.rules", i, c) for i, c in enumerate(constraints)],
        call,
        state=state,
        approved=approved,
    )


def never(name: str) -> bool:
    return False


def effects(fired: list[Fired]) -> list[tuple[str, str]]:
    return [(f.effect, f.reason_code) for f in fired]


# --- command patterns -------------------------------------------------------------


def test_force_option_pattern_matches_it_anywhere_in_the_command():
    argv = ("git", "push", "origin", "main", "--force-with-lease")
    assert command_pattern_matches("git push --force*", argv)


def test_git_push_does_not_match_a_log_that_greps_for_push():
    assert not command_pattern_matches("git push", ("git", "log", "--grep", "push"))


def test_global_option_with_a_value_needs_a_star_in_the_pattern():
    argv = ("git", "-C", "repo", "push")
    assert command_pattern_matches("git * push", argv)
    assert not command_pattern_matches("git push", argv)


def test_program_is_compared_by_basename():
    assert command_pattern_matches("git push", ("/usr/bin/git", "push", "origin"))
    assert command_pattern_matches("/usr/bin/git push", ("git", "push"))


def test_option_in_pattern_must_appear_in_the_command():
    assert not command_pattern_matches("git push --force*", ("git", "push", "origin"))


def test_pattern_longer_than_the_command_does_not_match():
    assert not command_pattern_matches("git push origin", ("git", "push"))


def test_positional_tokens_are_globs():
    assert command_pattern_matches("rm *.key", ("rm", "-f", "server.key"))
    assert not command_pattern_matches("rm *.key", ("rm", "server.pem"))


def test_lone_dash_is_an_operand_not_an_option():
    assert command_pattern_matches("cat -", ("cat", "-"))
    assert not command_pattern_matches("cat -n", ("cat", "-"))


def test_empty_argv_matches_nothing():
    assert not command_pattern_matches("*", ())


@pytest.mark.parametrize("pattern", ['git commit -m "oops', "", "   "])
def test_malformed_command_pattern_is_an_invalid_constraint(pattern):
    with pytest.raises(InvalidInput) as caught:
        command_pattern_matches(pattern, ("git",))
    assert caught.value.code == "INVALID_CONSTRAINT"


_plain_word = st.text(alphabet="abcxyz019_./=:", min_size=1, max_size=8)
_option = st.builds(lambda dashes, word: dashes + word, st.sampled_from(["-", "--"]), _plain_word)


@given(
    program=_plain_word,
    rest=st.lists(st.one_of(_plain_word, _option, st.just("-")), max_size=8),
    data=st.data(),
)
def test_a_commands_own_leading_operands_always_match_it(program, rest, data):
    argv = (program, *rest)
    operands = [program] + [t for t in rest if not t.startswith("-") or t == "-"]
    options = [t for t in rest if t.startswith("-") and t != "-"]
    k = data.draw(st.integers(min_value=1, max_value=len(operands)), label="k")
    chosen_options = data.draw(st.lists(st.sampled_from(options)) if options else st.just([]))
    pattern = shlex.join(operands[:k] + chosen_options)
    assert command_pattern_matches(pattern, argv)


# --- path patterns ----------------------------------------------------------------


def test_basename_pattern_matches_at_any_depth_and_outside_the_project():
    assert path_pattern_matches("*.key", "server.key")
    assert path_pattern_matches("*.key", "deploy/tls/server.key")
    assert path_pattern_matches(".env", "/home/dev/.env")
    assert not path_pattern_matches("*.key", "deploy/server.key.bak")


def test_single_star_stays_within_one_segment():
    assert path_pattern_matches("src/*.py", "src/app.py")
    assert not path_pattern_matches("src/*.py", "src/pkg/app.py")


def test_double_star_crosses_segments_and_may_match_none():
    assert path_pattern_matches("src/**/*.py", "src/app.py")
    assert path_pattern_matches("src/**/*.py", "src/a/b/app.py")
    assert path_pattern_matches("secrets/**", "secrets/prod/db.txt")
    assert path_pattern_matches("secrets/**", "secrets")
    assert not path_pattern_matches("secrets/**", "public/secrets.txt")


def test_pattern_with_a_slash_is_anchored_at_the_project_root():
    assert path_pattern_matches("config/prod.yaml", "config/prod.yaml")
    assert path_pattern_matches("./config/prod.yaml", "config/prod.yaml")
    assert not path_pattern_matches("config/prod.yaml", "app/config/prod.yaml")
    assert not path_pattern_matches("config/prod.yaml", "/config/prod.yaml")


def test_absolute_pattern_matches_only_absolute_targets():
    assert path_pattern_matches("/etc/**", "/etc/hosts")
    assert not path_pattern_matches("/etc/**", "etc/hosts")


def test_trailing_slash_covers_the_directory_and_everything_below():
    assert path_pattern_matches("build/", "build")
    assert path_pattern_matches("build/", "build/lib/out.o")
    assert not path_pattern_matches("build/", "src/build")


def test_path_patterns_are_case_sensitive():
    assert not path_pattern_matches("*.KEY", "server.key")


@pytest.mark.parametrize(
    ("pattern", "target"),
    [
        ("src/secret.key", "src/*"),
        ("src/secret.key", "src/sec*"),
        ("src/s*/x.txt", "src/sec?/x.txt"),
        ("secrets/**", "*"),
        ("secrets/db.txt", "secrets/[abc]*"),
        ("*.key", "src/*.py"),
        ("/etc/hosts", "/etc/*"),
        ("config/{a,b}.yaml", "config/{a,b}.yaml"),
        ("config/a.yaml", "config/{a,b}.yaml"),
    ],
)
def test_glob_target_fires_when_its_literal_prefix_could_lead_to_the_pattern(pattern, target):
    assert path_pattern_matches(pattern, target)


@pytest.mark.parametrize(
    ("pattern", "target"),
    [
        ("docs/**", "src/*"),
        ("src/public/x.txt", "src/sec*"),
        ("src/a[xy]z/f", "src/ab*"),
        ("config/prod.yaml", "/tmp/*"),
        ("/etc/hosts", "etc/*"),
    ],
)
def test_glob_target_does_not_fire_when_its_literal_prefix_rules_the_pattern_out(pattern, target):
    assert not path_pattern_matches(pattern, target)


_segment = st.text(alphabet="ab.", min_size=1, max_size=3).filter(lambda s: s not in (".", ".."))
_concrete_path = st.builds(
    lambda root, parts: root + "/".join(parts),
    st.sampled_from(["", "/"]),
    st.lists(_segment, min_size=1, max_size=4),
)
_path_pattern = st.text(alphabet="ab./*?", min_size=1, max_size=10)


@given(pattern=_path_pattern, path=_concrete_path, data=st.data())
def test_glob_target_fires_whenever_a_path_it_could_expand_to_matches(pattern, path, data):
    cut = data.draw(st.integers(min_value=1 if path.startswith("/") else 0, max_value=len(path)))
    if path_pattern_matches(pattern, path):
        assert path_pattern_matches(pattern, path[:cut] + "*")


# --- tool patterns ----------------------------------------------------------------


def test_tool_globs_are_case_sensitive_fnmatch():
    assert tool_pattern_matches("mcp__github__*", "mcp__github__create_issue")
    assert not tool_pattern_matches("mcp__github__*", "mcp__gitlab__create_issue")
    assert not tool_pattern_matches("bash", "Bash")


# --- deny_tool --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "code"), [("deny", "CONSTRAINT_DENY"), ("ask", "CONSTRAINT_ASK")]
)
def test_deny_tool_fires_on_a_matching_tool_name(effect, code):
    fired = run(
        [{"kind": "deny_tool", "tools": ["Web*"], "effect": effect}],
        tool_call("WebFetch", "web", mutating=False),
    )
    assert effects(fired) == [(effect, code)]
    assert "WebFetch" in fired[0].reason


@pytest.mark.parametrize(
    ("effect", "code"), [("deny", "CONSTRAINT_DENY"), ("ask", "CONSTRAINT_ASK")]
)
def test_deny_tool_fires_on_a_matching_class(effect, code):
    fired = run(
        [{"kind": "deny_tool", "classes": ["delegate"], "effect": effect}],
        tool_call("Task", "delegate", mutating=True),
    )
    assert effects(fired) == [(effect, code)]


def test_deny_tool_stays_quiet_for_other_tools():
    constraint = {"kind": "deny_tool", "tools": ["Web*"], "classes": ["delegate"], "effect": "deny"}
    assert run([constraint], edit_call("src/app.py")) == []


# --- deny_command -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "code"), [("deny", "CONSTRAINT_DENY"), ("ask", "CONSTRAINT_ASK")]
)
def test_deny_command_fires_on_any_matching_simple_command(effect, code):
    call = shell_call("make test", "git push --force origin main")
    fired = run(
        [{"kind": "deny_command", "commands": ["git push --force*"], "effect": effect}], call
    )
    assert effects(fired) == [(effect, code)]


def test_deny_command_reason_names_only_the_matched_simple_command():
    call = shell_call("export TOKEN=hunter2", "git push --force")
    fired = run([{"kind": "deny_command", "commands": ["git push"], "effect": "deny"}], call)
    assert "git push --force" in fired[0].reason
    assert "hunter2" not in fired[0].reason


def test_protocol_reason_replaces_the_generated_sentence():
    constraint = {
        "kind": "deny_command",
        "commands": ["git push"],
        "effect": "deny",
        "reason": "Pushing is done by CI.",
    }
    assert run([constraint], shell_call("git push"))[0].reason == "Pushing is done by CI."


def test_deny_command_ignores_commands_that_do_not_match():
    call = shell_call("git log --grep push")
    assert run([{"kind": "deny_command", "commands": ["git push"], "effect": "deny"}], call) == []


def test_unparseable_command_fires_every_deny_command():
    call = shell_call(unparseable=True)
    constraints = [
        {"kind": "deny_command", "commands": ["git push"], "effect": "deny"},
        {"kind": "deny_command", "commands": ["rm -r*"], "effect": "ask", "reason": "No rm -r."},
    ]
    fired = run(constraints, call)
    assert effects(fired) == [("deny", "UNPARSEABLE_COMMAND"), ("ask", "UNPARSEABLE_COMMAND")]
    assert "cannot be parsed" in fired[1].reason
    assert fired[1].reason.endswith("No rm -r.")


# --- deny_path --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effect", "code"), [("deny", "CONSTRAINT_DENY"), ("ask", "CONSTRAINT_ASK")]
)
def test_deny_path_fires_on_a_matching_write_target(effect, code):
    fired = run(
        [{"kind": "deny_path", "paths": ["migrations/**"], "effect": effect}],
        edit_call("migrations/0001_init.sql"),
    )
    assert effects(fired) == [(effect, code)]
    assert "migrations/0001_init.sql" in fired[0].reason


def test_deny_path_ignores_targets_that_do_not_match():
    constraint = {"kind": "deny_path", "paths": ["migrations/**"], "effect": "deny"}
    assert run([constraint], edit_call("src/models.py")) == []


def test_call_without_known_targets_is_not_path_checked():
    constraint = {"kind": "deny_path", "paths": ["**"], "effect": "deny"}
    assert run([constraint], shell_call("make")) == []


@pytest.mark.parametrize("target", ["$OUT/report.txt", "`pwd`/x", "logs/$(date).txt"])
def test_shell_decided_target_fires_every_deny_path(target):
    call = shell_call("cp a b", targets=(target,))
    constraints = [
        {"kind": "deny_path", "paths": ["migrations/**"], "effect": "deny"},
        {"kind": "deny_path", "paths": ["*.key"], "effect": "ask"},
    ]
    assert effects(run(constraints, call)) == [
        ("deny", "CONSTRAINT_DENY"),
        ("ask", "CONSTRAINT_ASK"),
    ]


def test_glob_target_in_a_shell_call_fires_a_compatible_deny_path():
    call = shell_call("rm secrets/*", targets=("secrets/*",))
    fired = run([{"kind": "deny_path", "paths": ["secrets/prod.env"], "effect": "deny"}], call)
    assert effects(fired) == [("deny", "CONSTRAINT_DENY")]


# --- require_state ----------------------------------------------------------------


def _needs_step(**extra):
    return {"kind": "require_state", "state": "ulysses.step_active", "effect": "deny", **extra}


def test_require_state_is_quiet_when_the_predicate_holds():
    assert run([_needs_step()], edit_call("a.py"), state=lambda name: True) == []


@pytest.mark.parametrize("effect", ["deny", "ask"])
def test_require_state_fires_when_the_predicate_is_false(effect):
    fired = run([_needs_step(effect=effect)], edit_call("a.py"), state=lambda name: False)
    assert effects(fired) == [(effect, "STATE_REQUIRED")]
    assert "ulysses.step_active" in fired[0].reason


def test_require_state_can_expect_false():
    constraint = _needs_step(expect=False)
    assert run([constraint], edit_call("a.py"), state=lambda name: False) == []
    assert effects(run([constraint], edit_call("a.py"), state=lambda name: True)) == [
        ("deny", "STATE_REQUIRED")
    ]


@pytest.mark.parametrize("expect", [True, False])
def test_require_state_whose_predicate_raises_counts_as_unmet(expect):
    def broken(name):
        raise RuntimeError("database is locked")

    fired = run([_needs_step(expect=expect)], edit_call("a.py"), state=broken)
    assert effects(fired) == [("deny", "STATE_REQUIRED")]


def test_require_state_treats_a_non_bool_answer_as_unmet():
    fired = run([_needs_step()], edit_call("a.py"), state=lambda name: "yes")
    assert effects(fired) == [("deny", "STATE_REQUIRED")]


def test_require_state_reads_the_named_predicate():
    asked = []
    run([_needs_step()], edit_call("a.py"), state=lambda name: asked.append(name) or True)
    assert asked == ["ulysses.step_active"]


def test_require_state_by_default_covers_mutating_calls_only():
    assert effects(run([_needs_step()], shell_call("touch a", targets=("a",)), state=never)) == [
        ("deny", "STATE_REQUIRED")
    ]
    assert run([_needs_step()], read_call(), state=never) == []


def test_require_state_for_any_covers_read_only_calls():
    fired = run([_needs_step(**{"for": "any"})], read_call(), state=lambda name: False)
    assert effects(fired) == [("deny", "STATE_REQUIRED")]


def test_require_state_for_classes_covers_their_mutating_calls_only():
    constraint = _needs_step(**{"for": ["shell", "mcp"]})
    assert len(run([constraint], shell_call("touch a"), state=never)) == 1
    assert run([constraint], shell_call("ls", mutating=False), state=never) == []
    assert run([constraint], edit_call("a.py"), state=never) == []


def test_require_state_out_of_scope_does_not_read_the_predicate():
    def must_not_be_called(name):
        raise AssertionError("predicate read for an out-of-scope call")

    assert run([_needs_step()], read_call(), state=must_not_be_called) == []


# --- require_approval -------------------------------------------------------------


def test_require_approval_fires_on_a_matching_command_without_approval():
    fired = run(
        [{"kind": "require_approval", "commands": ["npm publish"]}],
        shell_call("npm publish --access public"),
    )
    assert effects(fired) == [("approval", "APPROVAL_REQUIRED")]
    assert "npm publish --access public" in fired[0].reason


def test_require_approval_is_satisfied_by_a_granted_approval():
    constraint = {"kind": "require_approval", "commands": ["npm publish"]}
    assert run([constraint], shell_call("npm publish"), approved=True) == []


def test_require_approval_ignores_actions_it_does_not_name():
    constraint = {"kind": "require_approval", "commands": ["npm publish"], "paths": ["*.lock"]}
    assert run([constraint], shell_call("npm test")) == []


def test_require_approval_matches_write_targets_and_tools():
    by_path = {"kind": "require_approval", "paths": ["infra/**"]}
    by_tool = {"kind": "require_approval", "tools": ["mcp__deploy__*"]}
    assert len(run([by_path], edit_call("infra/main.tf"))) == 1
    deploy = tool_call("mcp__deploy__release", "mcp", mutating=True)
    assert effects(run([by_tool], deploy)) == [("approval", "APPROVAL_REQUIRED")]


def test_require_approval_for_commands_fires_on_an_unparseable_command():
    constraint = {"kind": "require_approval", "commands": ["npm publish"]}
    fired = run([constraint], shell_call(unparseable=True))
    assert effects(fired) == [("approval", "APPROVAL_REQUIRED")]


def test_approval_does_not_silence_deny_constraints():
    constraints = [
        {"kind": "require_approval", "commands": ["git push"]},
        {"kind": "deny_command", "commands": ["git push"], "effect": "deny"},
    ]
    fired = run(constraints, shell_call("git push"), approved=True)
    assert effects(fired) == [("deny", "CONSTRAINT_DENY")]


# --- evaluation as a whole --------------------------------------------------------


def test_fired_constraints_keep_input_order_and_identity():
    call = shell_call("git push --force", targets=())
    items = [
        ("acme.b", 2, {"kind": "deny_command", "commands": ["git push"], "effect": "ask"}),
        ("acme.a", 0, {"kind": "deny_tool", "tools": ["Edit"], "effect": "deny"}),
        ("acme.a", 1, {"kind": "deny_tool", "classes": ["shell"], "effect": "deny"}),
    ]
    fired = evaluate(items, call, state=lambda name: True, approved=False)
    assert [(f.protocol_id, f.index, f.kind) for f in fired] == [
        ("acme.b", 2, "deny_command"),
        ("acme.a", 1, "deny_tool"),
    ]


def test_unknown_constraint_kind_is_refused():
    with pytest.raises(InvalidInput) as caught:
        run([{"kind": "allow_tool", "tools": ["*"]}], read_call())
    assert caught.value.code == "UNKNOWN_CONSTRAINT_KIND"


# --- combine ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("effects_in", "result"),
    [
        ([], "allow"),
        (["allow"], "allow"),
        (["allow", "ask"], "ask"),
        (["ask", "approval"], "approval"),
        (["ask", "deny", "approval"], "deny"),
    ],
)
def test_most_severe_effect_wins(effects_in, result):
    assert combine(effects_in) == result


def test_granted_approval_turns_ask_into_allow_but_never_overrides_a_deny():
    assert combine(["ask", "allow"], approved=True) == "allow"
    assert combine(["ask", "deny"], approved=True) == "deny"
