"""Reading the parts' manifests: what each part brings to the kernel's registries.

A part's manifest is the block of plain data at the end of its package ``__init__.py``
(``MIGRATIONS``, ``GATES``, ``STATES``, ``DOCTOR_CHECKS``, ``DOCTOR_REPAIRS``,
``DOCTOR_REBUILDS``, ``MCP_TOOLS``, ``CLI_COMMANDS``): tuples and dicts of strings naming
``"module:attribute"`` targets, so reading every manifest imports none of the code it
names. It sits in the package because a hook imports the package anyway for its gate:
a module of its own would cost every hook call one more import per part. A hook reads
the gates and the schema version from the manifests and imports only the gates its event
needs. Standard library only.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

_loaded: list[ModuleType] = []


def all_manifests() -> list[ModuleType]:
    """Every listed part's manifest module, in the parts' order."""
    if not _loaded:
        from ithaca.parts import PARTS

        for part in PARTS:
            name = f"ithaca.{part}"
            __import__(name)  # importlib.import_module, without importing importlib
            _loaded.append(sys.modules[name])
    return _loaded


def collected(attribute: str) -> list[Any]:
    """The entries every manifest declares under ``attribute``, concatenated in order."""
    return [entry for manifest in all_manifests() for entry in getattr(manifest, attribute, ())]


def mapping(attribute: str) -> dict[str, Any]:
    """The dicts every manifest declares under ``attribute``, merged; a name declared by
    two parts is a programming error."""
    merged: dict[str, Any] = {}
    for manifest in all_manifests():
        for key, value in getattr(manifest, attribute, {}).items():
            if key in merged:
                raise RuntimeError(f"{attribute} {key!r} is declared by two parts")
            merged[key] = value
    return merged


def resolve(target: str) -> Any:
    """The object a ``"module:attribute"`` target names, importing its module."""
    module, _, attribute = target.partition(":")
    __import__(module)
    return getattr(sys.modules[module], attribute)
