from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, Refused
from ithaca.protocols.overrides import check_override
from ithaca.protocols.validate import record_hash, validate_record

STATES = frozenset({"ulysses.step_active", "ultragoal.pursuing"})


def record(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": "team.review-first",
        "name": "Review first",
        "description": "Review the diff before reporting.",
        "priority": 100,
        "selector": {"workflow": "coding"},
        "rules": ["Review your diff."],
    }
    base.update(changes)
    return {key: value for key, value in base.items() if value is not ...}


def validate(raw: object, **options: Any) -> dict[str, Any]:
    options.setdefault("workflows", frozenset({"release"}))
    options.setdefault("known_states", STATES)
    return validate_record(raw, **options)


def rejected(raw: object, code: str, pointer: str | None = None, **options: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        validate(raw, **options)
    assert caught.value.code == code
    if pointer is not None:
        assert caught.value.details["pointer"] == pointer
    assert caught.value.details["problem"]
    return caught.value


def with_constraint(constraint: object) -> dict[str, Any]:
    return record(constraints=[constraint])


# --- the record as a whole ---------------------------------------------------------------


def test_minimal_record_gets_enabled_and_empty_lists_filled_in() -> None:
    assert validate(record()) == {
        "id": "team.review-first",
        "name": "Review first",
        "description": "Review the diff before reporting.",
        "enabled": True,
        "priority": 100,
        "selector": {"workflow": "coding"},
        "rules": ["Review your diff."],
        "constraints": [],
        "tags": [],
    }


def test_validated_record_does_not_share_lists_with_the_input() -> None:
    raw = record(tags=["core"], selector={"workflow": ["coding", "release"]})
    normal = validate(raw)
    raw["tags"].append("later")
    raw["selector"]["workflow"].append("chat")
    assert normal["tags"] == ["core"]
    assert normal["selector"]["workflow"] == ["coding", "release"]


def test_record_that_is_not_an_object_is_invalid_field() -> None:
    rejected(["team.x"], "INVALID_FIELD", "")


def test_unknown_top_level_field_is_refused() -> None:
    rejected(record(rule=["typo"]), "UNKNOWN_FIELD", "/rule")


def test_caller_cannot_set_scope_or_source() -> None:
    rejected(record(scope="base"), "UNKNOWN_FIELD", "/scope")
    rejected(record(source="seed"), "UNKNOWN_FIELD", "/source")


def test_trusted_caller_may_carry_a_scope_but_only_base_or_user() -> None:
    assert validate(record(scope="user"), allow_reserved=True)["scope"] == "user"
    rejected(record(scope="global"), "INVALID_FIELD", "/scope", allow_reserved=True)


@pytest.mark.parametrize("field", ["id", "name", "description", "priority", "selector", "rules"])
def test_missing_required_field_is_invalid_field(field: str) -> None:
    error = rejected(record(**{field: ...}), "INVALID_FIELD", f"/{field}")
    assert error.details["problem"] == "MISSING"


def test_enabled_must_be_a_boolean() -> None:
    rejected(record(enabled=1), "INVALID_FIELD", "/enabled")
    assert validate(record(enabled=False))["enabled"] is False


# --- id ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad_id",
    [
        "review",
        "Team.review",
        "team..review",
        "team.review.",
        "team.-x",
        "1team.x",
        "team.review\n",
        "team.rév",
        "t." + "a" * 99,
    ],
)
def test_malformed_protocol_id_is_refused(bad_id: str) -> None:
    rejected(record(id=bad_id), "INVALID_PROTOCOL_ID", "/id")


def test_protocol_id_of_exactly_100_characters_is_accepted() -> None:
    protocol_id = "t." + "a" * 98
    assert validate(record(id=protocol_id))["id"] == protocol_id


def test_non_string_id_is_invalid_field() -> None:
    rejected(record(id=7), "INVALID_FIELD", "/id")


def test_new_ithaca_id_is_refused_as_reserved_namespace() -> None:
    with pytest.raises(Refused) as caught:
        validate(record(id="ithaca.coding.mine"))
    assert caught.value.code == "RESERVED_NAMESPACE"


