"""PreToolUse enforcement: the strict gate, typed constraints, approvals, the decision log
and the kernel guard (protocols reference §9, §13 Enforcement; DESIGN kernel contracts)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.accepted import accept
from tests.refusals import gate_reason

from ithaca.app import open_project
from ithaca.kernel.clock import parse
from ithaca.kernel.errors import NotFound, Refused
from ithaca.protocols import constraints as constraints_module

APPROVE = re.compile(
    r'Ask the user to run "ithaca protocols approve (apr_[0-9A-HJKMNP-TV-Z]{8})" in a terminal,'
    r" then retry the identical call\."
)


def rooted(tool_input: dict[str, Any], root) -> dict[str, Any]:
    """The tool input with ``{root}`` replaced by the project folder."""
    return {
        key: value.replace("{root}", str(root)) if isinstance(value, str) else value
        for key, value in tool_input.items()
    }


def load_reason(event_id: str) -> str:
    return (
        f'Ithaca: call load_protocols with {{"eventId": "{event_id}"}} first; mutating tools'
        " are blocked until this prompt's protocols are loaded."
    )


@pytest.fixture
def rule(governed, make_record):
    """Store a user protocol holding the given constraints."""

    def create(protocol_id: str, *constraints: dict, selector: dict | None = None) -> None:
        governed.protocols.create_protocol(
            make_record(protocol_id, selector=selector or {}, constraints=list(constraints)),
            actor="user",
        )

    return create


@pytest.fixture
def ready(hook, governed):
    """Admit a prompt and load its bundle, as a well-behaved agent does."""

    def admit_and_load(text: str = "Work on the feature.", session: str = "s1") -> str:
        event_id: str = hook.admit(text, session)
        governed.protocols.load_protocols({"eventId": event_id})
        return event_id

    return admit_and_load


@pytest.fixture
def decisions(journaled):
    return lambda: [event["payload"] for event in journaled("protocols.decision")]


@pytest.fixture
def ulysses_state(monkeypatch):
    """Stand in for the ulysses part's predicates: ``value`` is returned, or raised."""
    control = {"value": True}

    def is_active(conn, scope):
        if isinstance(control["value"], Exception):
            raise control["value"]
        return control["value"]

    from ithaca.ulysses import gate

    monkeypatch.setattr(gate, "is_active", is_active)
    monkeypatch.setattr(gate, "is_step_active", is_active)
    return control


def approval_status(governed, approval_id: str) -> str:
    status: str = governed.protocols.get_approval(approval_id)["status"]
    return status


# --- the strict gate -------------------------------------------------------------------


def test_mutating_call_without_an_admitted_prompt_is_denied_with_no_current_event(hook, decisions):
    answer = hook.write("notes.txt")

    assert answer.decision == "deny"
    assert hook.tool("Read", {"file_path": "notes.txt"}).decision == "allow"
    denied, allowed = decisions()
    assert (denied["reasonCode"], denied["eventId"], denied["effect"]) == (
        "NO_CURRENT_EVENT",
        None,
        "deny",
    )
    assert allowed["effect"] == "allow"


def test_session_without_a_prompt_is_not_gated_when_strict_is_off(hook):
    hook.configure("[protocols]\nstrict = false\n")

    assert hook.write("notes.txt").decision == "allow"


def test_strict_mode_denies_mutation_naming_the_event_until_the_bundle_is_loaded(
    hook, governed, decisions
):
    event_id = hook.admit()

    denied = hook.write("notes.txt")
    governed.protocols.load_protocols({"eventId": event_id})
    allowed = hook.write("notes.txt")

    assert denied.decision == "deny"
    assert denied.reason == load_reason(event_id)
    assert decisions()[0]["reasonCode"] == "BUNDLE_NOT_LOADED"
    assert allowed.raw == {}
    assert decisions()[1]["effect"] == "allow"


def test_console_script_denies_before_the_load_and_stays_silent_after_it(hook, governed):
    admitted = hook.process("UserPromptSubmit", hook.prompt_payload("Fix the typo."))
    event_id = hook.event_id_of(json.loads(admitted.stdout))
    write = hook.tool_payload(
        "Edit", {"file_path": "README.md", "old_string": "a", "new_string": "b"}
    )

    before = hook.process("PreToolUse", write)
    governed.protocols.load_protocols({"eventId": event_id})
    after = hook.process("PreToolUse", write)

    assert before.returncode == 0
    denial = json.loads(before.stdout)["hookSpecificOutput"]
    reason = denial.pop("permissionDecisionReason")
    assert denial == {"hookEventName": "PreToolUse", "permissionDecision": "deny"}
    assert reason.startswith("Refused by Ithaca policy [BUNDLE_NOT_LOADED], on purpose")
    assert gate_reason(reason) == load_reason(event_id)
    assert (after.returncode, after.stdout) == (0, "")


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Read", {"file_path": "README.md"}),
        ("Grep", {"pattern": "TODO"}),
        ("Glob", {"pattern": "**/*.py"}),
        ("WebFetch", {"url": "https://example.com", "prompt": "summarise"}),
        ("Bash", {"command": "git status && ls -la | head"}),
        ("TodoWrite", {"todos": []}),
    ],
)
def test_read_only_calls_are_allowed_before_the_bundle_is_loaded(tool, tool_input, hook):
    hook.admit()

    assert hook.tool(tool, tool_input).decision == "allow"


