"""The bytes of the tracked documents delivery writes.

Same inputs, same bytes, same digest: JSON documents are written pretty (two-space
indent) in RFC 8785 key order with a final newline, and Markdown is normalised to ``\\n``
line ends with exactly one final newline. Nothing here reads a clock; times live in rows
and the journal.
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.kernel import canon


def pretty_json(value: Any) -> bytes:
    """Indented JSON in canonical key order (the parse keeps the canonical order)."""
    ordered = json.loads(canon.canonical(value))
    return (json.dumps(ordered, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def markdown(text: str) -> bytes:
    body = text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")
    return (body + "\n").encode("utf-8")
