"""`ithaca demo` reports a failing scene plainly (tests/test_package.py plays every scene to
its end from an installed wheel)."""

from __future__ import annotations

import pytest


def test_a_scene_that_fails_inside_an_mcp_client_says_so_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ithaca import demo
    from ithaca.demo import protocols_turn

    def failing(stage: demo.Stage) -> None:
        raise ExceptionGroup("task group", [ExceptionGroup("inner", [demo.DemoFailure("no")])])

    monkeypatch.setattr(protocols_turn, "play", failing)
    said: list[str] = []
    assert demo.run(said.append) == 1
    assert said[-1] == "\nDEMO FAILED: no"
