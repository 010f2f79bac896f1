"""RFC 7396 JSON merge patch: how ``revise`` changes a stored body.

A patch object names only what changes: a value replaces the field (objects are merged
field by field), ``null`` deletes it, and anything that is not an object replaces the
target whole. Arrays are values, so a patch that changes a list restates it.
"""

from __future__ import annotations

import copy
from typing import Any


def apply(target: Any, patch: Any) -> Any:
    """``target`` with ``patch`` applied; neither argument is modified."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for name, value in patch.items():
        if value is None:
            result.pop(name, None)
        else:
            result[name] = apply(result.get(name), value)
    return result
