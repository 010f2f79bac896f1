"""``ithaca import SOURCE [--from ultra|taskmaster|openspec|speckit] [--dry-run] [--json]``.

Brings a peer tool's work into the project as delivery changes and task contracts: an
Ultra Builder Pro ``.ultra/`` project, a Task Master ``tasks.json``, an OpenSpec
``changes/`` folder or a spec-kit ``specs/<feature>/``. The format is told from the path
unless ``--from`` names it. The command hands ``{source, from?, dry_run}`` to
``DeliveryService.import_peer``, the path Python callers take too, and prints what the
import created (or, with ``--dry-run``, would create), the peer id beside each Ithaca id.
Importing the same source again creates nothing and says so. The module is ``import_``
because ``import`` is a Python keyword (PEP 8's trailing underscore).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, fail, json_option, show
from ithaca.delivery import IMPORT_FORMATS
from ithaca.kernel import InvalidInput

_WORDS = {
    "created": "created",
    "would_create": "would create",
    "updated": "updated",
    "would_update": "would update",
    "unchanged": "unchanged",
    "present": "already here",
    "differs": "differs from the source; not changed",
}


@click.command("import")
@click.argument("source")
@click.option(
    "--from",
    "peer",
    metavar="|".join(IMPORT_FORMATS),
    help="The tool that wrote SOURCE (told from the path when omitted).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be created; change nothing.")
@json_option
@click.pass_context
def command(
    ctx: click.Context, source: str, peer: str | None, dry_run: bool, as_json: bool
) -> None:
    """Bring in a peer's work: Ultra Builder Pro, Task Master, OpenSpec or spec-kit."""
    if peer is not None and peer not in IMPORT_FORMATS:
        fail(
            InvalidInput(
                "IMPORT_FORMAT_UNKNOWN",
                f"--from {peer}: no such format; use one of {', '.join(IMPORT_FORMATS)}",
                {"format": peer, "formats": list(IMPORT_FORMATS)},
            ),
            as_json,
        )
    request: dict[str, Any] = {"source": os.path.abspath(source), "dry_run": dry_run}
    if peer is not None:
        request["from"] = peer
    project = opened(ctx, as_json)
    with errors_to_exit(as_json):
        answer = project.delivery.import_peer(request)
    show(answer, as_json, _render)


def _render(answer: dict[str, Any]) -> None:
    out = console()
    head = f"{answer['peer']} {answer['source']}"
    out.print(
        f"Dry run of the import of {head}: nothing was written."
        if answer["dry_run"]
        else f"Import of {head}",
        markup=False,
    )
    for change in answer["changes"]:
        out.print(
            f"change {change['id']} ← {answer['unit_word']} {change['peer_id']}:"
            f" {change['title']} [{_word(change)}]",
            markup=False,
        )
        for task in change["tasks"]:
            out.print(f"  {_task_line(task)}", markup=False)
        for found in change["decisions"]:
            out.print(
                f"  decision {found['id']} ← {found['peer_id']} [{_word(found)}]", markup=False
            )
        for found in change["documents"]:
            out.print(
                f"  document {found['path']} ← {found['peer_id']} [{_word(found)}]", markup=False
            )
        for found in change["checkpoints"]:
            out.print(
                f"  checkpoint {found['id']} ← {found['peer_id']} [{_word(found)}]", markup=False
            )
        if change["map"] is not None:
            out.print(
                f"  id mapping {change['map']['path']} [{_word(change['map'])}]", markup=False
            )
    outside = answer["outside_changes"]
    for task in outside["tasks"]:
        out.print(f"{_task_line(task)} (no change)", markup=False)
    for found in outside["decisions"]:
        out.print(
            f"decision {found['id']} ← {found['peer_id']} (baseline) [{_word(found)}]", markup=False
        )
    for found in outside["checkpoints"]:
        out.print(f"checkpoint {found['id']} ← {found['peer_id']} [{_word(found)}]", markup=False)
    for found in answer["skipped"]:
        out.print(
            f"not imported: {found['kind']} {found['peer_id']} ({found['reason']})", markup=False
        )
    counts = answer["counts"]
    made = counts.get("created", 0) + counts.get("updated", 0)
    if not answer["dry_run"] and made == 0:
        out.print(
            f"Nothing new: {counts['unchanged']} record(s) came in before, {counts['present']}"
            f" already here, {counts['differs']} differ from the source.",
            markup=False,
        )
    else:
        shown = [f"{_WORDS.get(name, name)} {number}" for name, number in counts.items() if number]
        out.print(", ".join(shown) or "nothing to import", markup=False)
    _diagnostics(out, answer["diagnostics"])
    if answer["journal_seq"] is not None:
        out.print(f"journal seq {answer['journal_seq']}", style="dim", markup=False)


def _word(item: dict[str, Any]) -> str:
    word = str(_WORDS.get(item["status"], item["status"]))
    if item.get("differs"):
        word += f": {', '.join(item['differs'])}"
    return word


def _task_line(task: dict[str, Any]) -> str:
    line = f"task {task['id']} ← {task['peer_id']}: {task['title']}"
    if task.get("parent_id"):
        line += f" (subtask of {task['parent_id']})"
    if task.get("deps"):
        line += f" after {', '.join(task['deps'])}"
    if task.get("peer_status") not in (None, "pending"):
        line += f" ({task['peer_status']} there)"
    return f"{line} [{_word(task)}]"


def _diagnostics(out: Any, found: list[dict[str, Any]]) -> None:
    """Each code once, with how often it came and its first message."""
    counts = Counter(item["code"] for item in found)
    seen: set[str] = set()
    for item in found:
        if item["code"] in seen:
            continue
        seen.add(item["code"])
        times = f" ×{counts[item['code']]}" if counts[item["code"]] > 1 else ""
        out.print(f"{item['severity']} {item['code']}{times}: {item['message']}", markup=False)