def test_a_new_prompt_needs_its_own_load(hook, ready):
    ready()
    second = hook.admit("Now something else.")

    answer = hook.write("notes.txt")

    assert answer.decision == "deny"
    assert answer.reason == load_reason(second)


def test_loading_an_older_event_of_the_session_does_not_count(hook, governed, journaled):
    older = hook.admit("First prompt.")
    current = hook.admit("Second prompt.")

    governed.protocols.load_protocols({"eventId": older})
    answer = hook.write("notes.txt")

    assert [e["subject"] for e in journaled("protocols.bundle_loaded")] == [older]
    assert answer.decision == "deny"
    assert answer.reason == load_reason(current)


def test_load_in_one_session_does_not_unlock_another(hook, ready):
    ready(session="s1")
    other = hook.admit("Parallel work.", session="s2")

    assert hook.write("notes.txt", session="s1").decision == "allow"
    assert hook.write("notes.txt", session="s2").reason == load_reason(other)


def test_protocol_outside_the_events_workflow_does_not_make_the_bundle_stale(
    hook, governed, ready, rule
):
    ready()
    revision = governed.store.connection().execute("SELECT revision FROM protocol_state")
    before = revision.fetchone()[0]

    rule("team.debug-only", selector={"workflow": "debugging"})

    after = governed.store.connection().execute("SELECT revision FROM protocol_state")
    assert after.fetchone()[0] > before
    assert hook.write("notes.txt").decision == "allow"


def test_matching_protocol_added_after_the_load_makes_the_bundle_stale(
    hook, governed, ready, rule, decisions
):
    event_id = ready()

    rule("team.coding-extra", selector={"workflow": "coding"})
    stale = hook.write("notes.txt")
    governed.protocols.load_protocols({"eventId": event_id})
    fresh = hook.write("notes.txt")

    assert stale.decision == "deny"
    assert event_id in stale.reason
    assert decisions()[0]["reasonCode"] == "BUNDLE_STALE"
    assert fresh.decision == "allow"


def test_protocol_file_outside_the_events_workflow_does_not_block_mutation(
    governed_dir, hook, ready, make_record
):
    ready()
    record = make_record("team.debug-only", selector={"workflow": "debugging"})
    path = governed_dir / ".ithaca" / "protocols" / "team.debug-only.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    accept(governed_dir)

    assert hook.write("notes.txt").decision == "allow"


def test_protocol_file_added_after_the_load_is_never_skipped(
    governed_dir, hook, governed, ready, make_record
):
    event_id = ready()
    record = make_record(
        "team.no-deploy", constraints=[{"kind": "deny_command", "commands": ["make deploy"]}]
    )
    path = governed_dir / ".ithaca" / "protocols" / "team.no-deploy.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    accept(governed_dir)

    before_load = hook.bash("make deploy")
    governed.protocols.load_protocols({"eventId": event_id})
    after_load = hook.bash("make deploy")

    assert before_load.decision == "deny"
    assert after_load.decision == "deny"
    assert "[team.no-deploy]" in after_load.reason


def test_broken_protocol_file_denies_mutating_calls_until_it_is_fixed(
    governed_dir, hook, ready, make_record
):
    ready()
    path = governed_dir / ".ithaca" / "protocols" / "team.review.json"
    path.write_text('{"id": "team.review", ', encoding="utf-8")
    accept(governed_dir)

    broken = hook.write("a.txt")
    reading = hook.tool("Read", {"file_path": "a.txt"})
    path.write_text(
        json.dumps(make_record("team.review", selector={"workflow": "chat"})), encoding="utf-8"
    )
    accept(governed_dir)
    fixed = hook.write("a.txt")

    assert broken.decision == "deny"
    assert "PROTOCOL_FILE_INVALID" in broken.reason
    assert reading.decision == "allow"
    assert fixed.decision == "allow"


# --- tool classes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("mcp__ithaca__load_protocols", {"eventId": "evt_01J9Z3V6Q2X8M4K7T1R5B0C9DE"}),
        ("mcp__ithaca__protocols", {"operation": "list"}),
        ("Bash", {"command": "ithaca protocols list --json"}),
    ],
)
def test_ithaca_tools_are_never_blocked(tool, tool_input, hook, rule):
    rule("team.lockdown", {"kind": "deny_tool", "tools": ["*"]})
    hook.admit()

    answer = hook.tool(tool, tool_input)

    assert answer.decision not in ("deny", "ask"), answer


def test_ithaca_mcp_calls_are_left_to_the_users_permission_rules(hook):
    """No ``allow`` and no rewrite: the server learns the session from the hook's ticket."""
    event_id = hook.admit()

    answer = hook.tool("mcp__ithaca__load_protocols", {"eventId": event_id})

    assert answer.raw == {}


def test_ithaca_command_mixed_with_another_command_is_judged_as_a_whole(hook):
    event_id = hook.admit()

    answer = hook.bash("ithaca protocols list && rm -rf src")

    assert answer.decision == "deny"
    assert answer.reason == load_reason(event_id)


@pytest.mark.parametrize("tool", ["FrobnicateWidget", "mcp__github__create_issue", "Task"])
def test_unknown_mcp_and_delegate_tools_count_as_mutating(tool, hook, decisions):
    event_id = hook.admit()

    answer = hook.tool(tool, {"anything": 1})

    assert answer.decision == "deny"
    assert answer.reason == load_reason(event_id)
    assert decisions()[0]["mutating"] is True


