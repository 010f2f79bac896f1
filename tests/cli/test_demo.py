"""`ithaca demo`, the README's first command, plays every scene to its end."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_demo_plays_to_the_end():
    ithaca = Path(sys.executable).parent / "ithaca"
    done = subprocess.run([str(ithaca), "demo"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.rstrip().endswith("Demo complete: every step behaved as Ithaca promises.")
