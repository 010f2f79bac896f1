"""The kernel: the one store, its migrations and journal, canonical JSON and digests,
confined files, errors, authority, configuration, the call classifier and shell parser,
and the shell guard.

Every part and adapter builds on these modules. The face below names what the adapters
use; it loads each name on first use (PEP 562), so a hook pays only for what it touches.
The kernel names no part above it: it reads what each brings from their manifests
(``ithaca.PARTS``).
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from ithaca.kernel import (
        anchor,
        clock,
        config,
        deadline,
        doctor,
        fingerprint,
        git,
        git_head,
        ids,
        journal,
        lightjson,
        lineage,
        lockdown,
        lost_state,
        markers,
        mcp_calls,
        regular,
        states,
    )
    from ithaca.kernel.authority import AGENT_ENVIRONMENT, agent_caller, require_user
    from ithaca.kernel.call import Call
    from ithaca.kernel.canon import (
        canonical,
        digest,
        digest_bytes,
        digest_excluding,
        escape_pointer,
    )
    from ithaca.kernel.classify import classify_call
    from ithaca.kernel.connection import (
        LATEST_VERSION,
        connect,
        schema_version,
        sqlite,
        write_transaction,
    )
    from ithaca.kernel.errors import (
        Conflict,
        Corrupt,
        InvalidInput,
        IthacaError,
        NotFound,
        Refused,
        invalid_field,
    )
    from ithaca.kernel.files import remove_confined, resolve_confined, write_atomic
    from ithaca.kernel.fingerprint import change, user_wiring
    from ithaca.kernel.gates import (
        ABSTAIN,
        DISPLACED,
        FAILED_CLOSED,
        VIA_PLUGIN,
        GateContext,
        Opinion,
        combine,
        touch_host_session,
    )
    from ithaca.kernel.ids import is_session_id
    from ithaca.kernel.project import (
        IGNORE_LINE,
        RUNTIME_DIR_NAME,
        STATE_DIR_NAME,
        Project,
        find_project,
        git_top,
        pinned_project,
        planned_project,
    )
    from ithaca.kernel.storage_faults import storage_fault
    from ithaca.kernel.store import Store
    from ithaca.kernel.tools import ToolSpec


# How every part's face works, the kernel's own included. A part's package is imported on
# the hook path whenever one of its modules is (a gate, a state predicate), so its face
# must cost nothing until a name is asked for; the type checker reads the same names from
# the ``if TYPE_CHECKING:`` imports beside it, and tests/test_faces.py holds the two lists
# equal and keeps adapters to the faces. (Here rather than in a module of its own: every
# import costs every hook call.)


def lazy(package: str, face: dict[str, str]) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``, whose ``face`` maps each offered name to
    ``"module:attribute"``, or to a bare ``"module"`` to offer that module itself."""

    def __getattr__(name: str) -> Any:
        target = face.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from ithaca import resolve

        value = resolve(target)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


