"""The end-of-turn critic through each real host.

A coding turn that changes a file and tries to end is held at Stop with the exact
verification command; the model is shown that, and the turn ends once the verification
passed after the last change: on Claude Code from the PostToolUse the host sends for a
command that exited 0, on Codex (whose hooks see no exit status) because Ithaca ran the
command itself in the validator sandbox. A turn that ends with the completion report's
``UNVERIFIED:`` line ends at once and is journaled, and shown, as unverified.
"""

from __future__ import annotations

import json
from typing import Any

from tests.hosts_real.host import Host, HostRun
from tests.hosts_real.scripted import Say, Script

CHECK = "python3 -c \"import sys; sys.exit(open('ok.txt').read().strip() != 'yes')\""
PROMPT = "::workflow coding\nMake ok.txt say yes."
HELD = "VERIFICATION_REQUIRED"


def with_verification(host: Host) -> None:
    host.configure(f"[verification]\ncommands = [{json.dumps(CHECK)}]\n")


def verdicts(host: Host) -> list[dict[str, Any]]:
    return [event["payload"] for event in host.log() if event["kind"] == "critic.verdict"]


def held(run: HostRun) -> list[str]:
    """What the model was shown of each time the critic held its turn, oldest first."""
    texts = [request.shown for request in run.model.lane("main")]
    return [text[text.index(HELD) :] for text in texts if HELD in text]


def test_a_turn_is_held_until_its_verification_passed_after_the_last_change(host: Host):
    with_verification(host)
    run = host.run(
        PROMPT,
        Script(
            main=[
                *host.protocols_loaded(),
                host.write("ok.txt", "no"),
                [Say("Done.")],  # held: the check fails
                host.shell(CHECK),
                [Say("Done.")],  # held again
                host.shell("rm ok.txt && printf yes > ok.txt"),
                host.shell(CHECK),
                [Say("Done.")],
            ],
            final_text="Done.",
        ),
    )
    assert run.exit_code == 0, run.stderr
    seen = [event["verdict"] for event in verdicts(host)]
    assert seen == ["blocked", "blocked", "verified"], seen
    shown = held(run)
    assert shown and "Run `python3 -c" in shown[0]
    if host.name == "codex":  # its hooks see no exit status: Ithaca ran the check
        assert "itself and it failed" in shown[0]
        assert verdicts(host)[-1]["measured"] == "ithaca"


def test_an_honest_unverified_end_ends_the_turn_and_is_journaled_as_unverified(host: Host):
    with_verification(host)
    run = host.run(
        PROMPT,
        Script(
            main=[*host.protocols_loaded(), host.write("ok.txt", "no")],
            final_text="Changed ok.txt.\nUNVERIFIED: I could not decide what yes should mean",
        ),
    )
    assert run.exit_code == 0, run.stderr
    (verdict,) = verdicts(host)
    assert verdict["verdict"] == "unverified"
    assert verdict["why"] == "I could not decide what yes should mean"
    assert not [request for request in run.model.lane("main") if HELD in request.shown]