def test_reserved_id_is_accepted_for_trusted_callers() -> None:
    assert validate(record(id="ithaca.coding.mine"), allow_reserved=True)["id"] == (
        "ithaca.coding.mine"
    )


# --- name and description ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("name", ""),
        ("name", "   "),
        ("name", "n" * 121),
        ("name", 5),
        ("description", ""),
        ("description", "d" * 2001),
        ("description", None),
    ],
)
def test_name_and_description_must_be_non_empty_bounded_text(field: str, value: object) -> None:
    rejected(record(**{field: value}), "INVALID_FIELD", f"/{field}")


# --- priority ----------------------------------------------------------------------------


@pytest.mark.parametrize("priority", [-1001, 1001, 10**9, 1.5])
def test_priority_outside_the_integer_range_is_refused(priority: object) -> None:
    rejected(record(priority=priority), "PRIORITY_OUT_OF_RANGE", "/priority")


@pytest.mark.parametrize("priority", [True, False, "5", None])
def test_bool_or_non_number_priority_is_invalid_field(priority: object) -> None:
    rejected(record(priority=priority), "INVALID_FIELD", "/priority")


@pytest.mark.parametrize("priority", [-1000, 0, 1000])
def test_priority_bounds_are_inclusive(priority: int) -> None:
    assert validate(record(priority=priority))["priority"] == priority


# --- rules -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rules", "pointer"),
    [
        ([], "/rules"),
        ([""], "/rules/0"),
        (["ok", "  "], "/rules/1"),
        (["ok", 3], "/rules/1"),
        (["r"] * 51, "/rules"),
        (["r" * 2001], "/rules/0"),
    ],
)
def test_rules_must_be_one_to_fifty_non_empty_bounded_strings(
    rules: list[object], pointer: str
) -> None:
    rejected(record(rules=rules), "EMPTY_RULES", pointer)


def test_rules_that_are_not_a_list_are_invalid_field() -> None:
    rejected(record(rules="Review your diff."), "INVALID_FIELD", "/rules")


# --- selector ----------------------------------------------------------------------------


def test_typoed_selector_key_is_refused_not_ignored() -> None:
    error = rejected(record(selector={"workfow": "coding"}), "UNKNOWN_SELECTOR_KEY")
    assert error.details["pointer"] == "/selector/workfow"


def test_event_field_names_are_not_selector_keys() -> None:
    rejected(record(selector={"kind": "command"}), "UNKNOWN_SELECTOR_KEY", "/selector/kind")


def test_selector_must_be_an_object() -> None:
    rejected(record(selector=["workflow"]), "INVALID_FIELD", "/selector")


@pytest.mark.parametrize(
    ("selector", "pointer"),
    [
        ({"connector": "claude"}, "/selector/connector"),
        ({"connector": "Claude-Code"}, "/selector/connector"),
        ({"messageKind": "chat"}, "/selector/messageKind"),
        ({"workflow": "review"}, "/selector/workflow"),
        ({"workflow": ["coding", "Coding"]}, "/selector/workflow/1"),
        ({"task": ""}, "/selector/task"),
        ({"task": "t" * 129}, "/selector/task"),
        ({"task": "fix\nbug"}, "/selector/task"),
        ({"userId": "dev\x7f"}, "/selector/userId"),
        ({"task": []}, "/selector/task"),
        ({"task": ["a", "a"]}, "/selector/task/1"),
        ({"task": ["a", 1]}, "/selector/task/1"),
        ({"task": 7}, "/selector/task"),
        ({"task": None}, "/selector/task"),
    ],
)
def test_bad_selector_values_are_refused(selector: dict[str, object], pointer: str) -> None:
    rejected(record(selector=selector), "INVALID_SELECTOR_VALUE", pointer)


def test_unknown_workflow_is_named_as_such() -> None:
    error = rejected(record(selector={"workflow": "relase"}), "INVALID_SELECTOR_VALUE")
    assert error.details["problem"] == "UNKNOWN_WORKFLOW"


