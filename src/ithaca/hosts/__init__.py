"""The host adapters: the hook entry point, its dispatcher and each host's package."""


# --- The manifest: what this part brings to the kernel's registries --------------------
# What the host adapters bring: the effect check, the profile notice, install and hook.
# Plain data naming "module:attribute" targets (``ithaca.kernel.manifests``).

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
