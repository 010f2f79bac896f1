"""The parts Ithaca is made of, in the order they act.

The kernel names no part above it. Each part listed here declares what it brings in the
manifest at the end of its package ``ithaca/<part>/__init__.py`` (migrations, hook gates,
state predicates, doctor checks and repairs, MCP tools, CLI commands), and the kernel's
registries, the hook dispatcher, the MCP server and the CLI read those manifests through
``ithaca.kernel.manifests``. The order is the order in which gates give their opinions,
doctor runs its checks and tools are listed; migrations keep their own version numbers.
Adding a part is a package with a manifest and one name here.
"""

PARTS: tuple[str, ...] = (
    "kernel",
    "hosts",
    "protocols",
    "validators",
    "ulysses",
    "delivery",
    "ultragoal",
)