def test_configured_workflows_add_to_the_built_in_ones() -> None:
    selector = {"workflow": ["release", "coding", "chat"]}
    assert validate(record(selector=selector))["selector"] == selector
    rejected(
        record(selector={"workflow": "release"}), "INVALID_SELECTOR_VALUE", workflows=frozenset()
    )


def test_every_selector_key_accepts_a_valid_value() -> None:
    selector = {
        "connector": ["claude-code", "codex"],
        "messageKind": "command",
        "userId": "dev-7",
        "clientId": "acme",
        "projectId": "customer-portal",
        "workflow": "debugging",
        "task": ["T-12", "t-12"],
    }
    assert validate(record(selector=selector))["selector"] == selector


# --- tags --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tags", "pointer"),
    [
        ("core", "/tags"),
        (["Core"], "/tags/0"),
        (["-x"], "/tags/0"),
        (["a" * 33], "/tags/0"),
        (["a", "a"], "/tags/1"),
        ([str(n) for n in range(17)], "/tags"),
        ([1], "/tags/0"),
    ],
)
def test_bad_tags_are_invalid_field(tags: object, pointer: str) -> None:
    rejected(record(tags=tags), "INVALID_FIELD", pointer)


# --- constraints -------------------------------------------------------------------------


def test_constraints_get_their_default_effect_filled_in() -> None:
    normal = validate(
        record(
            constraints=[
                {"kind": "deny_tool", "tools": ["mcp__deploy__*"], "classes": ["delegate"]},
                {"kind": "deny_command", "commands": ["git push --force*"], "effect": "ask"},
                {"kind": "deny_path", "paths": ["**/*.pem"], "reason": "Secrets stay put."},
                {"kind": "require_approval", "commands": ["npm publish"]},
            ]
        )
    )
    assert normal["constraints"] == [
        {
            "kind": "deny_tool",
            "tools": ["mcp__deploy__*"],
            "classes": ["delegate"],
            "effect": "deny",
        },
        {"kind": "deny_command", "commands": ["git push --force*"], "effect": "ask"},
        {
            "kind": "deny_path",
            "paths": ["**/*.pem"],
            "effect": "deny",
            "reason": "Secrets stay put.",
        },
        {"kind": "require_approval", "commands": ["npm publish"]},
    ]


def test_require_state_defaults_to_expect_true_for_mutating_calls() -> None:
    normal = validate(with_constraint({"kind": "require_state", "state": "ulysses.step_active"}))
    assert normal["constraints"] == [
        {
            "kind": "require_state",
            "state": "ulysses.step_active",
            "expect": True,
            "for": "mutating",
            "effect": "deny",
        }
    ]


@pytest.mark.parametrize("scope", ["any", "mutating", ["edit", "shell"]])
def test_require_state_accepts_each_form_of_for(scope: object) -> None:
    constraint = {
        "kind": "require_state",
        "state": "ultragoal.pursuing",
        "for": scope,
        "expect": False,
    }
    assert validate(with_constraint(constraint))["constraints"][0]["for"] == scope


def test_unregistered_state_is_unknown_state() -> None:
    rejected(
        with_constraint({"kind": "require_state", "state": "ulysses.stepactive"}),
        "UNKNOWN_STATE",
        "/constraints/0/state",
    )


@pytest.mark.parametrize("kind", ["allow_tool", "deny_tools", "", 3, None])
def test_unknown_constraint_kind_is_refused(kind: object) -> None:
    rejected(
        with_constraint({"kind": kind, "tools": ["Bash"]}),
        "UNKNOWN_CONSTRAINT_KIND",
        "/constraints/0/kind",
    )


