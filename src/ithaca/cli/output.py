"""How CLI commands speak: JSON for scripts, rich text for people, coded errors for both.

Every read command takes ``--json``. Errors carry their stable code; the exit code is 2
for misuse and invalid input, 1 for every other refusal or failure.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click

from ithaca.kernel import IthacaError

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


def fail(exc: IthacaError, as_json: bool = False) -> None:
    if as_json:
        click.echo(json.dumps({"error": exc.to_dict()}, ensure_ascii=False), err=True)
    else:
        reason = exc.details.get("reason")
        suffix = f" (reason: {reason})" if isinstance(reason, str) else ""
        click.echo(f"error {exc.code}: {exc.message}{suffix}", err=True)
    sys.exit(exc.exit_code)


def show(value: Any, as_json: bool, render: Callable[[Any], None]) -> None:
    """Print ``value`` as JSON or through a human renderer."""
    if as_json:
        emit_json(value)
    else:
        render(value)
