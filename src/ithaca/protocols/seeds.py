"""The base protocols Ithaca ships, as data.

Every project gets these records with ``scope=base``; reconciliation keeps the store in
step with this list, and the ``ithaca.`` namespace is reserved for them. The records are
written in their normal form (every default spelled out), so validating one returns it
unchanged and its hash is the hash the store holds.

Hooks compare ``seed_set_digest()`` with the store on every open, so it is computed once
per process.
"""

from __future__ import annotations

from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# The workflows every project knows, which the base set is written for.
BUILTIN_WORKFLOWS = ("coding", "debugging", "goal", "chat")


def known_workflows(config: dict[str, Any]) -> frozenset[str]:
    """The built-in workflows and the configured ones; ``INVALID_CONFIG`` when the configured
    default is neither (every prompt would otherwise be blocked)."""
    known = frozenset(BUILTIN_WORKFLOWS) | frozenset(config["protocols"]["workflows"])
    default = config["protocols"]["default_workflow"]
    if default is not None and default not in known:
        raise InvalidInput(
            "INVALID_CONFIG",
            f"[protocols] default_workflow {default!r} is not a known workflow; add it to"
            " [protocols] workflows or pick one of " + ", ".join(sorted(known)),
            {"key": "protocols.default_workflow"},
        )
    return known


# Delegation is left out so that helpers which only gather evidence can still be started;
# their own mutating calls are gated.
_MUTATING_CLASSES = ["edit", "shell", "mcp", "other"]


def _base(
    protocol_id: str,
    name: str,
    description: str,
    priority: int,
    selector: dict[str, str],
    rules: list[str],
    tags: list[str],
    constraints: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "id": protocol_id,
        "name": name,
        "description": description,
        "scope": "base",
        "enabled": True,
        "priority": priority,
        "selector": selector,
        "rules": rules,
        "constraints": constraints or [],
        "tags": tags,
    }


def _require_state(state: str, reason: str) -> dict[str, Any]:
    return {
        "kind": "require_state",
        "state": state,
        "expect": True,
        "for": list(_MUTATING_CLASSES),
        "effect": "deny",
        "reason": reason,
    }


