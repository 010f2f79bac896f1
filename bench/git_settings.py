"""What running Git with Ithaca's settings only costs the end-of-turn critic.

The critic fingerprints the working tree (``kernel.worktree.fingerprint``) on a turn's
first change, on each verification and at Stop. Since Git obeys no program the
repository names (``kernel.git``), a status first lists the repository's settings, so the
fingerprint starts three Git processes where it started two. This script times, in
alternation and in the same run:

- *plain*: the two Git commands the fingerprint runs, started directly with the
  repository's own settings (``git rev-parse --show-toplevel`` and ``git status …``);
- *ithaca*: ``worktree.fingerprint`` as the hooks call it;

on a repository of ``--files`` tracked files with a few changed, and prints the medians
and their ratio.

    .venv/bin/python bench/git_settings.py [--quick] [--files N]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import parser
from ithaca.kernel import worktree


def main() -> int:
    options = parser(__doc__.splitlines()[0])
    options.add_argument("--files", type=int, default=2000)
    args = options.parse_args()
    runs = 20 if args.quick else 100
    with tempfile.TemporaryDirectory(prefix="ithaca-bench-git-") as folder:
        root = Path(folder)
        _repository(root, args.files)
        plain = [
            ["git", "-C", str(root), "rev-parse", "--show-toplevel"],
            ["git", "-C", str(root), *worktree.STATUS, "--", ".", worktree.EXCLUDED],
        ]
        timings: dict[str, list[float]] = {"plain": [], "ithaca": []}
        for _ in range(runs):
            started = time.perf_counter()
            for argv in plain:
                subprocess.run(argv, capture_output=True, check=True)
            timings["plain"].append(time.perf_counter() - started)
            started = time.perf_counter()
            assert worktree.fingerprint(str(root)) is not None
            timings["ithaca"].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) * 1000 for name, values in timings.items()}
    print(f"repository: {args.files} tracked files, 5 changed; {runs} alternating runs")
    for name, value in medians.items():
        print(f"  {name:7s} median {value:7.2f} ms")
    print(f"  ithaca / plain: {medians['ithaca'] / medians['plain']:.2f}x")
    return 0


def _repository(root: Path, files: int) -> None:
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid"}
    env |= {"GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for number in range(files):
        folder = root / f"pkg{number % 40}"
        folder.mkdir(exist_ok=True)
        (folder / f"module{number}.py").write_text(f"VALUE = {number}\n")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "files"], check=True, env=env)
    for number in range(5):
        (root / f"pkg{number}" / f"module{number}.py").write_text("VALUE = 'changed'\n")


if __name__ == "__main__":
    sys.exit(main())
