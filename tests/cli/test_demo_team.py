"""``ithaca demo``'s team step, played through real ``git``, the ``ithaca`` CLI, the MCP
server and the hook process in a throwaway repository."""

from __future__ import annotations

import json
import re
from pathlib import Path

from ithaca.demo import Stage, team_step


def test_the_team_step_merges_two_branches_and_completes_a_task_in_its_session(
    project_dir: Path, tmp_path: Path
) -> None:
    said: list[str] = []
    home = tmp_path / "home"
    home.mkdir()
    team_step.play(Stage(root=project_dir, home=home, say=said.append))
    shown = "\n".join(said)

    assert "git merge FETCH_HEAD -> merged cleanly: the ithaca-ledger driver merged" in shown
    assert re.search(r"generation (\d+) = max\(\d+, \d+\) \+ 1, no conflicts", shown)
    assert "T-3 r2: greet() takes shout=True" in shown
    assert "T-4 r2: GREETING.md shows shout=True" in shown
    assert "ithaca sync import -> applied 1: the teammate's T-4 joins your T-3" in shown

    assert "agent> Bash: ithaca session admission T-3 -> spawn" in shown
    assert "git status --porcelain -> clean; .ithaca -> " in shown
    assert "PostToolUse -> heartbeat: lease until " in shown
    assert "Stop -> heartbeat: lease until " in shown
    assert "session admission T-3 -> abandon (not takeover)" in shown

    assert "(packet digest one character off) -> REFUSED: PACKET_DIGEST_MISMATCH" in shown
    assert "-> T-3 completed at " in shown
    assert said[-1].endswith("tasks.json shows T-3 completed")

    ledger = json.loads((project_dir / ".ithaca" / "tasks" / "tasks.json").read_text())
    statuses = {item["id"]: item["body"]["status"] for item in ledger["records"]}
    assert (statuses["T-3"], statuses["T-4"]) == ("completed", "pending")
