"""Demo scene: a delivery carried in durable state.

A standard change is opened, two decisions are accepted and two task contracts defined;
the plan checkpoint is accepted and publishes its waves; the next session start shows
the agent where the delivery stands; and the change is archived with every file intact.
Every call goes through the MCP server over stdio and the real hook process.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ithaca.demo import Stage, expect, script

CHANGE = "add-greeting-cli"


def play(stage: Stage) -> None:
    asyncio.run(_play(stage))


async def _play(stage: Stage) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    say = stage.say
    root = stage.root
    say("\n== Scene 3: a delivery in durable state ==")
    server = StdioServerParameters(
        command=script("ithaca"), args=["--project", str(root), "mcp"], env=stage.env()
    )
    async with Client(server) as client:

        async def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(tool, arguments)
            expect(not result.is_error, f"{tool}: {result.content}")
            structured = result.structured_content
            assert isinstance(structured, dict)
            return structured

        async def record(key: str, kind: str, action: str, data: dict[str, Any]) -> Any:
            entry = {"kind": kind, "action": action, "idempotency_key": key, "data": data}
            answer = await call("record", {"entries": [entry]})
            return answer["results"][0]["result"]

        await record(
            "demo-change",
            "change_contract",
            "open",
            {
                "id": CHANGE,
                "kind": "standard",
                "title": "A greeting command line",
                "intent": "# Intent\n\nLet users run `python -m greet NAME`.\n",
            },
        )
        say(f"agent> record change_contract open {CHANGE} (standard)")
        for key, question, choice in (
            ("demo-dec-1", "How is the name passed?", "a positional argument"),
            ("demo-dec-2", "Which parser?", "argparse from the standard library"),
        ):
            made = await record(
                key,
                "decision",
                "accept",
                {
                    "scope": {"change_id": CHANGE},
                    "question": question,
                    "recommendation": choice,
                    "selection": {"choice": choice, "rationale": "the smallest thing that works"},
                    "owner": "demo-user",
                },
            )
            say(f"agent> record decision accept -> {made['decision']['path']}")
        for key, task, deps, files in (
            ("demo-task-1", "T-1", [], ["greet.py"]),
            ("demo-task-2", "T-2", ["T-1"], ["greet/__main__.py"]),
        ):
            await record(
                key,
                "task_contract",
                "define",
                {
                    "id": task,
                    "change_id": CHANGE,
                    "title": f"Task {task}",
                    "deps": deps,
                    "files_modified": files,
                    "verification": {"argv": ["python", "-m", "pytest", "-q"]},
                },
            )
        say("agent> record task_contract define T-1, T-2 (T-2 depends on T-1)")

        plan = await call(
            "checkpoint",
            {
                "stage": "plan",
                "scope": {"change_id": CHANGE},
                "payload": {"summary": "Parse the name, then add the module entry point."},
                "idempotency_key": "demo-plan",
            },
        )
        plan_file = root / ".ithaca" / "changes" / "active" / CHANGE / "plan.json"
        waves = json.loads(plan_file.read_text())
        expect(len(waves["waves"]) == 2, f"the plan does not have two waves: {waves['waves']}")
        say(
            f"agent> checkpoint plan -> accepted r{plan['checkpoint']['revision']}; waves: "
            + ", ".join(f"{wave['index']}: {wave['tasks']}" for wave in waves["waves"])
        )

    start = stage.hook("SessionStart", source="startup")
    crumb = start.get("hookSpecificOutput", {}).get("additionalContext", "")
    expect(f"change {CHANGE}" in crumb, f"no delivery breadcrumb at session start: {start}")
    say("\nnext session> SessionStart breadcrumb:")
    for line in crumb.splitlines():
        if line.startswith("[Ithaca delivery]") or line.startswith("Decisions"):
            say(f"  {line}")

    done = stage.ithaca(
        "archive",
        CHANGE,
        "--summary",
        "Greeting command line planned; archived for the demo.",
        "--no-baseline-change",
        "no specification changed",
        "--json",
    )
    expect(done.returncode == 0, f"archive failed: {done.stdout} {done.stderr}")
    archived = list((root / ".ithaca" / "changes" / "archive").iterdir())
    expect(len(archived) == 1, "the change folder did not move to changes/archive/")
    say(f"\n$ ithaca archive {CHANGE} -> .ithaca/changes/archive/{archived[0].name}/")
