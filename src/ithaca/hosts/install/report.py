"""What an install or uninstall did, as the CLI shows it and a script reads it.

Entries are named by label (``hook Stop``, ``mcp server ithaca``, ``skill ulysses``), so
a person sees what changed without reading the host's files; ``degraded`` names what the
host offers less of than Claude Code, so nobody takes a partial wiring for a full one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class InstallReport:
    """Entry labels added, removed or left as they were, the files written or removed,
    notes on settings left as the user had them, and the host's degraded surfaces."""

    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        return asdict(self)
