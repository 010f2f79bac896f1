"""SessionStart: tell the agent when its shell is not sandboxed.

The install profile is the user's choice (``hosts.install.sandbox``). In the unsandboxed one,
the agent's shell commands are checked only by reading their text, and the session
should start knowing that this is a best-effort guard, not a wall: the breadcrumb says so.
The profile is read from the host's install manifest; a project installed before profiles
existed counts as unsandboxed; the hooks of the Ithaca plugin, which sets no sandbox, are
unsandboxed too. Standard library and light modules only (hook path).
"""

from __future__ import annotations

import os

from ithaca.kernel import VIA_PLUGIN, GateContext, Opinion, lightjson

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.kernel import Call

EVENTS = ("SessionStart",)
UNSANDBOXED_CONTEXT = (
    "[Ithaca profile] unsandboxed: your shell commands are checked by reading their text"
    " before they run, a best-effort guard (docs/hooks.md). Ithaca's state and the host"
    " wiring are still off limits; changing them by any spelling is tampering."
)


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.project is None:
        return Opinion()
    if ctx.scratch.get(VIA_PLUGIN):
        return Opinion("allow", context=UNSANDBOXED_CONTEXT)
    path = os.path.join(ctx.project.runtime, "installs", f"{ctx.host}.json")
    try:
        with open(path, "rb") as handle:
            manifest = lightjson.loads(handle.read().decode("utf-8"))
    except (OSError, ValueError):
        return Opinion()
    if profile_in(manifest) == "unsandboxed":
        return Opinion("allow", context=UNSANDBOXED_CONTEXT)
    return Opinion()


def profile_in(manifest: Any) -> str | None:
    """The profile an install manifest records (None: no install; a manifest from before
    profiles is unsandboxed)."""
    if not isinstance(manifest, dict):
        return None
    record = manifest.get("sandbox")
    return record.get("profile") if isinstance(record, dict) else "unsandboxed"
