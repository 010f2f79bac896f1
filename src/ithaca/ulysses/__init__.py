"""Ulysses: surprise-gated debugging (reference ``ulysses.md`` §3–§4).

Plan a step with a recovery, let a pinned validator judge its outcome, reflect when both
moves fail, and close with a lesson. ``machine`` holds the rules, ``service`` applies
them to the store, ``gate`` lets host hooks enforce them. The hook imports ``gate``
through this package, so the service (and the validator engine behind it) is loaded
only when asked for (PEP 562).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.ulysses.service import UlyssesService

__all__ = ["UlyssesService"]


def __getattr__(name: str) -> object:
    if name == "UlyssesService":
        from ithaca.ulysses.service import UlyssesService

        return UlyssesService
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