def test_read_only_tools_setting_makes_a_tool_non_mutating(hook):
    hook.configure('[protocols]\nread_only_tools = ["mcp__docs__*"]\n')
    hook.admit()

    assert hook.tool("mcp__docs__search", {"q": "hooks"}).decision == "allow"
    assert hook.tool("mcp__github__create_issue", {"title": "x"}).decision == "deny"


# --- typed constraints ----------------------------------------------------------------------


@pytest.mark.parametrize("effect", ["deny", "ask"])
@pytest.mark.parametrize(
    ("constraint", "tool", "tool_input"),
    [
        ({"kind": "deny_tool", "tools": ["Write"]}, "Write", {"file_path": "a.txt"}),
        ({"kind": "deny_tool", "classes": ["web"]}, "WebFetch", {"url": "https://x.test"}),
        ({"kind": "deny_tool", "tools": ["mcp__github__*"]}, "mcp__github__merge", {}),
        (
            {"kind": "deny_command", "commands": ["git push --force*"]},
            "Bash",
            {"command": "git push origin main --force-with-lease"},
        ),
        ({"kind": "deny_path", "paths": ["secrets/**"]}, "Write", {"file_path": "secrets/k"}),
    ],
    ids=["tool-name", "tool-class", "tool-glob", "command", "path"],
)
def test_each_constraint_kind_fires_with_its_effect(
    effect, constraint, tool, tool_input, hook, ready, rule, decisions
):
    rule("team.limit", dict(constraint, effect=effect, reason="The team limits this."))
    ready()

    answer = hook.tool(tool, tool_input)

    assert answer.decision == effect
    assert answer.reason == "[team.limit] The team limits this."
    decision = decisions()[-1]
    assert decision["effect"] == effect
    assert decision["reasonCode"] == f"CONSTRAINT_{effect.upper()}"
    assert decision["constraints"] == [
        {"protocolId": "team.limit", "index": 0, "kind": constraint["kind"], "result": effect}
    ]


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Edit", {"file_path": "a.txt", "old_string": "x", "new_string": "y"}),
        ("Edit", {"file_path": "src/secrets.py", "old_string": "x", "new_string": "y"}),
        ("Bash", {"command": "git push origin main"}),
        ("Bash", {"command": "git log --grep push --force"}),
        ("Bash", {"command": "echo git push --force"}),
        ("Read", {"file_path": "secrets/prod.key"}),
    ],
)
def test_constraints_that_do_not_match_leave_the_call_alone(tool, tool_input, hook, ready, rule):
    rule(
        "team.limit",
        {"kind": "deny_tool", "tools": ["Write"], "classes": ["web"]},
        {"kind": "deny_command", "commands": ["git push --force*"]},
        {"kind": "deny_path", "paths": ["secrets/**"]},
    )
    ready()

    assert hook.tool(tool, tool_input).decision == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "git push --force",
        "cd app && git push --force origin main",
        "bash -c 'git push --force'",
        'sh -c "git fetch; git push --force"',
        "eval 'git push --force'",
        "echo $(git push --force)",
        "echo `git push --force`",
        "sudo git push --force",
        "sudo -u deploy git push --force",
        "env FOO=1 git push --force",
        "FOO=1 git push --force",
        "nohup git push --force &",
        "timeout 30 git push --force",
        "/usr/bin/git push --force",
        "true || git push --force",
    ],
)
def test_deny_command_sees_through_wrappers_and_nesting(command, hook, ready, rule, decisions):
    rule("team.no-force", {"kind": "deny_command", "commands": ["git push --force*"]})
    ready()

    answer = hook.bash(command)

    assert answer.decision == "deny", command
    assert answer.reason.startswith("[team.no-force] ")
    assert decisions()[-1]["reasonCode"] == "CONSTRAINT_DENY"


@pytest.mark.parametrize(
    "command",
    ["git push --force 'unbalanced", "$GIT push origin", "ls 'nothing to do with git"],
)
def test_unparseable_command_fires_every_deny_command(command, hook, ready, rule, decisions):
    rule("team.no-force", {"kind": "deny_command", "commands": ["git push --force*"]})
    rule("team.no-deploy", {"kind": "deny_command", "commands": ["make deploy"]})
    ready()

    answer = hook.bash(command)

    assert answer.decision == "deny"
    decision = decisions()[-1]
    assert decision["reasonCode"] == "UNPARSEABLE_COMMAND"
    assert sorted(c["protocolId"] for c in decision["constraints"]) == [
        "team.no-deploy",
        "team.no-force",
    ]


