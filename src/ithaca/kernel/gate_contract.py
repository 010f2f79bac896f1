"""The gate contract as a type: what a module listed under a manifest's ``GATES`` provides.

``ithaca.kernel.gates`` describes the two phases in prose; these protocols state them for
the type checker and for the test that holds every listed gate to them. A gate module
is the implementation (a module satisfies a protocol through its top-level names). Not on
the hook path: the dispatcher calls gates by these names without importing ``typing``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ithaca.kernel.call import Call
    from ithaca.kernel.gates import GateContext, Opinion


@runtime_checkable
class Gate(Protocol):
    """Gives an opinion on the hook events it names, reading only."""

    @property  # read-only, so a module's tuple of any length satisfies it
    def EVENTS(self) -> tuple[str, ...]: ...

    def decide(self, call: Call | None, ctx: GateContext) -> Opinion: ...


@runtime_checkable
class CommittingGate(Gate, Protocol):
    """A gate that also records what it needs once the answer is known; a returned
    opinion (a race lost) overrules the answer, ``None`` leaves it."""

    def commit(self, call: Call | None, final: Opinion, ctx: GateContext) -> Opinion | None: ...
