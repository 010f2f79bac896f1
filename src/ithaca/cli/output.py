"""How CLI commands speak: JSON for scripts, rich text for people, coded errors for both.

Every read command takes ``--json``. Errors carry their stable code; the exit code is 2
for misuse and invalid input, 1 for every other refusal or failure. A storage fault (a full
disk, a read-only file system, a permission refused, a locked store) is answered under its
own code, naming the project's state database where SQLite does not say which file
(``kernel.storage_faults``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ithaca.kernel import IthacaError, find_project, storage_fault

# The ``--project`` folder of this run (``remember_project``).
_PROJECT: list[str] = []

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, ensure_ascii=False))


def console() -> Any:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


@contextmanager
def errors_to_exit(as_json: bool = False) -> Iterator[None]:
    """Turn an ``IthacaError`` into a printed code and an exit code."""
    try:
        yield
    except IthacaError as exc:
        fail(exc, as_json)


def remember_project(path: str) -> None:
    """Note the ``--project`` folder, whose state database a storage fault names."""
    _PROJECT[:] = [path]


def state_database() -> str | None:
    """The state database of the ``--project`` folder, where there is one."""
    found = find_project(_PROJECT[0] if _PROJECT else ".")
    return found.db_path if found is not None else None


def fail(exc: IthacaError, as_json: bool = False) -> None:
    """Print ``exc`` (as the storage fault it stands for, if it does) and exit."""
    exc = storage_fault(exc, state_database()) or exc
    if as_json:
        click.echo(json.dumps({"error": exc.to_dict()}, ensure_ascii=False), err=True)
    else:
        reason = exc.details.get("reason")
        suffix = f" (reason: {reason})" if isinstance(reason, str) else ""
        click.echo(f"error {exc.code}: {exc.message}{suffix}", err=True)
    sys.exit(exc.exit_code)


def render_tree(value: Any) -> None:
    """Any JSON answer for a person: one ``key: value`` line per scalar, nested values
    indented under their key, list items marked with ``-``; ids are never cut."""
    for line in _tree_lines(value, 0):
        click.echo(line)


def _tree_lines(value: Any, depth: int) -> Iterator[str]:
    pad = "  " * depth
    if isinstance(value, dict):
        if not value:
            yield f"{pad}(none)"
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                yield f"{pad}{key}:"
                yield from _tree_lines(item, depth + 1)
            else:
                yield f"{pad}{key}: {_scalar(item)}"
    elif isinstance(value, list):
        if not value:
            yield f"{pad}(none)"
        for item in value:
            if isinstance(item, (dict, list)) and item:
                lines = list(_tree_lines(item, depth + 1))
                yield f"{pad}- {lines[0].lstrip()}"
                yield from lines[1:]
            else:
                yield f"{pad}- {_scalar(item)}"
    else:
        yield f"{pad}{_scalar(value)}"


def _scalar(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return "(none)"
    text = str(value)
    return text.replace("\n", "\n  ") if "\n" in text else text


def show(value: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """Print ``value`` as JSON or through a human renderer."""
    if as_json:
        emit_json(value)
    else:
        render(value)
