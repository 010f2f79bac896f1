"""The environment a session's worker runs with: the reserved ``ITHACA_*`` variables.

They tell a worker, whatever launched it, which session it is, where its packet and
output file are, and which state root to use. Configuration can never set them (a
run-plan ``env`` key starting with ``ITHACA_`` is ``WORKER_ENV_RESERVED``), so a worker
cannot be pointed at another session's packet or another project's store.

The execution session travels as ``ITHACA_DELIVERY_SESSION``: ``ITHACA_SESSION_ID``
always names the host session (DESIGN, kernel contract 4), so it is never set here and
is removed from a launched worker's environment.
"""

from __future__ import annotations

from typing import Any

from ithaca.delivery.gate import SESSION_VARIABLE
from ithaca.kernel.project import Project

RESERVED_PREFIX = "ITHACA_"


def reserved(project: Project, session: dict[str, Any], packet: dict[str, Any]) -> dict[str, str]:
    """The reserved variables for ``session`` (a session view) holding ``packet``."""
    found = {
        SESSION_VARIABLE: session["id"],
        "ITHACA_TASK_ID": session["task_id"],
        "ITHACA_PACKET_PATH": packet["path"],
        "ITHACA_PACKET_DIGEST": packet["digest"],
        "ITHACA_OUTPUT_PATH": packet["output_path"],
        "ITHACA_PROJECT_ROOT": project.root,
        "ITHACA_DIR": project.state_root,
        "ITHACA_RUNTIME": project.runtime,
    }
    if session["worktree"] is not None:
        found["ITHACA_WORKTREE"] = session["worktree"]
    return found
