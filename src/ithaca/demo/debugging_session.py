"""Demo scene: a debugging session under the Ulysses protocol.

The agent opens a session and is stopped from editing until it has a plan. Its first
step fails its validator, the recovery fails too, and the hook blocks an edit until it
reflects. A new hypothesis gives a plan whose probe validator passes, a final validator
bound in advance gates ``complete(resolved)``, and the lesson it leaves is found by
``ithaca knowledge search``. Every call goes through the real hook process and the MCP
server over stdio.
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.demo import Stage, expect, script
from ithaca.demo.protocols_turn import decision

BUGGY = "def total(values):\n    return sum(values[1:])\n"
FIXED = "def total(values):\n    return sum(values)\n"

# Judges what the agent reports: did `total([1, 2, 3])` give 6?
REPORTED_SUM = """\
from tb_validate import observed, pass_, fail

seen = observed()
if seen.get("total([1, 2, 3])") == 6:
    pass_("total([1, 2, 3]) is 6")
else:
    fail(f"total([1, 2, 3]) gave {seen.get('total([1, 2, 3])')}", seen)
"""

# Measures for itself: imports the project's calc.py and checks several inputs.
PROBE_TOTALS = """\
import os, sys
from tb_validate import pass_, fail

sys.path.insert(0, os.environ["ITHACA_PROJECT_ROOT"])
from calc import total

