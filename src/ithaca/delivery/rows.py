"""How a row held as a dict becomes the values of an INSERT or UPDATE, and back.

JSON columns are stored as canonical JSON text, so two rows that mean the same compare
equal as stored, and a revision that changes nothing can be recognised by comparison.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from ithaca.kernel import canon


def stored(
    row: dict[str, Any], columns: Sequence[str], json_columns: Collection[str]
) -> tuple[Any, ...]:
    """The values of ``columns`` in order, JSON columns as canonical text (NULL kept)."""
    return tuple(
        canon.canonical_text(row[name])
        if name in json_columns and row[name] is not None
        else row[name]
        for name in columns
    )


def loaded(
    values: Sequence[Any] | None, columns: Sequence[str], json_columns: Collection[str]
) -> dict[str, Any] | None:
    """A fetched row as a dict, JSON columns parsed; None for no row."""
    if values is None:
        return None
    row = dict(zip(columns, values, strict=True))
    for name in json_columns:
        if row[name] is not None:
            row[name] = json.loads(row[name])
    return row
