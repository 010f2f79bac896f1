"""The host adapters: the hook entry point, its dispatcher and each host's package, and how
a refusal reads to the agent (shared by every adapter).

Both hosts show a hook's denial in words of their own ("PreToolUse:Bash hook error: …",
"Command blocked by PreToolUse hook: …"), which an agent can take for a broken hook to
retry or route around. So every denial and block Ithaca renders opens with the same lead:
Ithaca refused on purpose, under which code, or, when Ithaca itself could not decide, that
it failed closed; the gate's reason, which says what to do next, follows.

It lives in the package because every hook call imports the package anyway.
"""

from __future__ import annotations

from ithaca.kernel import FAILED_CLOSED, Opinion, lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.hosts.claude.plugin import agent_bytes
    from ithaca.hosts.install.sandbox import HOME_PROTECTED, PROTECTED

# The face other parts use: the paths every host's sandbox keeps an agent from writing, and
# the bytes of an agent definition as the Claude Code plugin ships it.
_FACE = {
    "PROTECTED": "ithaca.hosts.install.sandbox:PROTECTED",
    "HOME_PROTECTED": "ithaca.hosts.install.sandbox:HOME_PROTECTED",
    "agent_bytes": "ithaca.hosts.claude.plugin:agent_bytes",
}
__all__ = [
    "PROTECTED",
    "HOME_PROTECTED",
    "agent_bytes",
    "HOSTS",
    "runs_ithaca",
]
__getattr__ = lazy(__name__, _FACE)

# The one table of host adapters: each host's package is its hook adapter.
HOSTS = {"claude": "ithaca.hosts.claude", "codex": "ithaca.hosts.codex"}


def runs_ithaca(project_root: str) -> str | None:
    """The first of the project's host wiring files that runs Ithaca's hook (such as
    ``.claude/settings.json``), else None: what says Ithaca was set up in a project whose
    state folder is gone (``kernel.lost_state``). Not the hook path: it loads every
    host's adapter."""
    from ithaca import resolve

    for target in HOSTS.values():
        found: str | None = resolve(target).runs_ithaca(project_root)
        if found:
            return found
    return None


LEAD = "Refused by Ithaca policy"
ASK_LEAD = "Ithaca policy asks the user to confirm this call"
BLOCK_LEAD = "Held by Ithaca policy"


def refusal_text(final: Opinion, lead: str = LEAD) -> str:
    """``final``'s reason under the lead that tells policy from a failure (a block's
    reason, which the host hands the model as its next instruction, on a line of its own)."""
    reason = (final.reason or "").strip()
    code = f" [{final.code}]" if final.code else ""
    if final.gate == FAILED_CLOSED:
        opening = "Ithaca failed closed: it could not decide, so it refused."  # code in reason
    else:
        opening = f"{lead}{code}, on purpose (not a hook failure)."
    separator = "\n" if lead == BLOCK_LEAD else " "
    return f"{opening}{separator}{reason}" if reason else opening


# --- The manifest: what this part brings to the kernel's registries --------------------
# What the host adapters bring: the effect check, the profile notice, install and hook.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

GATES = (
    ("ithaca.hosts.effects", ("PreToolUse", "PostToolUse")),
    ("ithaca.hosts.profile_gate", ("SessionStart",)),
)
DOCTOR_CHECKS = ("ithaca.hosts.effects:check",)
CLI_COMMANDS = {
    "install": "ithaca.cli.commands.install:command",
    "uninstall": "ithaca.cli.commands.uninstall:command",
    "hook": "ithaca.cli.commands.hook:command",
}
