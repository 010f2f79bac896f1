"""An Ultragoal pursuit through each real host: once armed, every time the model ends its
turn the Stop gate blocks and the host hands the model Ithaca's continuation, until the
no-progress budget is spent; then the pursuit pauses and the host may stop.

The budget is the only cap on Codex, which re-runs a blocked turn with
``stop_hook_active`` set and no count of its own. Claude Code honours a limited number of
consecutive Stop blocks (``CLAUDE_CODE_STOP_HOOK_BLOCK_CAP``, which ``ithaca install
claude`` sets) and overrides the next: Ithaca warns when arming a budget above it, marks
the pursuit host-capped at that block, and resumes it on the next turn.

What a Stop block shows the model never names a machine path (Codex tags its hook prompt
with the hooks file it ran: that attribute is the host's, not Ithaca's text).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.hosts_real.claude_host import ClaudeHost
from tests.hosts_real.codex_host import CodexHost
from tests.hosts_real.host import Host, HostRun
from tests.hosts_real.notes_goal import OUTCOME, RELAYED_APPROVAL, to_pursuing
from tests.hosts_real.scripted import Request, Script

PROMPT = "Pursue the goal: notes.txt says hello"
ENDS_TURN = "Nothing left to do."  # the model's answer each time it ends its turn
PAUSED = "[ULTRAGOAL paused: iterations budget spent]"
HOST_CAP_NOTE = "The host ends this turn after this many consecutive blocks"
LOOP_EVENTS = (
    "ultragoal.stop",
    "ultragoal.host_capped",
    "ultragoal.budget_limited",
    "ultragoal.reinjected",
)


def with_budget(host: Host, max_iterations: int) -> None:
    """The team's no-progress budget, and its relayed approval of the stories."""
    host.configure(f"{RELAYED_APPROVAL}max_iterations_default = {max_iterations}\n")


def armed(host: Host) -> Script:
    """Plan one story, relay the user's approval, arm the loop, then only end turns."""
    return Script(
        main=[*host.protocols_loaded(), *(host.tool("ultragoal", s) for s in to_pursuing())],
        final_text=ENDS_TURN,
    )


def stops(run: HostRun) -> list[str]:
    """What the host showed the model after each turn it ended (a blocked Stop's text)."""
    return [stop_text(request) for request in run.model.lane("main") if ENDS_TURN in request.shown]


def stop_text(request: Request) -> str:
    """The text after the model's last end of turn, less Codex's ``hook_run_id`` attribute
    (``stop:N:<path of the hooks file>``: Codex's wrapper, not Ithaca's words)."""
    return re.sub(r' hook_run_id="[^"]*"', "", request.shown.rsplit(ENDS_TURN, 1)[1])


def budget(text: str) -> str:
    """The budget a continuation shows (``1/3``), or ``paused:`` for the pause."""
    found = re.search(r"\[ULTRAGOAL (\S+)", text)
    return found.group(1) if found else ""


def session_of(run: HostRun) -> str:
    return str(run.call("ithaca:ultragoal", given='"pursuing"').answer()["session_id"])


def pursuit(host: Host, session: str) -> dict[str, Any]:
    """``ithaca ultragoal status --json`` as the user reads it."""
    done = host.ithaca_cli("ultragoal", "status", "--json", "--session", session)
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def loop_events(host: Host) -> list[tuple[str, int | None]]:
    """What ``ithaca log`` recorded of the loop: (kind, iteration)."""
    log = host.log()
    return [(e["kind"], e["payload"].get("iteration")) for e in log if e["kind"] in LOOP_EVENTS]


def test_the_stop_gate_keeps_the_host_working_until_the_budget_is_spent(host: Host):
    with_budget(host, 3)
    run = host.run(PROMPT, armed(host))
    assert run.exit_code == 0, run.stderr
    session = session_of(run)
    shown = stops(run)
    # Four turns ended: three blocked (two continuations, then the pause), the last allowed.
    assert [budget(text) for text in shown] == ["1/3", "2/3", "paused:"], shown
    for text in shown[:2]:
        assert OUTCOME in text and "Current story S1" in text and "request-complete" in text
    assert PAUSED in shown[2] and "ithaca ultragoal resume-pursuit" in shown[2]
    for text in shown:
        assert str(host.root) not in text, text
        assert HOST_CAP_NOTE not in text
    assert host.ithaca_cli("ultragoal", "status", "--session", session).stdout.strip() == (
        "budget_limited"
    )
    state = pursuit(host, session)["state"]
    assert (state["iteration"], state["ithaca"]["budget_kind"]) == (3, "iterations")
    assert loop_events(host) == [
        ("ultragoal.stop", 1),
        ("ultragoal.stop", 2),
        ("ultragoal.budget_limited", None),
    ]


def test_codex_has_no_cap_of_its_own_on_stop_blocks(codex: CodexHost):
    """A budget beyond Claude Code's default cap (8) runs out in one Codex turn."""
    with_budget(codex, 10)
    run = codex.run(PROMPT, armed(codex))
    assert run.exit_code == 0, run.stderr
    shown = stops(run)
    assert [budget(text) for text in shown] == [*(f"{n}/10" for n in range(1, 10)), "paused:"]
    assert not any(HOST_CAP_NOTE in text for text in shown)
    kinds = [kind for kind, _ in loop_events(codex)]
    assert kinds == ["ultragoal.stop"] * 9 + ["ultragoal.budget_limited"]
    assert pursuit(codex, session_of(run))["state"]["ithaca"]["host_capped"] is False


def test_claude_codes_stop_cap_ends_the_turn_and_the_next_turn_resumes(claude: ClaudeHost):
    with_budget(claude, 4)
    claude.ithaca_cli("install", "claude", "--stop-hook-block-cap", "2")
    first = claude.run(PROMPT, armed(claude))
    assert first.exit_code == 0, first.stderr
    session = session_of(first)
    warned = first.call("ithaca:ultragoal", given='"pursuing"').answer()["diagnostics"]
    assert [item["code"] for item in warned] == ["host_stop_cap_below_budget"], warned
    # Claude Code honours two blocks, then overrides Ithaca's third and ends the turn.
    assert [budget(text) for text in stops(first)] == ["1/4", "2/4"]
    notices = [e.get("content", "") for e in first.events if e.get("subtype") == "informational"]
    assert any("blocked the turn from ending 3 consecutive times" in n for n in notices), notices
    assert pursuit(claude, session)["status"] == "pursuing"
    capped = [("ultragoal.stop", 1), ("ultragoal.stop", 2), ("ultragoal.host_capped", 3)]
    assert loop_events(claude) == capped

    # The user's next prompt in that session (the same words, so the resumed conversation
    # still opens with the main prompt): the pursuit resumes, and its budget runs out.
    second = claude.run(PROMPT, Script(main=[], final_text=ENDS_TURN), "--resume", session)
    assert second.exit_code == 0, second.stderr
    resumed = second.first_request().shown.rsplit(PROMPT, 1)[1]  # after the new prompt
    assert "ULTRAGOAL RESUMED (the host ended the previous turn)" in resumed, resumed
    assert budget(resumed) == "3/4" and str(claude.root) not in resumed
    _, paused = second.model.lane("main")
    assert budget(stop_text(paused)) == "paused:"
    assert pursuit(claude, session)["status"] == "budget_limited"
    resumed_and_paused = [("ultragoal.reinjected", None), ("ultragoal.budget_limited", None)]
    assert loop_events(claude) == capped + resumed_and_paused