_FACE = {
    "anchor": "ithaca.kernel.anchor",
    "escape_pointer": "ithaca.kernel.canon:escape_pointer",
    "AGENT_ENVIRONMENT": "ithaca.kernel.authority:AGENT_ENVIRONMENT",
    "agent_caller": "ithaca.kernel.authority:agent_caller",
    "require_user": "ithaca.kernel.authority:require_user",
    "Call": "ithaca.kernel.call:Call",
    "canonical": "ithaca.kernel.canon:canonical",
    "digest": "ithaca.kernel.canon:digest",
    "digest_bytes": "ithaca.kernel.canon:digest_bytes",
    "digest_excluding": "ithaca.kernel.canon:digest_excluding",
    "classify_call": "ithaca.kernel.classify:classify_call",
    "clock": "ithaca.kernel.clock",
    "config": "ithaca.kernel.config",
    "connect": "ithaca.kernel.connection:connect",
    "schema_version": "ithaca.kernel.connection:schema_version",
    "sqlite": "ithaca.kernel.connection:sqlite",
    "write_transaction": "ithaca.kernel.connection:write_transaction",
    "doctor": "ithaca.kernel.doctor",
    "Conflict": "ithaca.kernel.errors:Conflict",
    "Corrupt": "ithaca.kernel.errors:Corrupt",
    "InvalidInput": "ithaca.kernel.errors:InvalidInput",
    "IthacaError": "ithaca.kernel.errors:IthacaError",
    "NotFound": "ithaca.kernel.errors:NotFound",
    "Refused": "ithaca.kernel.errors:Refused",
    "invalid_field": "ithaca.kernel.errors:invalid_field",
    "remove_confined": "ithaca.kernel.files:remove_confined",
    "resolve_confined": "ithaca.kernel.files:resolve_confined",
    "write_atomic": "ithaca.kernel.files:write_atomic",
    "change": "ithaca.kernel.fingerprint:change",
    "fingerprint": "ithaca.kernel.fingerprint",
    "user_wiring": "ithaca.kernel.fingerprint:user_wiring",
    "ABSTAIN": "ithaca.kernel.gates:ABSTAIN",
    "DISPLACED": "ithaca.kernel.gates:DISPLACED",
    "VIA_PLUGIN": "ithaca.kernel.gates:VIA_PLUGIN",
    "FAILED_CLOSED": "ithaca.kernel.gates:FAILED_CLOSED",
    "GateContext": "ithaca.kernel.gates:GateContext",
    "Opinion": "ithaca.kernel.gates:Opinion",
    "combine": "ithaca.kernel.gates:combine",
    "touch_host_session": "ithaca.kernel.gates:touch_host_session",
    "deadline": "ithaca.kernel.deadline",
    "git": "ithaca.kernel.git",
    "git_head": "ithaca.kernel.git_head",
    "ids": "ithaca.kernel.ids",
    "is_session_id": "ithaca.kernel.ids:is_session_id",
    "journal": "ithaca.kernel.journal",
    "lightjson": "ithaca.kernel.lightjson",
    "lineage": "ithaca.kernel.lineage",
    "lockdown": "ithaca.kernel.lockdown",
    "lost_state": "ithaca.kernel.lost_state",
    "markers": "ithaca.kernel.markers",
    "mcp_calls": "ithaca.kernel.mcp_calls",
    "regular": "ithaca.kernel.regular",
    "LATEST_VERSION": "ithaca.kernel.connection:LATEST_VERSION",
    "IGNORE_LINE": "ithaca.kernel.project:IGNORE_LINE",
    "Project": "ithaca.kernel.project:Project",
    "RUNTIME_DIR_NAME": "ithaca.kernel.project:RUNTIME_DIR_NAME",
    "STATE_DIR_NAME": "ithaca.kernel.project:STATE_DIR_NAME",
    "find_project": "ithaca.kernel.project:find_project",
    "git_top": "ithaca.kernel.project:git_top",
    "pinned_project": "ithaca.kernel.project:pinned_project",
    "planned_project": "ithaca.kernel.project:planned_project",
    "states": "ithaca.kernel.states",
    "storage_fault": "ithaca.kernel.storage_faults:storage_fault",
    "Store": "ithaca.kernel.store:Store",
    "ToolSpec": "ithaca.kernel.tools:ToolSpec",
}
__all__ = [
    "lazy",
    "anchor",
    "escape_pointer",
    "AGENT_ENVIRONMENT",
    "agent_caller",
    "require_user",
    "Call",
    "canonical",
    "digest",
    "digest_bytes",
    "digest_excluding",
    "classify_call",
    "clock",
    "config",
    "connect",
    "schema_version",
    "sqlite",
    "write_transaction",
    "doctor",
    "Conflict",
    "Corrupt",
    "InvalidInput",
    "IthacaError",
    "NotFound",
    "Refused",
    "invalid_field",
    "remove_confined",
    "resolve_confined",
    "write_atomic",
    "change",
    "fingerprint",
    "user_wiring",
    "ABSTAIN",
    "DISPLACED",
    "VIA_PLUGIN",
    "FAILED_CLOSED",
    "GateContext",
    "Opinion",
    "combine",
    "touch_host_session",
    "deadline",
    "git",
    "git_head",
    "ids",
    "is_session_id",
    "journal",
    "lightjson",
    "lineage",
    "lockdown",
    "lost_state",
    "markers",
    "mcp_calls",
    "regular",
    "LATEST_VERSION",
    "IGNORE_LINE",
    "Project",
    "RUNTIME_DIR_NAME",
    "STATE_DIR_NAME",
    "find_project",
    "git_top",
    "pinned_project",
    "planned_project",
    "states",
    "storage_fault",
    "Store",
    "ToolSpec",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# What the kernel brings: its own tables, the shell guard and the project commands.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = (
    (1, "kernel.initial", "ithaca.kernel.tables:KERNEL_V1"),
    (10, "kernel.mcp_call_tickets", "ithaca.kernel.mcp_calls:SCHEMA"),
    (11, "kernel.lockdown", "ithaca.kernel.lockdown:SCHEMA"),
    (13, "kernel.journal_seals", "ithaca.kernel.tables:JOURNAL_SEALS"),
)
GATES = (("ithaca.kernel.guard", ("PreToolUse",)),)
CLI_COMMANDS = {
    "init": "ithaca.cli.commands.init:command",
    "status": "ithaca.cli.commands.status:command",
    "next": "ithaca.cli.commands.next:command",
    "log": "ithaca.cli.commands.log:command",
    "doctor": "ithaca.cli.commands.doctor:group",
}
