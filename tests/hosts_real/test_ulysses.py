"""A whole Ulysses debugging session through each real host, the model working only
through the ``ulysses`` and ``notebook`` MCP tools, its editor and its shell (the demo's
scene, ``ithaca.demo.debugging_session``, played by a scripted model).

It proves what the model is shown at each turn of the protocol: an edit before a plan is
refused; ``resolved`` is refused while no final validator is bound and while the bound one
fails; a primary and a recovery that both fail put the session in REFLECT, where edits
and mutating shell commands are refused and reading stays open; ``reflect`` reopens
planning, the fix passes its probe, and only then does ``resolved`` succeed. The fixed
file, the lesson on disk, the journal in ``ithaca log`` and ``ithaca knowledge search``
show the same story.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.hosts_real.host import Host
from tests.hosts_real.scripted import Reply, Request, Script, Step

from ithaca.demo.debugging_session import BUGGY, FIXED, PROBE_TOTALS, REPORTED_SUM

NOTEBOOK = r"nb_[0-9A-HJKMNP-TV-Z]{26}"
CELL = r"cell_[0-9A-HJKMNP-TV-Z]{26}"
HYPOTHESIS = "total() starts its slice at index 1, so the first value is dropped"
SUMMARY = (
    "total() sliced from index 1 and dropped the first value; a probe validator that "
    "imports the module catches it where reported numbers did not."
)


def _seen(request: Request, pattern: str) -> list[str]:
    """The ids matching ``pattern`` the model has been shown, oldest first."""
    return list(dict.fromkeys(re.findall(pattern, request.shown)))


def _cell(request: Request, nth: int) -> dict[str, str]:
    """The ``nth`` notebook cell the model created (0: reported_sum.py, 1: probe_totals.py)."""
    return {"notebookId": _seen(request, NOTEBOOK)[0], "cellId": _seen(request, CELL)[nth]}


def test_a_ulysses_session_blocks_edits_until_reflection_and_resolves_on_its_final_validator(
    host: Host,
):
    (host.repo / "calc.py").write_text(BUGGY)

    def ulysses(operation: str, **arguments: Any) -> Reply:
        return host.tool("ulysses", {"operation": operation, **arguments})

    def add_cell(filename: str, source: str, **mode: str) -> Step:
        def step(request: Request) -> Reply:
            notebook = _seen(request, NOTEBOOK)[0]
            arguments = {"operation": "add_cell", "notebookId": notebook, "filename": filename}
            return host.tool("notebook", {**arguments, "source": source, **mode})

        return step

    resolve = ulysses("complete", terminalState="resolved", observed=None, summary=SUMMARY)
    reported_5 = ulysses("outcome", observed={"total([1, 2, 3])": 5})
    run = host.run(
        "::workflow coding\ntotal([1, 2, 3]) returns 5. Debug it carefully.",
        Script(
            main=[
                *host.protocols_loaded(),
                ulysses("init", problem="total([1, 2, 3]) returns 5"),
                host.write("calc.py", FIXED),
                host.tool("notebook", {"operation": "create", "title": "total() sums"}),
                add_cell("reported_sum.py", REPORTED_SUM),
                add_cell("probe_totals.py", PROBE_TOTALS, mode="probe"),
                resolve,
                lambda r: ulysses("bind_final_validator", **_cell(r, 1)),
                resolve,
                lambda r: ulysses(
                    "plan",
                    primary="convert the values to int before summing",
                    recovery="sum with an explicit loop instead of sum()",
                    primaryValidator=_cell(r, 0),
                    recoveryValidator=_cell(r, 0),
                ),
                reported_5,
                reported_5,
                host.write("calc.py", FIXED),
                host.shell("sed -i 's/values\\[1:\\]/values/' calc.py"),
                host.shell("cat calc.py"),
                ulysses("reflect", hypothesis=HYPOTHESIS, falsification="total([5]) returns 5"),
                lambda r: ulysses(
                    "plan",
                    primary="start the slice at index 0",
                    recovery="restore calc.py from git and re-read total()",
                    primaryValidator=_cell(r, 1),
                    recoveryValidator=_cell(r, 0),
                ),
                host.write("calc.py", FIXED),
                ulysses("outcome", observed=None),
                resolve,
            ]
        ),
    )
    assert run.exit_code == 0, run.stderr

    def answers(operation: str) -> list[dict[str, Any]]:
        calls = run.calls("ithaca:ulysses")
        return [c.answer() for c in calls if json.loads(c.input)["operation"] == operation]

    # What the model was shown, in order.
    assert answers("init")[0]["required_action"] == "plan"
    before_plan, in_reflect, planned = run.calls("write")
    assert "[PLAN_REQUIRED]" in before_plan.text and "record a plan" in before_plan.text
    no_final, final_fails, resolved = answers("complete")
    assert no_final["code"] == "FINAL_VALIDATOR_REQUIRED", no_final
    assert final_fails["code"] == "FINAL_VALIDATOR_FAILED", final_fails
    assert final_fails["details"]["validation"]["reason"] == "wrong sums"
    primary, recovery, fixed = answers("outcome")
    assert (primary["phase"], recovery["phase"]) == ("RECOVERY", "REFLECT")
    assert [move["text"] for move in recovery["forbidden_moves"]] == [
        "convert the values to int before summing",
        "sum with an explicit loop instead of sum()",
    ]
    sed = run.call("shell", given="sed -i")
    for refused in (in_reflect, sed):
        assert "[REFLECT_REQUIRED]" in refused.text and "reflection required" in refused.text
    assert "sum(values[1:])" in run.call("shell", given="cat calc.py").text
    assert answers("reflect")[0]["phase"] == "IDLE"
    assert "Refused by Ithaca" not in planned.text
    assert fixed["assessment"] == "expected" and fixed["checkpoint"]["label"] == "checkpoint_1"
    assert resolved["terminalState"] == "resolved", resolved
    assert resolved["validation"]["reason"] == "every case sums correctly"

    # What happened on disk and in the journal.
    assert (host.repo / "calc.py").read_text() == FIXED
    lesson = (host.repo / resolved["lesson"]["path"]).read_text()
    assert f"[held] {HYPOTHESIS}" in lesson
    log = host.log()
    assert [e["kind"] for e in log if e["kind"].startswith("ulysses.")] == [
        "ulysses.init",
        "ulysses.final_validator_bound",
        "ulysses.planned",
        "ulysses.outcome",
        "ulysses.outcome",
        "ulysses.reflected",
        "ulysses.planned",
        "ulysses.outcome",
        "ulysses.completed",
    ]
    gate = [
        e["payload"]["final"]["code"]
        for e in log
        if e["kind"] == "protocols.decision" and e["payload"]["final"].get("gate") == "ulysses"
    ]
    assert gate == ["PLAN_REQUIRED", "REFLECT_REQUIRED", "REFLECT_REQUIRED"]
    found = host.ithaca_cli("knowledge", "search", "total slice first value", "--json")
    assert [hit["id"] for hit in json.loads(found.stdout)["results"]] == [resolved["lesson"]["id"]]
