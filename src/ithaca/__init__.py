"""Ithaca: a governance kernel for AI coding agents.

``ithaca.open_project(path)`` returns an open project whose services (``.protocols``)
are the same ones the CLI and the MCP server call. Attributes are loaded lazily so that
hook processes, which import ``ithaca.hosts``, pay nothing for them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["open_project", "init_project"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ithaca import app

        return getattr(app, name)
    raise AttributeError(f"module 'ithaca' has no attribute {name!r}")