def test_deny_command_through_the_console_script(hook, ready, rule):
    rule("team.no-force", {"kind": "deny_command", "commands": ["git push --force*"]})
    ready()

    result = hook.process(
        "PreToolUse", hook.tool_payload("Bash", {"command": "bash -c 'git push --force'"})
    )

    assert result.returncode == 0
    output = json.loads(result.stdout)["hookSpecificOutput"]
    assert output["permissionDecision"] == "deny"
    assert gate_reason(output["permissionDecisionReason"]).startswith("[team.no-force] ")


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Write", {"file_path": "secrets/prod.key"}),
        ("Write", {"file_path": "{root}/secrets/prod.key"}),
        ("Write", {"file_path": "config/.env"}),
        ("Bash", {"command": "echo token > secrets/token"}),
        ("Bash", {"command": "rm secrets/*.key"}),
        ("Bash", {"command": "cp notes.txt $TARGET"}),
        ("Bash", {"command": 'echo hi > "$OUT"'}),
        ("Bash", {"command": "cd secrets && touch new"}),
        ("Bash", {"command": "sed -i s/a/b/ config/.env"}),
        (
            "apply_patch",
            {"input": "*** Begin Patch\n*** Update File: secrets/a.txt\n@@\n-a\n+b\n*** End Patch"},
        ),
    ],
)
def test_deny_path_matches_globs_variables_and_every_write_target(
    tool, tool_input, governed_dir, hook, ready, rule
):
    rule("team.no-secrets", {"kind": "deny_path", "paths": ["secrets/**", ".env"]})
    ready()
    tool_input = rooted(tool_input, governed_dir)

    answer = hook.tool(tool, tool_input)

    assert answer.decision == "deny", tool_input
    assert answer.reason.startswith("[team.no-secrets] ")


@pytest.mark.parametrize(
    "command", ["make deploy", "echo hi > docs/notes.md", "cat secrets/prod.key"]
)
def test_deny_path_leaves_other_targets_and_reads_alone(command, hook, ready, rule):
    rule("team.no-secrets", {"kind": "deny_path", "paths": ["secrets/**"]})
    ready()

    assert hook.bash(command).decision == "allow"


@pytest.mark.parametrize(
    ("value", "expect", "decision"),
    [
        (True, True, "allow"),
        (False, True, "deny"),
        (RuntimeError("state unavailable"), True, "deny"),
        (False, False, "allow"),
        (True, False, "deny"),
        (RuntimeError("state unavailable"), False, "deny"),
    ],
)
def test_require_state_compares_the_predicate_with_expect_and_a_raise_is_unmet(
    value, expect, decision, hook, ready, rule, ulysses_state, decisions
):
    rule("team.needs-step", {"kind": "require_state", "state": "ulysses.active", "expect": expect})
    ready()
    ulysses_state["value"] = value

    answer = hook.write("src/app.py")

    assert answer.decision == decision
    if decision == "deny":
        assert decisions()[-1]["reasonCode"] == "STATE_REQUIRED"


def test_require_state_with_ask_effect_asks(hook, ready, rule, ulysses_state):
    rule("team.needs-step", {"kind": "require_state", "state": "ulysses.active", "effect": "ask"})
    ready()
    ulysses_state["value"] = False

    assert hook.write("src/app.py").decision == "ask"


def test_require_state_scopes_to_mutating_calls_unless_told_any(hook, ready, rule, ulysses_state):
    rule("team.mutating", {"kind": "require_state", "state": "ulysses.active"})
    ready()
    ulysses_state["value"] = False
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "allow"

    rule("team.any", {"kind": "require_state", "state": "ulysses.active", "for": "any"})
    ready("Again.")
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "deny"


def test_require_state_for_classes_covers_only_those_classes(hook, ready, rule, ulysses_state):
    rule("team.edits", {"kind": "require_state", "state": "ulysses.active", "for": ["edit"]})
    ready()
    ulysses_state["value"] = False

    assert hook.write("a.txt").decision == "deny"
    assert hook.bash("touch a.txt").decision == "allow"


def test_debugging_workflow_denies_mutation_while_ulysses_state_is_unconfirmed(
    hook, governed, decisions
):
    event_id = hook.admit("::workflow debugging\nThe cache misses.")
    governed.protocols.load_protocols({"eventId": event_id})

    answer = hook.write("src/cache.py")

    assert answer.decision == "deny"
    assert answer.reason.startswith("[ithaca.debugging.ulysses] ")
    assert decisions()[-1]["reasonCode"] == "STATE_REQUIRED"
    assert hook.tool("Read", {"file_path": "src/cache.py"}).decision == "allow"
    assert hook.tool("Task", {"prompt": "gather logs"}).decision == "allow"


# --- combining ---------------------------------------------------------------------------


def test_deny_wins_over_ask_and_both_reasons_are_given(hook, ready, rule, decisions):
    rule("team.asks", {"kind": "deny_tool", "tools": ["Write"], "effect": "ask", "reason": "Ask."})
    rule("team.denies", {"kind": "deny_path", "paths": ["*.lock"], "reason": "No lock files."})
    ready()

    answer = hook.write("poetry.lock")

    assert answer.decision == "deny"
    assert "[team.denies] No lock files." in answer.reason.splitlines()
    assert decisions()[-1]["reasonCode"] == "CONSTRAINT_DENY"


def test_ask_wins_over_allow(hook, ready, rule):
    rule("team.asks", {"kind": "deny_tool", "tools": ["Write"], "effect": "ask", "reason": "Ask."})
    ready()

    assert hook.write("a.txt").decision == "ask"
    assert hook.tool("Edit", {"file_path": "a.txt", "old_string": "a", "new_string": "b"}) == (
        "allow",
        None,
        {},
    )


def test_strict_gate_reason_comes_before_constraint_reasons(hook, rule):
    rule("team.denies", {"kind": "deny_tool", "tools": ["Write"], "reason": "No writes."})
    event_id = hook.admit()

    answer = hook.write("a.txt")

    assert answer.reason.splitlines() == [load_reason(event_id), "[team.denies] No writes."]


