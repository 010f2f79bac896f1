"""The end-of-turn critic through each real host: "verified" is a run Ithaca made itself.

The project is a real unittest project (``calc.py`` with a bug, and ``test_calc.py``), and
the prompt asks for the fix. A turn that changed it ends only on a run of the project's
runner by Ithaca, in its sandbox, on the content the project has at Stop:

- the honest agent edits and says "Done.": the critic runs the tests itself at Stop and
  the turn ends verified by that run, with nothing more shown to the model;
- an agent that ends on a broken edit is held, whatever its own test run or ``echo OK``
  said, and shown the failing test's output; it fixes, calls Ithaca's ``verify`` tool,
  and the turn ends verified by that call's run;
- an agent that ends with the completion report's ``UNVERIFIED:`` line ends at once,
  journaled as unverified, and no run starts.

The over-eager agent's shortcuts are ``test_critic_gaming``.
"""

from __future__ import annotations

import json
from typing import Any

from tests.calc_project import BROKEN, CALC, TESTS
from tests.hosts_real.claude_host import ClaudeRun
from tests.hosts_real.host import Host, HostRun
from tests.hosts_real.scripted import Say, Script

BUGGY = "def add(a, b):\n    return a * b\n"  # the project as the user hands it over
BUGGY = "def add(a, b):\n    return a * b\n"  # the project as the user hands it over
PROMPT = "::workflow coding\nFix the calculator."
HELD_BY = "Ithaca's critic [VERIFICATION_REQUIRED]: "
REASON_ENDS = "what is unverified and why"
ALL_PASSED = {"collected": 2, "passed": 2, "failed": 0, "errors": 0, "skipped": 0}


def calculator(host: Host) -> None:
    """The user's project: a unittest suite, and ``add`` with a bug ``test_small`` shows."""
    (host.repo / "calc.py").write_text(BUGGY)
    (host.repo / "test_calc.py").write_text(TESTS)


def journal(host: Host, kind: str) -> list[dict[str, Any]]:
    """The journal's ``kind`` events, oldest first, as ``ithaca log`` shows them."""
    return [event for event in host.log() if event["kind"] == kind]


def verdicts(host: Host) -> list[dict[str, Any]]:
    return [event["payload"] for event in journal(host, "critic.verdict")]


def held(run: HostRun) -> list[str]:
    """The critic's reasons for holding the turn, as the model was shown them, oldest
    first (each once: a request shows the whole conversation, and Claude Code shows a
    Stop hook's reason twice)."""
    found: list[str] = []
    for request in run.model.lane("main"):
        for part in request.shown.split(HELD_BY)[1:]:
            reason = HELD_BY + part[: part.index(REASON_ENDS) + len(REASON_ENDS)]
            if reason not in found:
                found.append(reason)
    return found


def ended_unverified(run: HostRun) -> list[str]:
    """The system messages the host printed for the user saying the turn ended UNVERIFIED.
    Claude Code prints the Stop hook's answer (``--include-hook-events``); ``codex exec
    --json`` 0.169.0 prints no hook output at all."""
    if not isinstance(run, ClaudeRun):
        return []
    said = [json.loads(item.get("output") or "{}") for item in run.hook_responses("Stop")]
    return [
        answer["systemMessage"]
        for answer in said
        if "ended UNVERIFIED" in answer.get("systemMessage", "")
    ]


def test_an_honest_turn_ends_verified_by_ithacas_own_run_at_stop(host: Host):
    calculator(host)
    run = host.run(
        PROMPT,
        Script(main=[*host.protocols_loaded(), host.write("calc.py", CALC)], final_text="Done."),
    )
    assert run.exit_code == 0, run.stderr
    assert (host.repo / "calc.py").read_text() == CALC
    (ran,) = journal(host, "verify.run")
    assert ran["actor"] == "hook"  # the critic's own run, at Stop
    assert ran["payload"]["runner"] == "unittest" and ran["payload"]["status"] == "passed"
    assert ran["payload"]["counts"] == ALL_PASSED
    (verdict,) = verdicts(host)
    assert verdict["verdict"] == "verified" and verdict["run"] == ran["payload"]["id"]
    assert verdict["counts"] == ALL_PASSED
    assert not held(run) and not ended_unverified(run)


def test_a_broken_edit_is_held_with_its_failure_until_ithacas_verify_passes(host: Host):
    calculator(host)
    run = host.run(
        PROMPT,
        Script(
            main=[
                *host.protocols_loaded(),
                host.write("calc.py", BROKEN),
                host.shell("python3 -m unittest"),  # the agent's own run: for its eyes only
                host.shell("echo OK"),
                [Say("Done.")],  # held: Ithaca's run at Stop fails
                host.write("calc.py", CALC),
                host.tool("verify", {}),
            ],
            final_text="Done.",
        ),
    )
    assert run.exit_code == 0, run.stderr
    (shown,) = held(run)
    assert "Ithaca's run of unittest failed (1 passed, 1 failed of 2)" in shown, shown
    assert "FAIL: test_small" in shown and "AssertionError: -1 != 3" in shown
    assert "call Ithaca's `verify` MCP tool" in shown and "UNVERIFIED:" in shown
    answer = run.call("ithaca:verify").answer()
    assert answer["status"] == "passed" and answer["verifies_turn"] is True, answer
    assert answer["counts"] == ALL_PASSED and answer["problems"] is None
    runs = journal(host, "verify.run")
    assert [(r["actor"], r["payload"]["status"]) for r in runs] == [
        ("hook", "failed"),  # the critic's, at the first Stop
        ("agent", "passed"),  # the verify tool's
    ]
    assert runs[1]["payload"]["id"] == answer["id"]
    blocked, verified = verdicts(host)
    assert blocked["verdict"] == "blocked" and blocked["run"] == runs[0]["payload"]["id"]
    assert verified["verdict"] == "verified" and verified["run"] == answer["id"]
    assert not ended_unverified(run)


def test_an_honest_unverified_end_ends_at_once_without_a_run(host: Host):
    calculator(host)
    run = host.run(
        PROMPT,
        Script(
            main=[*host.protocols_loaded(), host.write("calc.py", BROKEN)],
            final_text="Changed calc.py.\nUNVERIFIED: subtraction is on purpose",
        ),
    )
    assert run.exit_code == 0, run.stderr
    (verdict,) = verdicts(host)
    assert verdict["verdict"] == "unverified" and verdict["why"] == "subtraction is on purpose"
    assert journal(host, "verify.run") == []
    assert not held(run)
    if host.name == "claude":  # Codex prints no hook output in ``exec --json``
        assert ended_unverified(run) == [
            "Ithaca: this turn ended UNVERIFIED, as the agent said: subtraction is on purpose"
        ]
