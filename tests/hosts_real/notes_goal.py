"""The one-story objective the real-host Ultragoal tests pursue ("notes.txt says hello"),
as the agent's ``ultragoal`` calls spell it."""

from __future__ import annotations

from typing import Any

OUTCOME = "notes.txt says hello"
STORY = {
    "id": "S1",
    "story": "notes.txt says hello",
    "acceptance_criteria": ["notes.txt holds the line hello"],
    "verification_surface": "notes.txt",
}
PLANNING = {
    "operation": "set",
    "phase": "planning",
    "outcome": OUTCOME,
    "verification_surface": "notes.txt",
}
# The team lets the agent relay the user's approval of the stories: the scripted model
# plays planning in one turn, so the user has no moment of their own to confirm them.
RELAYED_APPROVAL = "[ultragoal]\nstrict_approval = false\n"
APPROVE_S1 = {
    "operation": "record_story_verdict",
    "id": "S1",
    "verdict": "APPROVE",
    "evidence_refs": ["notes.txt"],
    "verifier": "self-check",
}


def to_pursuing(story: dict[str, Any] = STORY) -> list[dict[str, Any]]:
    """Plan the one story, confirm it (relayed) and enter pursuing."""
    return [
        PLANNING,
        {"operation": "set_stories", "stories": [story]},
        {"operation": "confirm_all_stories"},
        {"operation": "set", "phase": "pursuing"},
    ]