def test_constraints_apply_without_strict_mode(hook, rule):
    hook.configure("[protocols]\nstrict = false\n")
    rule("team.no-force", {"kind": "deny_command", "commands": ["git push --force*"]})
    hook.admit()

    assert hook.bash("git push --force").decision == "deny"
    assert hook.bash("git push").decision == "allow"


CONSTRAINT_SHAPES = {
    "tool-hit": {"kind": "deny_tool", "tools": ["Write"]},
    "tool-miss": {"kind": "deny_tool", "tools": ["Edit"]},
    "path-hit": {"kind": "deny_path", "paths": ["*.txt"]},
    "path-miss": {"kind": "deny_path", "paths": ["*.md"]},
}
constraint_lists = st.lists(
    st.tuples(st.sampled_from(sorted(CONSTRAINT_SHAPES)), st.sampled_from(["deny", "ask"])),
    max_size=4,
)


@pytest.fixture
def two_records(rule):
    """Two constraint-free user records the property test rewrites per example."""
    rule("team.first")
    rule("team.second")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    first=constraint_lists,
    second=constraint_lists,
    priorities=st.tuples(st.integers(-1000, 1000), st.integers(-1000, 1000)),
)
def test_most_severe_fired_constraint_wins_whatever_the_priorities(
    first, second, priorities, hook, governed, ready, two_records
):
    for protocol_id, chosen, priority in (
        ("team.first", first, priorities[0]),
        ("team.second", second, priorities[1]),
    ):
        constraints = [
            dict(CONSTRAINT_SHAPES[shape], effect=effect, reason=f"{shape} {effect}.")
            for shape, effect in chosen
        ]
        governed.protocols.update_protocol(
            protocol_id, {"constraints": constraints, "priority": priority}, actor="user"
        )
    ready()

    answer = hook.write("notes.txt")

    fired = [
        (protocol_id, f"{shape} {effect}.", effect)
        for protocol_id, chosen in (("team.first", first), ("team.second", second))
        for shape, effect in chosen
        if shape.endswith("-hit")
    ]
    effects = {effect for _, _, effect in fired}
    expected = "deny" if "deny" in effects else "ask" if "ask" in effects else "allow"
    assert answer.decision == expected
    if expected != "allow":
        lines = answer.reason.splitlines()
        for protocol_id, reason, _ in fired:
            assert f"[{protocol_id}] {reason}" in lines


# --- approvals -----------------------------------------------------------------------------

RELEASE = {"kind": "require_approval", "commands": ["npm publish*"]}


def test_require_approval_denies_with_the_exact_approve_instruction(
    hook, governed, ready, rule, decisions
):
    rule("team.release", RELEASE)
    event_id = ready()

    answer = hook.bash("npm publish --tag next")

    assert answer.decision == "deny"
    last_line = answer.reason.splitlines()[-1]
    found = APPROVE.search(last_line)
    assert found is not None, answer.reason
    assert last_line.startswith("This action needs the user's approval (protocol team.release).")
    approval = governed.protocols.get_approval(found.group(1))
    assert approval["status"] == "pending"
    assert approval["hostSessionId"] == "s1"
    assert approval["eventId"] == event_id
    assert approval["protocolIds"] == ["team.release"]
    decision = decisions()[-1]
    assert decision["reasonCode"] == "APPROVAL_REQUIRED"
    assert (decision["approvalId"], decision["approvalAction"]) == (found.group(1), "requested")
    assert decision["actionDigest"] == approval["actionDigest"]


def test_identical_call_reuses_the_pending_request(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    ready()

    first = APPROVE.search(hook.bash("npm publish").reason).group(1)
    second = APPROVE.search(hook.bash("npm publish").reason).group(1)

    assert first == second
    assert len(governed.protocols.list_approvals(include_all=True)) == 1


def test_granted_approval_allows_the_identical_call_exactly_once(
    hook, governed, ready, rule, decisions, journaled
):
    rule("team.release", RELEASE)
    ready()
    approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)

    granted = governed.protocols.grant_approval(approval_id)
    allowed = hook.bash("npm publish")
    again = hook.bash("npm publish")

    assert granted["status"] == "granted"
    assert [e["subject"] for e in journaled("protocols.approval_granted")] == [approval_id]
    assert allowed.raw == {}
    assert approval_status(governed, approval_id) == "consumed"
    assert decisions()[1]["approvalId"] == approval_id
    assert decisions()[1]["approvalAction"] == "consumed"
    assert again.decision == "deny"
    renewed = APPROVE.search(again.reason).group(1)
    assert renewed != approval_id


def test_changed_command_needs_a_new_approval(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    ready()
    approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)
    governed.protocols.grant_approval(approval_id)

    changed = hook.bash("npm publish --tag latest")

    assert changed.decision == "deny"
    assert APPROVE.search(changed.reason).group(1) != approval_id
    assert approval_status(governed, approval_id) == "granted"


def test_same_command_from_another_folder_needs_a_new_approval(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    ready()
    approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)
    governed.protocols.grant_approval(approval_id)
    package = hook.root / "packages" / "web"
    package.mkdir(parents=True)

    elsewhere = hook.bash("npm publish", cwd=package)

    assert elsewhere.decision == "deny"
    assert APPROVE.search(elsewhere.reason).group(1) != approval_id
    assert approval_status(governed, approval_id) == "granted"