BASE_PROTOCOLS: tuple[dict[str, Any], ...] = (
    _base(
        "ithaca.protocols-first",
        "Load protocols first",
        "Every turn starts by loading the protocol bundle of its event; "
        "the bundle's rules bind the whole turn, delegated work included.",
        900,
        {},
        [
            "Call `load_protocols` with this turn's event id before any other tool.",
            "Every rule in the bundle binds the whole turn.",
            "If loading fails, stop and report it; never work without rules.",
            "When delegating, pass the event id so the worker loads the same bundle.",
        ],
        ["core"],
    ),
    _base(
        "ithaca.state-off-limits",
        "Ithaca state is off limits",
        "Ithaca's state changes only through its own tools and commands; "
        "the kernel write guard denies direct changes under `.ithaca/`.",
        890,
        {},
        [
            "Change Ithaca state only through its tools and commands.",
            "Never create, edit or delete anything under `.ithaca/`, "
            "or open its database directly.",
        ],
        ["core"],
    ),
    _base(
        "ithaca.no-self-approval",
        "No self-approval",
        "Approvals come from the user alone; the kernel guard denies every user-only "
        "command an agent tries to run, however it is spelled.",
        880,
        {},
        [
            "You cannot grant, record or imitate a user's approval.",
            "When an action needs approval, show the user the exact command Ithaca names, "
            "then wait.",
            "Never run Ithaca's user-only commands yourself.",
        ],
        ["core"],
    ),
    _base(
        "ithaca.coding.required-loop",
        "Coding loop",
        "Coding work goes through triage, a written plan, edits within the plan, "
        "verification with the project's own checks and a review of the diff.",
        800,
        {"workflow": "coding"},
        [
            "Triage first: restate the request, find the code involved, say what is out of scope.",
            "Before the first edit, write a short plan: the files to change and how you will "
            "verify.",
            "Edit only what the plan covers; if the plan must change, update it first.",
            "Verify with the project's own checks and read their output.",
            "Review your diff for unintended changes before reporting.",
        ],
        ["coding"],
    ),
    _base(
        "ithaca.coding.verify-before-done",
        "Verify before done",
        "Work counts as complete only when a verification command succeeded after the "
        "last edit; otherwise it is reported as unfinished.",
        790,
        {"workflow": "coding"},
        [
            "Never call work complete, fixed or passing unless a verification command "
            "succeeded after your last edit.",
            "If verification fails, debug and retry; if you stop, report the work as "
            "unfinished and quote the failure.",
        ],
        ["coding"],
        [{"kind": "require_verification"}],
    ),
    _base(
        "ithaca.coding.approval-when-asked",
        "Approval when the project asks",
        "Actions the project marks for approval run only after the user approved that "
        "exact action through Ithaca; projects mark them with `require_approval` records.",
        780,
        {"workflow": "coding"},
        [
            "Where the project requires approval, run the action only after the user "
            "approved that exact action through Ithaca.",
            "Never rephrase a denied command to get around an approval.",
        ],
        ["coding"],
    ),
    _base(
        "ithaca.coding.progress",
        "Report progress",
        "Coding work reports each change of stage, and what it is blocked or waiting on.",
        700,
        {"workflow": "coding"},
        [
            "Report each stage change: plan written, edits made, verification run and its "
            "result, review done.",
            "When blocked or waiting for the user, say on what.",
        ],
        ["coding"],
    ),
    _base(
        "ithaca.coding.completion-report",
        "Completion report",
        "Coding work ends with a report of the files touched, the checks run, the "
        "approvals used and what remains unverified.",
        690,
        {"workflow": "coding"},
        [
            "Finish with: files created, changed and deleted; each verification command and "
            "its exit status; approvals used; what remains unverified; the recommended next "
            "step.",
            "If you end without a verification that passed after your last change, say so "
            "on a line of its own: `UNVERIFIED: <what is unverified and why>`. Ithaca shows "
            "that turn to the user as unverified, never as done.",
        ],
        ["coding"],
    ),
    _base(
        "ithaca.debugging.ulysses",
        "Debug with Ulysses",
        "Debugging follows the Ulysses protocol; mutating calls are denied outside an "
        "active Ulysses step.",
        800,
        {"workflow": "debugging"},
        [
            "Debug through the `ulysses` tool: record a plan with its validators before "
            "acting, report outcomes as observed data, reflect when Ithaca requires it.",
            "Make no changes outside an active Ulysses step.",
        ],
        ["debugging", "ulysses"],
        [
            _require_state(
                "ulysses.step_active",
                "Make no changes outside an active Ulysses step: record a plan step with "
                "the `ulysses` tool first.",
            )
        ],
    ),
    _base(
        "ithaca.goal.ultragoal",
        "Pursue goals with Ultragoal",
        "Objectives are pursued one confirmed story at a time against a machine-checkable "
        "verification surface, and only the completion gate marks them complete; mutating "
        "calls are denied while no objective is being pursued.",
        800,
        {"workflow": "goal"},
        [
            "Pursue objectives through the `ultragoal` tool; never start without a "
            "machine-checkable verification surface.",
            "Work one confirmed story at a time.",
            "Only Ithaca's completion gate marks an objective complete.",
        ],
        ["goal", "ultragoal"],
        [
            _require_state(
                "ultragoal.pursuing",
                "Make changes only while an objective is being pursued: start or resume it "
                "with the `ultragoal` tool first.",
            )
        ],
    ),
)


def seed_hash(record: dict[str, Any]) -> str:
    """The content hash of a base record, as stored in ``protocol_seeds``."""
    from ithaca.protocols.validate import record_hash  # hooks only compare SEED_SET_DIGEST

    return record_hash(record)


# The digest of BASE_PROTOCOLS sorted by id, written out so that hooks, which compare it
# with the store on every call, need not canonicalise ten records each time. A test
# recomputes it: changing a seed without updating this line fails the suite.
SEED_SET_DIGEST = "5fb9c30830f6ac5c53df386d70600b5e3458e30f4a6ae7dee871dcb12f74c5db"


def seed_set_digest() -> str:
    """The digest of the shipped base set, sorted by id; reconciliation's fast-path key."""
    return SEED_SET_DIGEST
