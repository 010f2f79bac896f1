"""Lost state in the real Claude Code: the user removed ``.ithaca/`` between sessions (in
the sandboxed profile the agent's own shell cannot), and the next session's hooks fail
closed instead of falling silent. The prompt reaches the model with what was lost; the
agent's Write is refused with the code and the commands that restore it, and the file is
not written."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tests.hosts_real.claude_host import ClaudeHost
from tests.hosts_real.scripted import Script


def test_with_the_state_folder_removed_the_next_write_is_refused(
    claude: ClaudeHost, monkeypatch: pytest.MonkeyPatch
):
    shutil.rmtree(claude.repo / ".ithaca")  # the user, before the session starts
    # The harness accepts the test's own set-up in the project's state; there is none.
    monkeypatch.setattr("tests.hosts_real.host.accept", lambda root, env=None: None)

    run = claude.run("Add a notes file", Script(main=[claude.write("notes.txt", "hello\n")]))

    assert run.exit_code == 0, run.stderr
    told = run.first_request().shown
    assert "Ithaca could not admit this prompt [STATE_MISSING]" in told
    refused = run.call("write")
    assert refused.is_error
    assert "Refused by Ithaca policy [STATE_MISSING]" in refused.text, refused.text
    assert "`.ithaca/` is gone" in refused.text
    assert "`git checkout -- .ithaca`" in refused.text and "`ithaca init`" in refused.text
    assert not (claude.repo / "notes.txt").exists()
    assert not _holds_state(claude.repo / ".ithaca")  # nothing made new state meanwhile


def _holds_state(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())
