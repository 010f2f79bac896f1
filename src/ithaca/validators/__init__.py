"""The validator engine: small programs, written as notebook cells, that decide outcomes.

A validator reads observed data and writes a pass or fail verdict; Ulysses, ultragoal and
protocol evidence rules trust that verdict instead of an agent's claim. The package
splits the work in two halves:

- stored: ``notebooks`` (the notebook facility, every cell version kept; its arguments'
  checks in ``notebook_arguments``, its Markdown in ``notebook_export``), ``cells`` (roles
  and filename rules), ``snapshot`` (a cell frozen with its manifests and runtime, named by
  the SHA-256 of its canonical JSON) and ``bindings`` (a snapshot pinned to an owner,
  vouched for by a journal event, checked before every run);
- running: ``runtimes`` (which interpreter, which version), ``sandbox`` (isolation and
  limits), ``confine`` (the read-only view of the filesystem), ``verdict`` (what a run
  means) and ``runner`` (one run in a fresh folder).

The face below (the adapters' way in, and the modules Ulysses uses) loads on first use
(PEP 562), so importing the package costs nothing.
"""

from __future__ import annotations

from ithaca.kernel import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.validators import bindings, confine, runner, runtimes, sandbox, snapshot
    from ithaca.validators.confine import bubblewrap
    from ithaca.validators.notebooks import NotebookService
    from ithaca.validators.runner import remove_stale_run_folders

_FACE = {
    "NotebookService": "ithaca.validators.notebooks:NotebookService",
    "bubblewrap": "ithaca.validators.confine:bubblewrap",
    "remove_stale_run_folders": "ithaca.validators.runner:remove_stale_run_folders",
    "bindings": "ithaca.validators.bindings",
    "runner": "ithaca.validators.runner",
    "snapshot": "ithaca.validators.snapshot",
    "runtimes": "ithaca.validators.runtimes",
    "confine": "ithaca.validators.confine",
    "sandbox": "ithaca.validators.sandbox",
}
__all__ = [
    "NotebookService",
    "bubblewrap",
    "remove_stale_run_folders",
    "bindings",
    "runner",
    "snapshot",
    "runtimes",
    "confine",
    "sandbox",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# What Validators brings: its tables, the sandbox check and the notebook tool.
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = ((3, "validators.initial", "ithaca.validators.tables:VALIDATORS_V1"),)
DOCTOR_CHECKS = ("ithaca.validators.confine:check",)
MCP_TOOLS = ("ithaca.validators.tools:TOOLS",)
CLI_COMMANDS = {"notebook": "ithaca.cli.commands.notebook:group"}