cases = {(): 0, (5,): 5, (1, 2, 3): 6, (-1, 1): 0}
wrong = {str(k): total(list(k)) for k, want in cases.items() if total(list(k)) != want}
pass_("every case sums correctly") if not wrong else fail("wrong sums", wrong)
"""


def play(stage: Stage) -> None:
    import asyncio

    asyncio.run(_play(stage))


async def _play(stage: Stage) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    say = stage.say
    root = stage.root
    say("\n== Scene 2: a debugging session under Ulysses ==")
    (root / "calc.py").write_text(BUGGY)
    say("  calc.py: total() skips the first value")
    prompt = "::workflow coding\ntotal([1, 2, 3]) returns 5. Debug it carefully."
    say(f"\nuser> {prompt!r}")
    context = stage.hook("UserPromptSubmit", prompt=prompt)["hookSpecificOutput"]
    event_id = context["additionalContext"].split("event ", 1)[1].split(" ", 1)[0]

    server = StdioServerParameters(
        command=script("ithaca"), args=["--project", str(root), "mcp"], env=stage.env()
    )
    async with Client(server) as client:

        async def call(tool: str, **arguments: Any) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            expect(not result.is_error, f"{tool} {arguments.get('operation')}: {result.content}")
            structured = result.structured_content
            assert isinstance(structured, dict)
            return structured

        await call("load_protocols", eventId=event_id)
        say(f"agent> load_protocols {event_id}  (MCP over stdio)")

        opened = await call("ulysses", operation="init", problem="total([1, 2, 3]) returns 5")
        say(
            f"agent> ulysses init -> session {opened['session_id']}, S={opened['S']}, "
            f"next: {opened['required_action']}"
        )

        edit = {
            "tool_name": "Edit",
            "tool_input": {
                "file_path": str(root / "calc.py"),
                "old_string": "values[1:]",
                "new_string": "values[0:]",
            },
        }
        denied = decision(stage.hook("PreToolUse", **edit))
        expect(denied[0] == "deny" and "record a plan" in denied[1], f"not denied: {denied}")
        say(f"agent> Edit calc.py\n  PreToolUse -> DENY: {denied[1]}")

        notebook = await call("notebook", operation="create", title="total() sums")
        nb = notebook["notebookId"]
        reported = await call(
            "notebook",
            operation="add_cell",
            notebookId=nb,
            filename="reported_sum.py",
            source=REPORTED_SUM,
        )
        probe = await call(
            "notebook",
            operation="add_cell",
            notebookId=nb,
            filename="probe_totals.py",
            source=PROBE_TOTALS,
            mode="probe",
        )
        cells = {"notebookId": nb, "cellId": reported["cellId"]}
        probe_cell = {"notebookId": nb, "cellId": probe["cellId"]}
        say(
            "agent> notebook: reported_sum.py (judges what it is told), "
            "probe_totals.py (imports calc.py and checks for itself)"
        )
        await call("ulysses", operation="bind_final_validator", **probe_cell)
        say("agent> ulysses bind_final_validator probe_totals.py  (what 'fixed' means)")

        planned = await call(
            "ulysses",
            operation="plan",
            primary="convert the values to int before summing",
            recovery="sum with an explicit loop instead of sum()",
            primaryValidator=cells,
            recoveryValidator=cells,
        )
        say(
            f"agent> ulysses plan -> S=1, step {planned['active_step']['step_id']}, "
            "both validators frozen"
        )
        first = await call("ulysses", operation="outcome", observed={"total([1, 2, 3])": 5})
        expect(first["phase"] == "RECOVERY", f"primary did not fail over: {first}")
        say(
            f"agent> ulysses outcome {{total: 5}} -> {first['assessment']}, "
            f"validator: {first['validation']['reason']!r}; now S={first['S']} (recovery)"
        )
        second = await call("ulysses", operation="outcome", observed={"total([1, 2, 3])": 5})
        expect(second["phase"] == "REFLECT", f"recovery did not force reflection: {second}")
        moves = [move["text"] for move in second["forbidden_moves"]]
        say(f"agent> ulysses outcome {{total: 5}} -> REFLECT; forbidden now: {moves}")

        denied = decision(stage.hook("PreToolUse", **edit))
        expect(denied[0] == "deny" and "reflection required" in denied[1], f"{denied}")
        say(f"agent> Edit calc.py\n  PreToolUse -> DENY: {denied[1]}")
        inspect = decision(
            stage.hook("PreToolUse", tool_name="Bash", tool_input={"command": "cat calc.py"})
        )
        expect(inspect[0] == "allow", f"read-only inspection blocked: {inspect}")
        say("agent> Bash: cat calc.py -> allowed (inspection stays open)")

        reflected = await call(
            "ulysses",
            operation="reflect",
            hypothesis="total() starts its slice at index 1, so the first value is dropped",
            falsification="total([5]) returns 5",
        )
        say(f"agent> ulysses reflect -> hypothesis #{reflected['hypothesis_seq']}, S=0")
        await call(
            "ulysses",
            operation="plan",
            primary="start the slice at index 0",
            recovery="restore calc.py from git and re-read total()",
            primaryValidator=probe_cell,
            recoveryValidator=cells,
        )
        allowed = decision(stage.hook("PreToolUse", **edit))
        expect(allowed[0] == "allow", f"edit not allowed with a step planned: {allowed}")
        (root / "calc.py").write_text(FIXED)
        say("agent> ulysses plan (probe validator); Edit calc.py -> allowed, edited")
        passed = await call("ulysses", operation="outcome", observed=None)
        expect(passed["assessment"] == "expected", f"probe did not pass: {passed}")
        say(
            f"agent> ulysses outcome -> expected ({passed['validation']['reason']}), "
            f"checkpoint {passed['checkpoint']['label']}"
        )

        done = await call(
            "ulysses",
            operation="complete",
            terminalState="resolved",
            observed=None,
            summary="total() sliced from index 1 and dropped the first value; a probe "
            "validator that imports the module catches it where reported numbers did not.",
        )
        expect(done["terminalState"] == "resolved", f"not resolved: {done}")
        say(
            f"agent> ulysses complete(resolved) -> final validator passed; "
            f"lesson {done['lesson']['path']}"
        )

    found = stage.ithaca("knowledge", "search", "total slice first value", "--json")
    expect(found.returncode == 0, f"knowledge search failed: {found.stderr}")
    results = json.loads(found.stdout)["results"]
    expect(bool(results), "the lesson is not found by knowledge search")
    say(
        f"\n$ ithaca knowledge search 'total slice first value'\n  {results[0]['title']} "
        f"({results[0]['path']})"
    )
