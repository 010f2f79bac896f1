"""Registering the ledger's Git merge driver (docs/delivery.md, "The team ledger: sync").

Two pieces make Git call the driver: the attribute ``.ithaca/tasks/tasks.json
merge=ithaca-ledger`` in ``.gitattributes`` (tracked, so every clone has it) and
``merge.ithaca-ledger.driver`` in the repository's own config (which clones do not
copy, hence ``registered`` for ``sync inspect`` and ``doctor``). ``ithaca init``,
``ithaca install`` and ``ithaca sync install-driver`` call ``register``; it changes only
what is missing and is safe to repeat.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.kernel import git
from ithaca.kernel.errors import Refused
from ithaca.kernel.files import write_atomic
from ithaca.kernel.project import Project, git_top

DRIVER = "ithaca-ledger"
DRIVER_NAME = "Ithaca team ledger, merged record by record"
ATTRIBUTES = ".gitattributes"


def default_command() -> str:
    """``<absolute ithaca> sync merge-driver %O %A %B %P``."""
    beside = os.path.join(os.path.dirname(sys.executable), "ithaca")
    found = beside if os.access(beside, os.X_OK) else shutil.which("ithaca")
    program = shlex.quote(found) if found else f"{shlex.quote(sys.executable)} -m ithaca"
    return f"{program} sync merge-driver %O %A %B %P"


def ledger_pattern(project: Project, top: str) -> str:
    """The ledger's path as ``.gitattributes`` at the repository top names it."""
    absolute = os.path.join(project.state_root, LEDGER_PATH)
    return os.path.relpath(absolute, os.path.realpath(top)).replace(os.sep, "/")


def register(project: Project, command: str | None = None) -> list[str]:
    """Add what is missing of the attribute and the driver config; returns what changed."""
    top = _top(project)
    changed = []
    line = f"{ledger_pattern(project, top)} merge={DRIVER}"
    path = os.path.join(top, ATTRIBUTES)
    existing = ""
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as stream:
            existing = stream.read()
    if line not in existing.splitlines():
        prefix = existing if not existing or existing.endswith("\n") else existing + "\n"
        write_atomic(top, ATTRIBUTES, prefix + line + "\n")
        changed.append(f"{ATTRIBUTES}: {line}")
    wanted = {"name": DRIVER_NAME, "driver": command or default_command()}
    for name, value in wanted.items():
        if _config(top, f"merge.{DRIVER}.{name}") != value:
            _git(top, "config", f"merge.{DRIVER}.{name}", value)
            changed.append(f"git config merge.{DRIVER}.{name}")
    return changed


def registered(project: Project) -> bool:
    """Whether Git would run a driver for the ledger: the attribute applies and the
    repository config names a driver command."""
    top = git_top(project.root)
    if top is None:
        return False
    pattern = ledger_pattern(project, top)
    answer = _git(top, "check-attr", "merge", "--", pattern, check=False)
    return answer.rstrip().endswith(f": merge: {DRIVER}") and bool(
        _config(top, f"merge.{DRIVER}.driver")
    )


def _top(project: Project) -> str:
    top = git_top(project.root)
    if top is None:
        raise Refused(
            "GIT_PREREQUISITE_MISSING",
            f"{project.root} is not in a Git repository; the ledger's merge driver needs one",
            {"root": project.root},
        )
    return top


def _config(top: str, name: str) -> str | None:
    value = _git(top, "config", "--get", name, check=False).rstrip("\n")
    return value or None


def _git(top: str, *args: str, check: bool = True) -> str:
    done = git.run_text(args, cwd=top, timeout=30)
    if check and done.returncode != 0:
        raise Refused(
            "GIT_PREREQUISITE_MISSING",
            f"git {' '.join(args[:2])} failed: {done.stderr.strip()}",
            {"args": list(args)},
        )
    return done.stdout