@pytest.mark.parametrize(
    ("constraint", "pointer"),
    [
        ("deny_tool", "/constraints/0"),
        ({"tools": ["Bash"]}, "/constraints/0/kind"),
        ({"kind": "deny_tool"}, "/constraints/0"),
        ({"kind": "deny_tool", "tools": []}, "/constraints/0/tools"),
        ({"kind": "deny_tool", "tools": [""]}, "/constraints/0/tools/0"),
        ({"kind": "deny_tool", "tools": "Bash"}, "/constraints/0/tools"),
        ({"kind": "deny_tool", "classes": ["editing"]}, "/constraints/0/classes/0"),
        ({"kind": "deny_tool", "classes": ["ithaca"]}, "/constraints/0/classes/0"),
        ({"kind": "deny_tool", "paths": ["x"]}, "/constraints/0/paths"),
        ({"kind": "deny_command", "commands": []}, "/constraints/0/commands"),
        ({"kind": "deny_command", "commands": ["git push 'oops"]}, "/constraints/0/commands/0"),
        ({"kind": "deny_command", "commands": ["''"]}, "/constraints/0/commands/0"),
        ({"kind": "deny_path", "paths": []}, "/constraints/0/paths"),
        ({"kind": "deny_path", "paths": ["  "]}, "/constraints/0/paths/0"),
        ({"kind": "deny_path", "paths": ["a"], "effect": "allow"}, "/constraints/0/effect"),
        ({"kind": "deny_path", "paths": ["a"], "reason": "r" * 301}, "/constraints/0/reason"),
        ({"kind": "deny_path", "paths": ["a"], "reason": ""}, "/constraints/0/reason"),
        ({"kind": "require_state"}, "/constraints/0/state"),
        ({"kind": "require_state", "state": 1}, "/constraints/0/state"),
        (
            {"kind": "require_state", "state": "ulysses.step_active", "expect": "yes"},
            "/constraints/0/expect",
        ),
        (
            {"kind": "require_state", "state": "ulysses.step_active", "for": "edit"},
            "/constraints/0/for",
        ),
        (
            {"kind": "require_state", "state": "ulysses.step_active", "for": []},
            "/constraints/0/for",
        ),
        (
            {"kind": "require_state", "state": "ulysses.step_active", "for": ["edit", "edit"]},
            "/constraints/0/for/1",
        ),
        (
            {"kind": "require_state", "state": "ulysses.step_active", "tools": ["x"]},
            "/constraints/0/tools",
        ),
        ({"kind": "require_approval"}, "/constraints/0"),
        ({"kind": "require_approval", "tools": ["Bash"], "effect": "ask"}, "/constraints/0/effect"),
    ],
)
def test_malformed_constraint_is_invalid_constraint(constraint: object, pointer: str) -> None:
    rejected(with_constraint(constraint), "INVALID_CONSTRAINT", pointer)


def test_reason_of_exactly_300_characters_is_accepted() -> None:
    constraint = {"kind": "deny_path", "paths": ["a"], "reason": "r" * 300}
    assert validate(with_constraint(constraint))["constraints"][0]["reason"] == "r" * 300


def test_more_than_32_constraints_are_refused() -> None:
    constraint = {"kind": "deny_tool", "tools": ["Bash"]}
    assert len(validate(record(constraints=[constraint] * 32))["constraints"]) == 32
    rejected(record(constraints=[constraint] * 33), "INVALID_CONSTRAINT", "/constraints")


def test_constraints_that_are_not_a_list_are_invalid_field() -> None:
    rejected(record(constraints={"kind": "deny_tool"}), "INVALID_FIELD", "/constraints")


# --- overrides ---------------------------------------------------------------------------


def seed_with(selector: dict[str, Any]) -> dict[str, Any]:
    return {"id": "ithaca.coding.progress", "enabled": True, "selector": selector}


@pytest.mark.parametrize(
    ("seed_selector", "override_selector"),
    [
        ({"workflow": "coding"}, {"workflow": "coding"}),
        ({"workflow": "coding"}, {}),
        ({"workflow": "coding"}, {"workflow": ["coding", "debugging"]}),
        ({"workflow": ["coding", "goal"]}, {"workflow": ["goal", "coding"]}),
        ({"workflow": "coding", "connector": "codex"}, {"connector": ["codex", "cli"]}),
        ({}, {}),
    ],
)
def test_override_that_covers_every_seed_event_is_accepted(
    seed_selector: dict[str, Any], override_selector: dict[str, Any]
) -> None:
    check_override(seed_with(seed_selector), seed_with(override_selector))


