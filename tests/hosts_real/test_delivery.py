"""A delivery carried from one session of each real host to the next: the model opens a
change, accepts a decision, defines a task and checkpoints the plan through Ithaca's MCP
tools; the files land under ``.ithaca/`` and the events in ``ithaca log``. A new session
then shows the model, at SessionStart and before it does anything, where the delivery
stands, next to the admission of its prompt."""

from __future__ import annotations

import json
from typing import Any

from tests.hosts_real.host import Host
from tests.hosts_real.scripted import Script

CHANGE = "add-greeting-cli"
INTENT = "# Intent\n\nLet users run `python -m greet NAME`.\n"
BREADCRUMB = (
    f'[Ithaca delivery] change {CHANGE} (standard, active) · task T-1 "Parse the name" pending\n'
    "plan r1 accepted\n"
    "Decisions: 1 accepted, 0 deferred\n"
    "Full context: tool `context` with detail=full, or `ithaca context --full`."
)
ADMITTED = "Ithaca admitted this prompt as event evt_"


def entry(key: str, kind: str, action: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"kind": kind, "action": action, "idempotency_key": key, "data": data}


PLANNING = [
    entry(
        "open-change",
        "change_contract",
        "open",
        {"id": CHANGE, "kind": "standard", "title": "A greeting command line", "intent": INTENT},
    ),
    entry(
        "parser-decision",
        "decision",
        "accept",
        {
            "scope": {"change_id": CHANGE},
            "question": "Which parser?",
            "recommendation": "argparse from the standard library",
            "selection": {"choice": "argparse", "rationale": "the smallest thing that works"},
            "owner": "team",
        },
    ),
    entry(
        "define-t1",
        "task_contract",
        "define",
        {
            "id": "T-1",
            "change_id": CHANGE,
            "title": "Parse the name",
            "deps": [],
            "files_modified": ["greet.py"],
            "verification": {"argv": ["python", "-m", "pytest", "-q"]},
        },
    ),
]
PLAN = {
    "stage": "plan",
    "scope": {"change_id": CHANGE},
    "payload": {"summary": "Parse the name, then greet."},
    "idempotency_key": "plan-1",
}


def test_a_delivery_recorded_in_one_session_is_where_the_next_one_starts(host: Host):
    first = host.run(
        "Plan the greeting command line",
        Script(
            main=[
                *host.protocols_loaded(),
                host.tool("record", {"entries": PLANNING}),
                host.tool("checkpoint", PLAN),
            ]
        ),
    )
    assert first.exit_code == 0, first.stderr
    assert "[Ithaca delivery]" not in first.first_request().shown  # nothing was in flight
    recorded = first.call("ithaca:record").answer()["results"]
    assert [item["status"] for item in recorded] == ["committed"] * 3, recorded
    decision = recorded[1]["result"]["decision"]
    planned = first.call("ithaca:checkpoint").answer()
    assert planned["accepted"] and planned["checkpoint"]["revision"] == 1, planned
    assert planned["plan"]["waves"] == [{"index": 1, "parallel": False, "tasks": ["T-1"]}]

    ithaca = host.repo / ".ithaca"
    change = ithaca / "changes" / "active" / CHANGE
    assert (change / "intent.md").read_text() == INTENT
    on_disk = json.loads((ithaca / decision["path"]).read_text())
    assert on_disk["selection"]["choice"] == "argparse", on_disk
    assert json.loads((change / "plan.json").read_text())["waves"] == planned["plan"]["waves"]
    ledger = json.loads((ithaca / "tasks" / "tasks.json").read_text())
    assert {(r["type"], r["id"]) for r in ledger["records"]} >= {
        ("change", CHANGE),
        ("task", "T-1"),
    }
    kinds = [event["kind"] for event in host.log() if event["kind"].startswith("delivery.")]
    recorded_kinds = [kind for kind in kinds if not kind.startswith("delivery.ledger")]
    assert recorded_kinds[-4:] == [
        "delivery.change_opened",
        "delivery.decision_accepted",
        "delivery.task_defined",
        "delivery.checkpoint_accepted",
    ], kinds

    second = host.run(
        "Where were we?",
        Script(main=[*host.protocols_loaded(), host.tool("context", {"detail": "full"})]),
    )
    assert second.exit_code == 0, second.stderr
    shown = second.first_request().shown
    assert BREADCRUMB in shown, shown.partition("[Ithaca delivery]")[2][:400]
    assert ADMITTED in shown
    assert not second.call("ithaca:load_protocols").is_error
    context = second.call("ithaca:context").answer()  # the breadcrumb's pointer, followed
    assert (context["change"]["id"], context["task"]["id"]) == (CHANGE, "T-1"), context
    assert [d["id"] for d in context["decisions"]] == [decision["id"]], context
    sessions = [
        e["payload"]["hostSessionId"] for e in host.log() if e["kind"] == "protocols.event_admitted"
    ]
    assert len(sessions) == 2 and sessions[0] != sessions[1], sessions
