"""``ithaca demo`` as a whole: every scene in order, and a broken promise failing it."""

from __future__ import annotations

import importlib

import pytest

from ithaca import demo
from ithaca.demo import DemoFailure, Stage

SCENES = ("protocols_turn", "debugging_session", "delivery_run", "ultragoal_pursuit", "team_step")


def test_the_demo_plays_every_scene_in_order_and_reports_completion(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    played: list[str] = []
    for scene in SCENES:
        module = importlib.import_module(f"ithaca.demo.{scene}")
        monkeypatch.setattr(module, "play", lambda stage, name=scene: played.append(name))
    said: list[str] = []

    assert demo.run(said.append) == 0
    assert played == list(SCENES)
    assert said[-1].startswith("\nDemo complete")


def test_a_scene_that_sees_a_broken_promise_fails_the_demo_and_stops_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    played: list[str] = []

    def broken(stage: Stage) -> None:
        raise DemoFailure("request_complete did not complete")

    for scene in SCENES:
        module = importlib.import_module(f"ithaca.demo.{scene}")
        monkeypatch.setattr(module, "play", lambda stage, name=scene: played.append(name))
    monkeypatch.setattr(importlib.import_module("ithaca.demo.ultragoal_pursuit"), "play", broken)
    said: list[str] = []

    assert demo.run(said.append) == 1
    assert said[-1] == "\nDEMO FAILED: request_complete did not complete"
    assert "team_step" not in played