@pytest.mark.parametrize(
    ("seed_selector", "override_selector", "key"),
    [
        ({}, {"workflow": "coding"}, "workflow"),
        ({"workflow": "coding"}, {"workflow": "debugging"}, "workflow"),
        ({"workflow": ["coding", "goal"]}, {"workflow": "coding"}, "workflow"),
        ({"workflow": "coding"}, {"workflow": "coding", "task": "T-1"}, "task"),
    ],
)
def test_override_that_narrows_the_seed_selector_is_refused(
    seed_selector: dict[str, Any], override_selector: dict[str, Any], key: str
) -> None:
    with pytest.raises(Refused) as caught:
        check_override(seed_with(seed_selector), seed_with(override_selector))
    assert caught.value.code == "OVERRIDE_NARROWS_SELECTOR"
    assert caught.value.details["pointer"] == f"/selector/{key}"


def test_disabled_override_is_base_locked() -> None:
    override = dict(seed_with({"workflow": "coding"}), enabled=False)
    with pytest.raises(Refused) as caught:
        check_override(seed_with({"workflow": "coding"}), override)
    assert caught.value.code == "BASE_LOCKED"


# --- hash --------------------------------------------------------------------------------


def full(raw: dict[str, Any]) -> dict[str, Any]:
    return dict(validate(raw), scope="user")


def test_record_hash_covers_the_content_fields_and_not_the_source() -> None:
    normal = full(record())
    assert record_hash(normal) == canon.digest(normal)
    assert record_hash(dict(normal, source="file")) == record_hash(normal)
    assert record_hash(dict(normal, priority=101)) != record_hash(normal)
    assert record_hash(dict(normal, scope="base")) != record_hash(normal)


def test_spelling_out_a_default_does_not_change_the_hash() -> None:
    terse = record(constraints=[{"kind": "deny_tool", "tools": ["Bash"]}])
    spelled = record(
        enabled=True,
        tags=[],
        constraints=[{"kind": "deny_tool", "tools": ["Bash"], "effect": "deny"}],
    )
    assert record_hash(full(terse)) == record_hash(full(spelled))


def test_unknown_field_pointer_escapes_slashes_and_tildes() -> None:
    rejected(record(**{"a/b~c": 1}), "UNKNOWN_FIELD", "/a~1b~0c")


# --- identifier checks agree with the reference's patterns ------------------------------


def accepted(raw: dict[str, Any]) -> bool:
    try:
        validate(raw)
    except InvalidInput:
        return False
    except Refused:  # the reserved namespace: the pattern itself was fine
        return True
    return True


@given(st.text(alphabet="az09-.A_é", max_size=12))
def test_ids_are_accepted_exactly_as_their_pattern_says(value: str) -> None:
    pattern = r"[a-z][a-z0-9-]*(\.[a-z0-9][a-z0-9-]*)+"
    assert accepted(record(id=value)) is (re.fullmatch(pattern, value) is not None)


@given(st.text(alphabet="az09._-A é", max_size=34))
def test_tags_are_accepted_exactly_as_their_pattern_says(value: str) -> None:
    pattern = r"[a-z0-9][a-z0-9._-]{0,31}"
    assert accepted(record(tags=[value])) is (re.fullmatch(pattern, value) is not None)


@given(st.text(alphabet="a \x00\x1f\x7f\x9f\xa0\u2028", min_size=1, max_size=6))
def test_selector_values_with_control_characters_are_refused(value: str) -> None:
    control = re.search(r"[\x00-\x1f\x7f-\x9f]", value) is not None
    assert accepted(record(selector={"task": value})) is not control


def test_require_verification_takes_optional_commands_and_no_effect() -> None:
    bare = validate(with_constraint({"kind": "require_verification"}))
    assert bare["constraints"] == [{"kind": "require_verification"}]
    named = {"kind": "require_verification", "commands": ["make check"], "reason": "Run it."}
    assert validate(with_constraint(named))["constraints"] == [named]
    rejected(
        with_constraint({"kind": "require_verification", "effect": "deny"}),
        "INVALID_CONSTRAINT",
        "/constraints/0/effect",
    )
    rejected(
        with_constraint({"kind": "require_verification", "commands": ["'unbalanced"]}),
        "INVALID_CONSTRAINT",
        "/constraints/0/commands/0",
    )
