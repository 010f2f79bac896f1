"""A notebook as Markdown: the export format, which a person reads and the cell comments
let a program take apart again."""

from __future__ import annotations

import json
import re
from typing import Any

from ithaca.validators import cells

FENCE_INFO = {
    "python": "python",
    "javascript": "javascript",
    "typescript": "typescript",
    "shell": "sh",
}
FENCE_INFO_BY_EXTENSION = {"json": "json", "toml": "toml", "txt": "text"}


def render_markdown(notebook: dict[str, Any], latest: list[cells.CellVersion]) -> str:
    """The export format: a header comment and title, then per cell a
    comment and its Markdown or a fence longer than any backtick run in its source."""
    header = {
        "id": notebook["notebookId"],
        "title": notebook["title"],
        "language": notebook["language"],
    }
    blocks = [f"<!-- ithaca:notebook {_comment_json(header)} -->", f"# {notebook['title']}"]
    for cell in latest:
        about = {
            "cellId": cell.cell_id,
            "version": cell.version,
            "kind": cell.kind,
            "language": cell.language,
            "filename": cell.filename,
            "mode": cell.mode,
        }
        blocks.append(f"<!-- ithaca:cell {_comment_json(about)} -->")
        if cell.role == "markdown":
            blocks.append(cell.source.rstrip("\n"))
        else:
            blocks.append(_fenced(cell))
    return "\n\n".join(blocks) + "\n"


def _comment_json(value: dict[str, Any]) -> str:
    """JSON that cannot end the HTML comment it sits in (``<`` and ``>`` escaped)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e")


def _fenced(cell: cells.CellVersion) -> str:
    longest = max((len(run) for run in re.findall(r"`+", cell.source)), default=0)
    fence = "`" * max(3, longest + 1)
    if cell.role == "validator":
        info = FENCE_INFO[str(cell.language)]
    else:
        info = FENCE_INFO_BY_EXTENSION.get(str(cell.filename).rpartition(".")[2], "")
    body = cell.source if cell.source.endswith("\n") or not cell.source else cell.source + "\n"
    return f"{fence}{info}\n{body}{fence}"