def test_changed_edit_content_needs_a_new_approval(hook, governed, ready, rule):
    rule("team.changelog", {"kind": "require_approval", "paths": ["CHANGELOG.md"]})
    ready()
    edit = {"file_path": "CHANGELOG.md", "old_string": "## 1.0", "new_string": "## 1.1"}
    approval_id = APPROVE.search(hook.tool("Edit", edit).reason).group(1)
    governed.protocols.grant_approval(approval_id)

    changed = hook.tool("Edit", dict(edit, new_string="## 2.0"))
    identical = hook.tool("Edit", edit)

    assert changed.decision == "deny"
    assert identical.decision == "allow"
    assert approval_status(governed, approval_id) == "consumed"


@pytest.mark.parametrize(
    ("constraint", "tool", "tool_input"),
    [
        (
            {"kind": "require_approval", "commands": ["terraform apply*"]},
            "Bash",
            {"command": "terraform apply -auto-approve"},
        ),
        (
            {"kind": "require_approval", "paths": ["migrations/**"]},
            "Write",
            {"file_path": "migrations/0042_drop_users.sql"},
        ),
        (
            {"kind": "require_approval", "tools": ["mcp__stripe__*"]},
            "mcp__stripe__refund",
            {"charge": "ch_1"},
        ),
    ],
    ids=["commands", "paths", "tools"],
)
def test_require_approval_fires_on_commands_paths_and_tools(
    constraint, tool, tool_input, hook, governed, ready, rule
):
    rule("team.gated", constraint)
    ready()

    answer = hook.tool(tool, tool_input)

    assert answer.decision == "deny"
    approval_id = APPROVE.search(answer.reason).group(1)
    assert governed.protocols.get_approval(approval_id)["protocolIds"] == ["team.gated"]


def test_ask_on_claude_stores_no_approval_request(hook, governed, ready, rule):
    rule("team.confirm", {"kind": "deny_command", "commands": ["npm *"], "effect": "ask"})
    ready()

    assert hook.bash("npm install").decision == "ask"
    assert governed.protocols.list_approvals(include_all=True) == []


def test_approval_is_bound_to_its_host_session(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    ready(session="s1")
    ready(session="s2")
    approval_id = APPROVE.search(hook.bash("npm publish", session="s1").reason).group(1)
    governed.protocols.grant_approval(approval_id)

    assert hook.bash("npm publish", session="s2").decision == "deny"
    assert approval_status(governed, approval_id) == "granted"


def test_expired_approval_does_not_count(hook, make_record):
    hook.configure("[protocols]\napproval_ttl_seconds = 1\n")
    project = open_project(hook.root)
    try:
        service = project.protocols
        service.create_protocol(make_record("team.release", constraints=[RELEASE]), actor="user")
        service.load_protocols({"eventId": hook.admit()})
        approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)
        granted = service.grant_approval(approval_id)
        lifetime = parse(granted["expiresAt"]) - parse(granted["grantedAt"])
        assert lifetime.total_seconds() == 1
        project.store.connection().execute(
            "UPDATE protocol_approvals SET expires_at = '2000-01-01T00:00:00.000Z' WHERE id = ?",
            (approval_id,),
        )

        answer = hook.bash("npm publish")

        assert answer.decision == "deny"
        assert APPROVE.search(answer.reason).group(1) != approval_id
        assert service.get_approval(approval_id)["status"] == "granted"
    finally:
        project.close()


def test_approval_never_overrides_a_deny(hook, governed, ready, rule, decisions):
    rule("team.release", RELEASE)
    rule("team.no-dry", {"kind": "deny_command", "commands": ["npm publish --force*"]})
    ready()
    first = hook.bash("npm publish --force")
    approval_id = APPROVE.search(first.reason).group(1)
    governed.protocols.grant_approval(approval_id)

    answer = hook.bash("npm publish --force")

    assert answer.decision == "deny"
    assert decisions()[-1]["reasonCode"] == "CONSTRAINT_DENY"
    assert approval_status(governed, approval_id) == "granted"


def test_approval_is_not_consumed_when_another_gate_denies(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    ready()
    command = "npm publish && echo done > .ithaca/published"
    approval_id = APPROVE.search(hook.bash(command).reason).group(1)
    governed.protocols.grant_approval(approval_id)

    answer = hook.bash(command)

    assert answer.decision == "deny"
    assert approval_status(governed, approval_id) == "granted"


def test_granted_approval_turns_ask_into_allow_for_that_action(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    rule("team.confirm", {"kind": "deny_command", "commands": ["npm *"], "effect": "ask"})
    ready()
    approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)
    governed.protocols.grant_approval(approval_id)

    assert hook.bash("npm publish").decision == "allow"
    assert hook.bash("npm install").decision == "ask"


def test_granting_twice_or_an_unknown_approval_is_refused(hook, governed, ready, rule):
    rule("team.release", RELEASE)
    ready()
    approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)
    governed.protocols.grant_approval(approval_id)

    with pytest.raises(Refused) as used:
        governed.protocols.grant_approval(approval_id)
    with pytest.raises(NotFound) as missing:
        governed.protocols.grant_approval("apr_ZZZZZZZZ")

    assert used.value.code == "APPROVAL_USED"
    assert missing.value.code == "APPROVAL_NOT_FOUND"


