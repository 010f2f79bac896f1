"""What ``ithaca init`` sets up for delivery: the report templates and the team ledger.

In a Git repository the ledger's merge driver is registered (skipped quietly when Git
cannot) and the team ledger is published: generation 0 with a new project id, or, in a
fresh clone, the checked-out ledger imported. Running it again changes nothing.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ithaca.delivery.ledger import driver_setup
from ithaca.delivery.ledger.format import LEDGER_PATH
from ithaca.delivery.sync import publish
from ithaca.delivery.templates import ship
from ithaca.kernel import Refused
from ithaca.kernel.project import git_top

if TYPE_CHECKING:
    from ithaca.delivery.units.recoverable import Units
    from ithaca.kernel.project import Project
    from ithaca.kernel.store import Store


def set_up(project: Project, store: Store, units: Units) -> list[str]:
    """What was made, each as a path relative to the project root or a description."""
    made = [_relative(os.path.join(project.state_root, path), project.root) for path in ship(units)]
    top = git_top(project.root)
    if top is None:
        return made
    state_root = os.path.realpath(project.state_root)
    if state_root.startswith(os.path.realpath(top) + os.sep):
        try:
            made.extend(driver_setup.register(project))
        except (Refused, OSError):
            pass  # no usable Git: `ithaca sync install-driver` registers it later
    ledger = os.path.join(project.state_root, LEDGER_PATH)
    existed = os.path.exists(ledger)
    publish.auto_publish(project, store, units)
    if not existed and os.path.exists(ledger):
        made.append(_relative(ledger, project.root))
    return made


def _relative(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")
