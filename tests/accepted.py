"""A test's own edit of a file Ithaca protects, accepted as the user accepts theirs.

Configuration and team rule files are part of the effect check's fingerprint: a change
Ithaca did not make puts the next hook call's session in lockdown. A test that sets a
project up by writing them plays the user, who accepts such an edit with
``ithaca doctor lift-lockdown``; this records the same acceptance without the terminal.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ithaca.kernel import lockdown
from ithaca.kernel.project import find_project


def accept(root: Path, env: dict[str, str] | None = None) -> None:
    """Accept the protected files of the project at ``root`` as they are now, as seen with
    the user settings folders of ``env`` (a host's environment) when given."""
    with pytest.MonkeyPatch.context() as patch:
        if env:
            for name in ("HOME", "ITHACA_HOME", "CODEX_HOME", "CLAUDE_CONFIG_DIR"):
                if name in env:
                    patch.setenv(name, env[name])
                else:
                    patch.delenv(name, raising=False)
        project = find_project(root)
        assert project is not None, f"no Ithaca project at {root}"
        lockdown.accept(project, reason="the test's own set-up")
