"""A protocols turn through the real Codex: its hooks run because `ithaca install codex`
recorded the user's trust, and a mutating shell call is refused until the bundle loads."""

from __future__ import annotations

import tomllib

from tests.hosts_real.codex_host import CodexHost, shell
from tests.hosts_real.scripted import Script


def test_codex_runs_ithacas_hooks_and_denies_mutation_before_load_protocols(codex: CodexHost):
    user_config = tomllib.loads((codex.home / "config.toml").read_text())
    assert user_config["projects"][str(codex.repo)]["trust_level"] == "trusted"
    assert len(user_config["hooks"]["state"]) == 6
    run = codex.run("Write hello into notes.txt", Script(main=[shell("echo hello > notes.txt")]))
    assert run.exit_code == 0, run.stderr
    first = run.model.lane("main")[0]
    assert "Ithaca admitted this prompt as event" in first.shown
    (refusal,) = run.outputs()
    assert "load_protocols" in refusal
    assert not (codex.repo / "notes.txt").exists()
    assert codex.ithaca_cli("install", "--doctor", "codex").returncode == 0
