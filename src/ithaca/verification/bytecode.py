"""Compiled bytecode for the runner's own libraries, which no verification run can write.

A verification run compiles Python into a fresh folder of its own
(``PYTHONPYCACHEPREFIX``), so that bytecode the agent planted in the project's
``__pycache__`` is never loaded. Compiling pytest and the standard library anew on every
run costs a second or more. So Ithaca keeps, per interpreter, a folder of bytecode for
the modules a runner loads before it reads any test: compiled by Ithaca itself, outside
the sandbox, by that interpreter in isolated mode (``-I``: no environment, no user site,
no current folder) on one test of Ithaca's own in an empty folder, so nothing of the
project runs; and laid
read-only into the run, which reads it and cannot write it (a module the run compiles
itself, the project's above all, is compiled in memory). An interpreter inside the
project, which the agent could have replaced, gets no such folder.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile

from ithaca.kernel.config import home

# What makes each runner load the modules a run loads, on a test of Ithaca's own (written
# to ``test_warm.py`` in the empty folder): collection, assertion rewriting, the report.
WARMERS = {
    "pytest": ("-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=warm.xml"),
    "unittest": ("-m", "unittest", "-q", "test_warm"),
}
WARM_TEST = (
    "import unittest\n\n\nclass Warm(unittest.TestCase):\n"
    "    def test_warm(self):\n        assert True\n"
)
WARM_TIMEOUT_S = 120


def cache_for(interpreter: str, runner: str, root: str) -> str | None:
    """The folder of compiled libraries for ``interpreter`` running ``runner``, warmed if
    it was not, or None (an interpreter in the project, a runner with no warmer, a warm
    that failed)."""
    if runner not in WARMERS:
        return None
    real = os.path.realpath(interpreter)
    top = os.path.realpath(root).rstrip(os.sep) + os.sep
    if any(path.startswith(top) for path in (real, os.path.abspath(interpreter) + os.sep)):
        return None
    try:
        st = os.stat(real)
    except OSError:
        return None
    # The path as the run starts it: a virtual environment's python is a link to the base
    # interpreter, and only started through the link does it see the environment's packages.
    named = hashlib.sha256(f"{interpreter}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    folder = os.path.join(home(), "pycache", named[:24])
    marker = os.path.join(folder, f".warm-{runner}")
    if os.path.exists(marker):
        return folder
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="ithaca-warm-") as empty:
        with open(os.path.join(empty, "test_warm.py"), "w", encoding="utf-8") as handle:
            handle.write(WARM_TEST)
        try:
            done = subprocess.run(
                [interpreter, "-I", "-X", f"pycache_prefix={folder}", *WARMERS[runner]],
                cwd=empty,
                env={"PATH": os.defpath, "HOME": empty, "LANG": "C.UTF-8"},
                capture_output=True,
                timeout=WARM_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
    if done.returncode != 0:
        return None
    with open(marker, "w", encoding="utf-8") as handle:
        handle.write(interpreter + "\n")
    return folder