def at_once(hook, payload: dict[str, Any], count: int) -> list[str]:
    """Run ``count`` hook processes that all hold the same call before any answer is read."""
    processes = [
        subprocess.Popen(
            [str(hook.script), "claude", "PreToolUse"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=hook.root,
        )
        for _ in range(count)
    ]
    for process in processes:
        assert process.stdin is not None
        process.stdin.write(json.dumps(payload))
        process.stdin.close()
    answers = []
    for process in processes:
        assert process.stdout is not None
        answers.append(process.stdout.read())
        assert process.wait(timeout=120) == 0
    return answers


def test_concurrent_identical_calls_consume_one_approval_once(
    hook, governed, ready, rule, decisions
):
    rule("team.release", RELEASE)
    ready()
    approval_id = APPROVE.search(hook.bash("npm publish").reason).group(1)
    governed.protocols.grant_approval(approval_id)
    logged = len(decisions())
    outputs = at_once(hook, hook.tool_payload("Bash", {"command": "npm publish"}), 4)

    assert outputs.count("") == 1, outputs
    assert approval_status(governed, approval_id) == "consumed"
    assert len(decisions()) == logged + 4  # the calls that lost are logged as denials too
    assert [d["effect"] for d in decisions()[logged:]].count("allow") == 1


# --- internal errors ----------------------------------------------------------------------


@pytest.mark.parametrize("error", [ValueError("bad constraint"), KeyError("kind")])
def test_enforcement_error_denies_only_mutating_calls(error, hook, ready, monkeypatch, decisions):
    ready()

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(constraints_module, "evaluate", broken)

    assert hook.write("a.txt").decision == "deny"
    assert decisions()[-1]["reasonCode"] == "ENFORCEMENT_ERROR"
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "allow"


@pytest.mark.parametrize(
    "error", [RuntimeError("unexpected"), AttributeError("no such thing"), AssertionError()]
)
def test_unexpected_exception_still_denies_mutating_calls_and_answers(
    error, hook, ready, monkeypatch
):
    ready()

    def broken(*args, **kwargs):
        raise error

    monkeypatch.setattr(constraints_module, "evaluate", broken)

    assert hook.write("a.txt").decision == "deny"
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "allow"


def test_missing_store_denies_only_mutating_calls(hook):
    runtime = hook.root / ".ithaca" / ".runtime"
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        (runtime / name).unlink(missing_ok=True)

    assert hook.write("a.txt").decision == "deny"
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "allow"


def test_invalid_configuration_denies_only_mutating_calls(hook, ready):
    ready()
    hook.configure("[protocols]\nstrickt = false\n")

    answer = hook.write("a.txt")

    assert answer.decision == "deny"
    assert "INVALID_CONFIG" in answer.reason
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "allow"


def test_older_schema_denies_mutating_calls_with_state_needs_migration(hook, ready, governed):
    ready()
    governed.store.connection().execute("PRAGMA user_version = 1")

    answer = hook.write("a.txt")

    assert answer.decision == "deny"
    assert "ithaca doctor --repair" in answer.reason
    assert hook.tool("Read", {"file_path": "a.txt"}).decision == "allow"


# --- the decision log -----------------------------------------------------------------------


def test_every_pre_tool_use_appends_exactly_one_decision_with_its_latency(
    hook, governed, rule, journaled
):
    rule("team.no-force", {"kind": "deny_command", "commands": ["git push --force*"]})
    hook.write("before-any-prompt.txt")
    event_id = hook.admit()
    calls = [
        ("Read", {"file_path": "a.txt"}),
        ("Write", {"file_path": "a.txt"}),
        ("mcp__ithaca__load_protocols", {"eventId": event_id}),
        ("Bash", {"command": "git push --force"}),
        ("Write", {"file_path": ".ithaca/config.toml"}),
    ]
    for tool, tool_input in calls:
        hook.tool(tool, tool_input)
    governed.protocols.load_protocols({"eventId": event_id})
    hook.write("after-load.txt")

    logged = journaled("protocols.decision")
    assert len(logged) == len(calls) + 2
    assert {entry["actor"] for entry in logged} == {"hook"}
    for entry in logged:
        latency = entry["payload"]["latencyUs"]
        assert type(latency) is int and latency >= 0
        assert entry["payload"]["hostSessionId"] == "s1"
    assert [entry["payload"]["tool"] for entry in logged[1:6]] == [tool for tool, _ in calls]
    assert logged[0]["payload"]["eventId"] is None
    governed_calls = [entry for entry in logged[1:] if entry["payload"]["toolClass"] != "ithaca"]
    assert {entry["payload"]["eventId"] for entry in governed_calls} == {event_id}
    assert logged[1]["payload"]["mutating"] is False
    assert logged[2]["payload"]["toolClass"] == "edit"
    assert logged[3]["payload"]["toolClass"] == "ithaca"
    assert logged[-1]["payload"]["effect"] == "allow"


@pytest.mark.parametrize(
    ("protocol", "command"),
    [
        (None, "echo {token} > out.txt"),
        ({"kind": "deny_command", "commands": ["git push --force*"]}, "git push --force {token}"),
        ({"kind": "deny_path", "paths": ["secrets/**"]}, "cp a secrets/{token}"),
        (RELEASE, "npm publish {token}"),
        ({"kind": "deny_command", "commands": ["make*"]}, "make '{token}"),
    ],
    ids=["allowed", "deny-command", "deny-path", "approval", "unparseable"],
)
def test_decisions_never_contain_command_text(protocol, command, hook, governed, ready, rule):
    if protocol is not None:
        rule("team.limit", protocol)
    ready()
    token = f"tok{uuid.uuid4().hex}"

    hook.bash(command.format(token=token))

    rows = (
        governed.store.connection()
        .execute("SELECT payload FROM journal WHERE kind = 'protocols.decision'")
        .fetchall()
    )
    assert len(rows) == 1
    assert token not in rows[0][0]


# --- the kernel guard -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("Write", {"file_path": ".ithaca/protocols/team.sneaky.json", "content": "{}"}),
        ("Write", {"file_path": "{root}/.ithaca/config.toml", "content": ""}),
        ("Edit", {"file_path": ".ithaca/config.toml", "old_string": "a", "new_string": "b"}),
        ("Bash", {"command": "echo '[protocols]' > .ithaca/config.toml"}),
        ("Bash", {"command": "printf x >> .ithaca/.runtime/state.db"}),
        ("Bash", {"command": "rm -rf .ithaca"}),
        ("Bash", {"command": "cd .ithaca && rm config.toml"}),
        ("Bash", {"command": "sqlite3 .ithaca/.runtime/state.db 'DELETE FROM journal'"}),
    ],
)
def test_kernel_guard_denies_writes_under_the_state_root(
    tool, tool_input, governed_dir, hook, ready
):
    ready()
    tool_input = rooted(tool_input, governed_dir)

    answer = hook.tool(tool, tool_input)

    assert answer.decision == "deny", tool_input
    assert ".ithaca" in answer.reason or "state database" in answer.reason


