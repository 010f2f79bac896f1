"""``ithaca demo``'s Ultragoal scene, played through the real hook process, MCP server
and CLI in a throwaway project."""

from __future__ import annotations

from pathlib import Path

from ithaca.demo import Stage, ultragoal_pursuit


def test_the_ultragoal_scene_refuses_every_shortcut_and_then_completes(
    project_dir: Path, tmp_path: Path
) -> None:
    said: list[str] = []
    home = tmp_path / "home"
    home.mkdir()
    ultragoal_pursuit.play(Stage(root=project_dir, home=home, say=said.append))
    shown = "\n".join(said)

    assert "Stop -> BLOCK: [ULTRAGOAL 1/10" in shown
    assert "Current story S1" in shown
    assert "confirm_all_stories -> REFUSED: AUTHORITY_USER_ONLY (strict approval)" in shown
    assert "they type demo-ult) -> S1, S2 confirmed by the user" in shown
    assert "record_story_verdict S1 APPROVE -> REFUSED: STORY_VALIDATOR_NOT_PASSED" in shown
    assert "run_story_validator S1 -> fail: wrong slugs" in shown
    assert "run_story_validator S1 -> pass: every title slugs correctly" in shown
    assert "PreToolUse -> DENY: Refused by Ithaca policy [" in shown
    assert "on purpose (not a hook failure). Ultragoal: submit-review and review-ticket" in shown
    assert (
        shown.count(
            "agent's words quoted, last line ULTRAGOAL_REVIEW session=demo-ultragoal-session"
        )
        == 2
    )
    assert "(COMPLETE, no files read) -> REFUSED: REVIEW_COVERS_NO_CHANGE" in shown
    assert "-> REQUEST_CHANGES, 1 to repair" in shown
    assert "(no findings) -> APPROVE; dispatches used 2/5" in shown

    refusals = [line for line in said if "request_complete -> REFUSED: " in line]
    assert len(refusals) == 5
    assert refusals[0].endswith("REFUSED: PHASE_PLANNING")
    assert "6:STORY_VALIDATOR_NOT_PASSED" in refusals[1] and "7:REVIEW_MISSING" in refusals[1]
    assert "7:REVIEW_MISSING" in refusals[2] and "6:" not in refusals[2]
    assert "7:REVIEW_NOT_ELIGIBLE" in refusals[3]
    assert "1:COMPLETE_VERDICT_NOT_APPROVE" in refusals[4] and "7:" not in refusals[4]

    assert "request_complete -> phase complete; every story confirmed by the user" in shown
    assert "Stop -> allowed: the pursuit is complete" in shown
    assert said[-1].endswith("complete")
