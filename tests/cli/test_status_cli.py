"""``ithaca status`` at a glance and ``ithaca next``: a line per area with the command that
moves it on, the one next thing to do first."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from ithaca import open_project
from ithaca.cli.entry import cli

STORY = {
    "id": "A",
    "story": "Accept trailing commas",
    "acceptance_criteria": ["[1,] parses"],
    "verification_surface": "test passes",
}


def run(project_dir: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--project", str(project_dir), *args])


def glance(project_dir: Path) -> dict[str, Any]:
    done = run(project_dir, "status", "--json")
    assert done.exit_code == 0, done.output
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_fresh_project_says_to_wire_a_host_first(project_dir: Path) -> None:
    shown = run(project_dir, "status").stdout
    assert "  hosts      no host is wired" in shown
    assert "  delivery   no open change" in shown
    assert "  ultragoal  no pursuit" in shown
    assert shown.rstrip().endswith("next: ithaca install claude  (or: ithaca install codex)")
    step = json.loads(run(project_dir, "next", "--json").stdout)
    assert (step["area"], step["waiting"]) == ("hosts", True)
    assert run(project_dir, "next").stdout.splitlines()[0] == "hosts: no host is wired"


def test_delivery_names_the_change_and_its_next_task(project_dir: Path) -> None:
    project = open_project(project_dir)
    entries = [
        {
            "kind": "change_contract",
            "action": "open",
            "idempotency_key": "k1",
            "data": {"id": "add-login", "kind": "quick", "title": "Login", "intent": "Sign in."},
        },
        {
            "kind": "task_contract",
            "action": "define",
            "idempotency_key": "k2",
            "data": {
                "id": "T-1",
                "change_id": "add-login",
                "title": "Login form",
                "verification": {"argv": ["pytest"]},
            },
        },
    ]
    project.delivery.record({"entries": entries})
    project.close()
    (delivery,) = [found for found in glance(project_dir)["glance"] if found["area"] == "delivery"]
    assert delivery["state"] == "change add-login (active), next task T-1: Login form (pending)"
    assert delivery["next"] == "ithaca context"


def test_stories_waiting_for_the_user_come_before_the_agents_work(project_dir: Path) -> None:
    project = open_project(project_dir)
    session = {"session": "sess-glance"}
    project.ultragoal.perform(
        {"operation": "set", "phase": "planning", "outcome": "Parser", **session}, actor="agent"
    )
    stories = {"operation": "set_stories", "stories": [STORY], **session}
    project.ultragoal.perform(stories, actor="agent")
    project.close()
    found = glance(project_dir)
    (pursuit,) = [line for line in found["glance"] if line["area"] == "ultragoal"]
    assert pursuit["state"] == "sess-glance: planning; 1 stories wait for your confirmation"
    assert pursuit["next"] == "ithaca ultragoal confirm-all-stories --session sess-glance"
    # A host is still not wired, and that comes first.
    assert found["next"]["area"] == "hosts"
