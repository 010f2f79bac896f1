"""The gate modules the dispatcher consults, in order.

A part registers its gate here (one line) instead of editing the dispatcher. Each named
module exposes ``EVENTS``, ``decide(call, ctx)`` and optionally ``commit(call, final,
ctx)`` (see ``ithaca.kernel.gates``). Modules are imported only for the events they
handle, so a SessionStart hook does not pay for enforcement code.
"""

GATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    # (module, events it handles)
    ("ithaca.kernel.guard", ("PreToolUse",)),
    ("ithaca.hosts.effects", ("PreToolUse", "PostToolUse")),
    ("ithaca.hosts.profile_gate", ("SessionStart",)),
    ("ithaca.protocols.gate", ("UserPromptSubmit", "PreToolUse")),
    ("ithaca.protocols.critic", ("PreToolUse", "PostToolUse", "Stop")),  # after the bundle
    ("ithaca.ulysses.gate", ("SessionStart", "PreToolUse")),
    ("ithaca.delivery.gate", ("SessionStart", "PreCompact", "PreToolUse", "PostToolUse", "Stop")),
    (
        "ithaca.ultragoal.gate",
        ("SessionStart", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse", "Stop"),
    ),
)