@pytest.mark.parametrize(
    "command",
    [
        "mv .ithaca gone",
        "mv .ithaca/config.toml /tmp/config.toml",
        "dd if=/dev/zero of=.ithaca/config.toml",
        "git checkout -- .ithaca/config.toml",
    ],
)
def test_kernel_guard_denies_moving_or_overwriting_state_through_other_commands(
    command, hook, ready
):
    ready()

    answer = hook.bash(command)

    assert answer.decision == "deny", command
    assert ".ithaca" in answer.reason


def test_kernel_guard_lets_the_agent_read_state_files(hook, ready):
    ready()

    assert hook.tool("Read", {"file_path": ".ithaca/config.toml"}).decision == "allow"
    assert hook.bash("cat .ithaca/protocols/README.md").decision == "allow"


@pytest.mark.parametrize(
    "command",
    [
        "ithaca protocols approve apr_7K2M9QXD",
        "python -m ithaca protocols approve apr_7K2M9QXD",
        "python3 -m ithaca protocols approve apr_7K2M9QXD",
        "bash -c 'ithaca protocols approve apr_7K2M9QXD'",
        "FOO=1 ithaca protocols approve apr_7K2M9QXD",
        "env FOO=1 ithaca protocols approve apr_7K2M9QXD",
        "uv run ithaca protocols approve apr_7K2M9QXD",
        "/opt/venv/bin/ithaca protocols approve apr_7K2M9QXD",
        "echo yes | ithaca protocols approve apr_7K2M9QXD",
        "ithaca protocols disable team.release",
        "ithaca protocols create --file rule.json",
    ],
)
def test_kernel_guard_denies_user_only_commands_however_spelled(command, hook, ready):
    ready()

    answer = hook.bash(command)

    assert answer.decision == "deny", command
    assert "ithaca protocols" in answer.reason


def test_kernel_guard_denies_self_approval_even_before_any_prompt(hook):
    hook.configure("[protocols]\nstrict = false\n")

    assert hook.bash("ithaca protocols approve apr_7K2M9QXD").decision == "deny"


def test_concurrent_identical_requests_all_name_the_one_stored_approval(
    hook, governed, ready, rule
):
    rule("team.release", RELEASE)
    ready()
    answers = at_once(hook, hook.tool_payload("Bash", {"command": "npm publish"}), 6)
    reasons = [json.loads(a)["hookSpecificOutput"]["permissionDecisionReason"] for a in answers]
    named = {APPROVE.search(reason).group(1) for reason in reasons}

    stored = governed.store.connection().execute("SELECT id FROM protocol_approvals").fetchall()
    assert [row[0] for row in stored] == sorted(named)
    assert len(named) == 1


# --- verifying the cached bundle's rows ---------------------------------------------------


def test_a_row_edited_behind_ithaca_is_caught_even_after_the_rows_were_verified(
    hook, ready, rule, governed, decisions
):
    rule("team.notes", {"kind": "deny_path", "paths": ["secrets/**"]})
    ready()
    assert hook.write("a.txt").decision == "allow"  # verifies the rows, keeps a fingerprint
    assert hook.write("b.txt").decision == "allow"  # the same rows: not verified again
    with governed.store.write() as tx:
        tx.execute("UPDATE protocols SET name = 'Renamed behind Ithaca' WHERE id = 'team.notes'")

    assert hook.write("c.txt").decision == "deny"
    assert decisions()[-1]["reasonCode"] == "BUNDLE_UNAVAILABLE"


def test_the_verified_fingerprint_is_kept_with_the_bundle_cache(hook, ready, governed):
    ready()
    hook.write("a.txt")
    hook.write("b.txt")
    (cached,) = (
        governed.store.connection()
        .execute("SELECT bundle_ids_json FROM protocol_sessions WHERE host_session_id = 's1'")
        .fetchone()
    )
    kept = json.loads(cached)
    assert set(kept) == {"ids", "verified"} and len(kept["verified"]) == 64
