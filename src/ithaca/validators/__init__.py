"""The validator engine: small programs, written as notebook cells, that decide outcomes.

A validator reads observed data and writes a pass or fail verdict; Ulysses, ultragoal and
protocol evidence rules trust that verdict instead of an agent's claim. The package
splits the work in two halves:

- stored: ``notebooks`` (the notebook facility, every cell version kept), ``cells`` (roles
  and filename rules), ``snapshot`` (a cell frozen with its manifests and runtime, named by
  the SHA-256 of its canonical JSON) and ``bindings`` (a snapshot pinned to an owner,
  vouched for by a journal event, checked before every run);
- running: ``runtimes`` (which interpreter, which version), ``sandbox`` (isolation and
  limits), ``confine`` (the read-only view of the filesystem), ``verdict`` (what a run
  means) and ``runner`` (one run in a fresh folder).

The names below load on first use (PEP 562), so importing the package costs nothing.
"""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# public name -> (module, attribute)
_EXPORTS = {
    "NotebookService": ("notebooks", "NotebookService"),
    "build_snapshot": ("snapshot", "build"),
    "encode_snapshot": ("snapshot", "encode"),
    "decode_snapshot": ("snapshot", "decode"),
    "bind": ("bindings", "bind"),
    "attach_event": ("bindings", "attach_event"),
    "check": ("bindings", "check"),
    "run": ("bindings", "run"),
    "record_run": ("bindings", "record_run"),
    "get_binding": ("bindings", "get"),
    "run_snapshot": ("runner", "run_snapshot"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module, attribute = _EXPORTS[name]
        return getattr(import_module(f"ithaca.validators.{module}"), attribute)
    raise AttributeError(f"module 'ithaca.validators' has no attribute {name!r}")
