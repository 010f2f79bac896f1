"""The diagnostic a Ulysses or knowledge answer carries: something noticed, nothing refused.

A diagnostic never stops an operation; it tells the agent what the operation saw (a thin
summary, a lesson file that was not written, a search without FTS5). Every module that
notices something makes it here, so all of them have the one shape.
"""

from __future__ import annotations

from typing import Any

Diagnostics = list[dict[str, Any]]


def diagnostic(code: str, message: str) -> dict[str, str]:
    return {"code": code, "message": message}
