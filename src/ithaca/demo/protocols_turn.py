"""Demo scene: one agent turn governed by protocols.

A prompt is admitted; an edit is denied until the bundle is loaded through the MCP
server; the same edit is then allowed; a team protocol stops ``git push``; a write under
``.ithaca/`` is denied; the turn's end is held by the end-of-turn critic, which runs the
team's check itself, until the edit passes it; and ``ithaca log`` explains every decision.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ithaca.demo import Stage, expect, script
from ithaca.kernel import git

# The team's verification, configured as a clone brings it (the project has no test runner).
CHECK = "python3 check_greet.py"
CHECK_GREET = 'from greet import greet\nassert greet("Ada") == "Hello Ada", greet("Ada")\n'
NO_PUSH = {
    "id": "team.no-push",
    "name": "People push, agents do not",
    "description": "Publishing commits is a person's decision.",
    "priority": 500,
    "selector": {"workflow": "coding"},
    "rules": ["Never push; tell the user the branch is ready instead."],
    "constraints": [
        {"kind": "deny_command", "commands": ["git push"], "reason": "Pushing is the user's call."}
    ],
}


def play(stage: Stage) -> None:
    say = stage.say
    root = stage.root
    say("== Scene 1: a coding turn under protocols ==")
    made = git.run_text(["init", "-q", str(root)], timeout=None)
    expect(made.returncode == 0, f"git init failed: {made.stderr.strip()}")
    (root / "greet.py").write_text('def greet(name):\n    return "Hello " + name\n')
    # The team's rule is in the repository before `ithaca init`, as a clone brings it: what
    # init finds is what the effect check accepts (a later edit would need the user's lift).
    (root / ".ithaca" / "protocols").mkdir(parents=True)
    (root / ".ithaca" / "protocols" / "team.no-push.json").write_text(json.dumps(NO_PUSH, indent=2))
    (root / ".ithaca" / "config.toml").write_text(
        f"[verification]\ncommands = [{json.dumps(CHECK)}]\n"
    )
    (root / "check_greet.py").write_text(CHECK_GREET)
    done = stage.ithaca("init")
    expect(done.returncode == 0, f"ithaca init failed: {done.stderr}")
    say(f"$ ithaca init   (in {root})")
    say("  team protocol .ithaca/protocols/team.no-push.json: deny `git push`")
    say(f"  team verification in .ithaca/config.toml: `{CHECK}`")

    prompt = "::workflow coding\nMake greet() use an f-string."
    say(f"\nuser> {prompt!r}")
    answer = stage.hook("UserPromptSubmit", prompt=prompt)
    context = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
    expect("admitted this prompt as event evt_" in context, f"prompt not admitted: {answer}")
    event_id = context.split("event ", 1)[1].split(" ", 1)[0]
    say(f"  UserPromptSubmit -> admitted as {event_id}")

    edit = {
        "tool_name": "Edit",
        "tool_input": {
            "file_path": str(root / "greet.py"),
            "old_string": '"Hello " + name',
            "new_string": 'f"Hello {name}!"',
        },
    }
    say("\nagent> Edit greet.py (before loading protocols)")
    denial = decision(stage.hook("PreToolUse", **edit))
    expect(denial[0] == "deny" and "load_protocols" in denial[1], f"edit not denied: {denial}")
    say(f"  PreToolUse -> DENY: {denial[1]}")

    say(f'\nagent> load_protocols {{"eventId": "{event_id}"}}   (MCP over stdio)')
    loaded = asyncio.run(_load_protocols(stage, event_id))
    ids = [p["id"] for p in loaded["protocols"]]
    expect("team.no-push" in ids, f"bundle misses the team protocol: {ids}")
    say(f"  bundle: {len(ids)} protocols, digest {loaded['digest'][:16]}…")
    for protocol_id in ids:
        say(f"    - {protocol_id}")

    say("\nagent> Edit greet.py (again)")
    allowed = decision(stage.hook("PreToolUse", **edit))
    expect(allowed[0] == "allow", f"edit not allowed after loading: {allowed}")
    (root / "greet.py").write_text('def greet(name):\n    return f"Hello {name}!"\n')
    say("  PreToolUse -> allowed (Ithaca stays silent; the host's own permissions apply)")

    say("\nagent> Bash: git push origin main")
    push = decision(
        stage.hook("PreToolUse", tool_name="Bash", tool_input={"command": "git push origin main"})
    )
    expect(push[0] == "deny" and "team.no-push" in push[1], f"push not denied: {push}")
    say(f"  PreToolUse -> DENY: {push[1]}")

    say("\nagent> Write .ithaca/protocols/team.no-push.json (to loosen the rule)")
    tamper = decision(
        stage.hook(
            "PreToolUse",
            tool_name="Write",
            tool_input={
                "file_path": str(root / ".ithaca" / "protocols" / "team.no-push.json"),
                "content": "{}",
            },
        )
    )
    expect(tamper[0] == "deny" and ".ithaca/" in tamper[1], f"state write not denied: {tamper}")
    say(f"  PreToolUse -> DENY: {tamper[1]}")

    _verify_before_done(stage)

    say("\n$ ithaca log --kind protocols.")
    log = stage.ithaca("log", "--kind", "protocols.")
    expect(log.returncode == 0, f"ithaca log failed: {log.stderr}")
    decisions = [line for line in log.stdout.splitlines() if "protocols.decision" in line]
    expect(len(decisions) >= 4, "ithaca log does not show the decisions")
    for line in log.stdout.splitlines():
        say("  " + line)


def _verify_before_done(stage: Stage) -> None:
    """The agent ends its turn without checking its edit: the critic runs the team's check
    itself, in the validator sandbox, and holds the Stop with its failure; the agent fixes
    the edit, and the critic's own run of the check lets the turn end. Nothing the agent
    ran or said counts."""
    say = stage.say
    said = {"stop_hook_active": False, "last_assistant_message": "greet() uses an f-string."}
    say("\nagent> (ends its turn: 'greet() uses an f-string.')")
    held = stage.hook("Stop", **said)
    reason = str(held.get("reason", ""))
    expect(held.get("decision") == "block" and "Hello Ada!" in reason, f"Stop not held: {held}")
    say(f"  Stop -> BLOCKED: {reason}")
    fix = {
        "tool_name": "Edit",
        "tool_input": {
            "file_path": str(stage.root / "greet.py"),
            "old_string": 'f"Hello {name}!"',
            "new_string": 'f"Hello {name}"',
        },
    }
    say("\nagent> Edit greet.py (drops the '!')")
    expect(decision(stage.hook("PreToolUse", **fix))[0] == "allow", "the fix was denied")
    (stage.root / "greet.py").write_text('def greet(name):\n    return f"Hello {name}"\n')
    say("\nagent> (ends its turn again)")
    ended = stage.hook("Stop", **said)
    expect(ended.get("decision") != "block", f"Stop still held after the fix: {ended}")
    say("  Stop -> allowed: Ithaca ran the team's check itself, and it passed")
    for kind in ("verify.", "critic."):
        log = stage.ithaca("log", "--kind", kind)
        expect(
            log.returncode == 0 and bool(log.stdout.strip()), f"nothing journaled as {kind}: {log}"
        )
        say(f"\n$ ithaca log --kind {kind}")
        for line in log.stdout.splitlines():
            say("  " + line)


def decision(answer: dict[str, Any]) -> tuple[str, str]:
    specific = answer.get("hookSpecificOutput", {})
    return specific.get("permissionDecision", "allow"), specific.get("permissionDecisionReason", "")


async def _load_protocols(stage: Stage, event_id: str) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    server = StdioServerParameters(
        command=script("ithaca"), args=["--project", str(stage.root), "mcp"], env=stage.env()
    )
    async with Client(server) as client:
        result = await client.call_tool("load_protocols", {"eventId": event_id})
    expect(not result.is_error, f"load_protocols failed: {result.content}")
    structured = result.structured_content
    expect(isinstance(structured, dict), "load_protocols returned no structured bundle")
    assert isinstance(structured, dict)
    return structured
