from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ithaca.kernel import canon
from ithaca.protocols.seeds import BASE_PROTOCOLS, seed_hash, seed_set_digest
from ithaca.protocols.validate import record_hash, validate_record

SEEDS = {seed["id"]: seed for seed in BASE_PROTOCOLS}
MUTATING = ["edit", "shell", "mcp", "other"]
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.mark.parametrize("seed", BASE_PROTOCOLS, ids=lambda seed: seed["id"])
def test_every_seed_validates_to_itself(seed: dict[str, Any]) -> None:
    normal = validate_record(
        seed,
        workflows=frozenset(),
        known_states=frozenset({"ulysses.step_active", "ultragoal.pursuing"}),
        allow_reserved=True,
    )
    assert normal == seed


def test_base_set_has_the_ten_reference_ids_priorities_and_selectors() -> None:
    assert {seed_id: (seed["priority"], seed["selector"]) for seed_id, seed in SEEDS.items()} == {
        "ithaca.protocols-first": (900, {}),
        "ithaca.state-off-limits": (890, {}),
        "ithaca.no-self-approval": (880, {}),
        "ithaca.coding.required-loop": (800, {"workflow": "coding"}),
        "ithaca.coding.verify-before-done": (790, {"workflow": "coding"}),
        "ithaca.coding.approval-when-asked": (780, {"workflow": "coding"}),
        "ithaca.coding.progress": (700, {"workflow": "coding"}),
        "ithaca.coding.completion-report": (690, {"workflow": "coding"}),
        "ithaca.debugging.ulysses": (800, {"workflow": "debugging"}),
        "ithaca.goal.ultragoal": (800, {"workflow": "goal"}),
    }
    assert len(BASE_PROTOCOLS) == len(SEEDS)


def test_seeds_are_enabled_base_records() -> None:
    assert all(seed["scope"] == "base" and seed["enabled"] for seed in BASE_PROTOCOLS)


def test_only_debugging_goal_and_verify_before_done_seeds_carry_typed_constraints() -> None:
    constrained = {
        seed["id"]: seed["constraints"] for seed in BASE_PROTOCOLS if seed["constraints"]
    }
    # Verification is judged when the turn ends, with the project's own commands.
    assert constrained.pop("ithaca.coding.verify-before-done") == [{"kind": "require_verification"}]
    assert {
        seed_id: [(c["kind"], c["state"], c["expect"], c["for"], c["effect"]) for c in constraints]
        for seed_id, constraints in constrained.items()
    } == {
        "ithaca.debugging.ulysses": [
            ("require_state", "ulysses.step_active", True, MUTATING, "deny")
        ],
        "ithaca.goal.ultragoal": [("require_state", "ultragoal.pursuing", True, MUTATING, "deny")],
    }


def test_protocols_first_rules_are_the_reference_text() -> None:
    assert SEEDS["ithaca.protocols-first"]["rules"] == [
        "Call `load_protocols` with this turn's event id before any other tool.",
        "Every rule in the bundle binds the whole turn.",
        "If loading fails, stop and report it; never work without rules.",
        "When delegating, pass the event id so the worker loads the same bundle.",
    ]


def test_verify_before_done_and_completion_report_rules_are_the_reference_text() -> None:
    assert SEEDS["ithaca.coding.verify-before-done"]["rules"] == [
        "Never call work complete, fixed or passing unless a verification command succeeded "
        "after your last edit.",
        "If verification fails, debug and retry; if you stop, report the work as unfinished "
        "and quote the failure.",
    ]
    assert SEEDS["ithaca.coding.completion-report"]["rules"] == [
        "Finish with: files created, changed and deleted; each verification command and its "
        "exit status; approvals used; what remains unverified; the recommended next step.",
        # The honest end the critic accepts (issue 13): beyond the reference text.
        "If you end without a verification that passed after your last change, say so on a "
        "line of its own: `UNVERIFIED: <what is unverified and why>`. Ithaca shows that turn "
        "to the user as unverified, never as done.",
    ]


def test_debugging_seed_forbids_changes_outside_a_ulysses_step() -> None:
    assert SEEDS["ithaca.debugging.ulysses"]["rules"][1] == (
        "Make no changes outside an active Ulysses step."
    )


def test_seed_hash_is_the_record_content_hash() -> None:
    seed = SEEDS["ithaca.goal.ultragoal"]
    assert seed_hash(seed) == record_hash(seed) == canon.digest(seed)


def test_seed_set_digest_is_the_digest_of_the_seeds_sorted_by_id() -> None:
    assert seed_set_digest() == canon.digest(sorted(BASE_PROTOCOLS, key=lambda s: s["id"]))
    assert seed_set_digest() != canon.digest(list(BASE_PROTOCOLS))


def test_seed_set_digest_is_the_same_in_another_process() -> None:
    env = dict(os.environ, PYTHONPATH=str(SRC), PYTHONHASHSEED="12345")
    other = subprocess.run(
        [
            sys.executable,
            "-c",
            "from ithaca.protocols.seeds import seed_set_digest; print(seed_set_digest())",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert other.stdout.strip() == seed_set_digest()
