"""Ultragoal: objective pursuit over confirmed stories that never false-completes.

One pursuit per host session: an objective in the Seven Slots, stories approved in bulk
and pursued one at a time, one independent code review over the whole diff, and
``request-complete`` as the only way to ``complete``. ``service`` is the one path for the
CLI, the MCP tool and the Python API; ``lifecycle``, ``records``, ``progress``,
``reducer`` and ``contract`` are what hooks use in-process, importing only the standard
library and the kernel. The service (and the validators engine behind it) is loaded only
when asked for (PEP 562), so importing a hook module stays cheap.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.ultragoal.service import UltragoalService

__all__ = ["UltragoalService"]


def __getattr__(name: str) -> object:
    if name == "UltragoalService":
        from ithaca.ultragoal.service import UltragoalService

        return UltragoalService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
