"""A subagent's calls through the real Claude Code pass through the same gates as its
parent's: delegating is itself a mutating call that waits for the bundle, and the worker's
own calls meet the turn's team protocol and the kernel guard. (Codex 0.169 in ``exec``
offers the model no subagent tool, so this scenario is Claude Code's alone.)"""

from __future__ import annotations

import json

from tests.hosts_real.claude_host import ClaudeHost
from tests.hosts_real.messages_api import tool_results, tool_uses
from tests.hosts_real.scripted import Call, Script

from ithaca.demo.protocols_turn import NO_PUSH

DELEGATE = {
    "description": "Write the note",
    "prompt": "Write sub.txt, then try to publish the branch.",
    "subagent_type": "general-purpose",
}


def test_a_subagents_mutating_calls_are_gated_like_its_parents(claude: ClaudeHost):
    (claude.repo / ".ithaca" / "protocols" / "team.no-push.json").write_text(json.dumps(NO_PUSH))
    run = claude.run(
        "Delegate the note to a worker",
        Script(
            main=[
                [Call("Agent", DELEGATE)],
                *claude.protocols_loaded(),
                [Call("Agent", DELEGATE)],
            ],
            subagent=[
                claude.write("sub.txt", "from the worker\n"),
                claude.shell("git push origin main"),
                claude.shell("rm -rf .ithaca/protocols"),
            ],
        ),
    )
    assert run.exit_code == 0, run.stderr
    early, late = run.calls("Agent")
    assert early.is_error and "load_protocols" in early.text and "Refused by Ithaca" in early.text
    assert not late.is_error, late
    worker = run.model.lane("subagent")
    assert worker, "the worker never reached the model"
    last = worker[-1].body
    uses, results = tool_uses(last), tool_results(last)
    shown = {json.dumps(uses[key]["input"]): results[key] for key in uses}
    (write,) = [result for given, result in shown.items() if "sub.txt" in given]
    (push,) = [result for given, result in shown.items() if "git push" in given]
    (remove,) = [result for given, result in shown.items() if "rm -rf" in given]
    assert not write[0] and (claude.repo / "sub.txt").read_text() == "from the worker\n"
    assert push[0] and "team.no-push" in push[1] and "Refused by Ithaca" in push[1]
    assert remove[0] and ".ithaca/" in remove[1]
    assert (claude.repo / ".ithaca" / "protocols" / "team.no-push.json").exists()
