"""Ithaca: a governance kernel for AI coding agents, and the parts it is made of.

``ithaca.open_project(path)`` returns an open project whose services (``.protocols``)
are the same ones the CLI and the MCP server call. Attributes are loaded lazily so that
hook processes, which import ``ithaca.hosts``, pay nothing for them.

The parts, in ``PARTS``, are listed in the order they act. The kernel names no part above
it. Each part declares what it brings in the manifest at the end of its package
``ithaca/<part>/__init__.py`` (migrations, hook gates, state predicates, doctor checks and
repairs, MCP tools, CLI commands), and the kernel's registries, the hook dispatcher, the
MCP server and the CLI read those manifests through the functions below. The order is the
order in which gates give their opinions, doctor runs its checks and tools are listed;
migrations keep their own version numbers. Adding a part is a package with a manifest and
one name here (CONTRIBUTING.md has the whole list, tests included).

A manifest is plain data: tuples and dicts of strings naming ``"module:attribute"``
targets, so reading every manifest imports none of the code it names. It sits in the
package because a hook imports the package anyway for its gate, and the list and its
reader sit here, in the package every import of Ithaca loads first: a module of their own
would cost every hook call one more import. A hook reads the gates and the schema version
from the manifests and imports only the gates its event needs. Standard library only.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any

__all__ = [
    "open_project",
    "init_project",
    "PARTS",
    "all_manifests",
    "collected",
    "mapping",
    "resolve",
]
__version__ = "0.1.0"
_APP = ("open_project", "init_project")


def __getattr__(name: str) -> Any:
    if name in _APP:
        from ithaca import app

        return getattr(app, name)
    raise AttributeError(f"module 'ithaca' has no attribute {name!r}")


PARTS: tuple[str, ...] = (
    "kernel",
    "hosts",
    "protocols",
    "validators",
    "verification",
    "ulysses",
    "delivery",
    "ultragoal",
)


_loaded: list[ModuleType] = []


def all_manifests() -> list[ModuleType]:
    """Every listed part's package, whose manifest it holds, in the parts' order."""
    if not _loaded:
        found = [resolve(f"ithaca.{part}") for part in PARTS]
        _loaded.extend(found)  # only a complete list is kept
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
    """The object a ``"module:attribute"`` target names, or the module a bare ``"module"``
    names, importing the module."""
    module, _, attribute = target.partition(":")
    __import__(module)  # importlib.import_module, without importing importlib
    found = sys.modules[module]
    return getattr(found, attribute) if attribute else found
