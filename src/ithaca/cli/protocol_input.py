"""What ``ithaca protocols`` reads from its user: a record from ``--file`` or the field
flags, fixture and prompt files, and the ``--since`` window.

Everything here is parsed before any confirmation is asked for, so a typo exits 2
(``INVALID_INPUT``) before anyone types a token.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import IO, Any

import click

from ithaca.kernel import invalid_field

_SINCE = re.compile(r"(\d{1,5})d?")


def read_text(handle: IO[str]) -> str:
    """A file's text, or ``INVALID_INPUT`` when it is not UTF-8."""
    try:
        with handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise invalid_field("", "NOT_UTF8", f"{handle.name} is not UTF-8 text") from exc


def record_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The record field flags ``create`` and ``update`` share (``--id`` is create's own)."""
    options = [
        click.option(
            "--file",
            "record_file",
            type=click.File("r", encoding="utf-8"),
            help="The record as JSON ('-' reads it from the terminal).",
        ),
        click.option("--name"),
        click.option("--description"),
        click.option("--priority", type=int),
        click.option("--selector", help='JSON object, such as {"workflow": "coding"}.'),
        click.option("--rule", "rules", multiple=True, help="A rule (repeat for more)."),
        click.option(
            "--constraint", "constraint_texts", multiple=True, help="A constraint as JSON."
        ),
        click.option("--tag", "tags", multiple=True),
        click.option("--disabled", is_flag=True, help="Store the record disabled."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def record_from(fields: dict[str, Any]) -> dict[str, Any]:
    """A record (or the changes of one) from ``--file`` or the field flags, not both."""
    record_file = fields.pop("record_file")
    flags: dict[str, Any] = {}
    for flag, key in (
        ("protocol_id", "id"),
        ("name", "name"),
        ("description", "description"),
        ("priority", "priority"),
    ):
        if fields.get(flag) is not None:
            flags[key] = fields[flag]
    if fields["selector"] is not None:
        flags["selector"] = _json_flag(fields["selector"], "/selector")
    if fields["rules"]:
        flags["rules"] = list(fields["rules"])
    if fields["constraint_texts"]:
        flags["constraints"] = [
            _json_flag(text, f"/constraints/{index}")
            for index, text in enumerate(fields["constraint_texts"])
        ]
    if fields["tags"]:
        flags["tags"] = list(fields["tags"])
    if fields["disabled"]:
        flags["enabled"] = False
    if record_file is None:
        return flags
    if flags:
        raise invalid_field("", "CONFLICTING_OPTIONS", "give --file or the field flags, not both")
    loaded = _json_flag(read_text(record_file), "")
    if not isinstance(loaded, dict):
        raise invalid_field("", "WRONG_TYPE", "the file must hold one JSON object")
    return loaded


def _json_flag(text: str, pointer: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        message = f"{pointer or 'the file'}: not JSON ({exc})"
        raise invalid_field(pointer, "INVALID_JSON", message) from exc


def since_days(text: str) -> int:
    """The number of days in ``--since`` (``30d`` or ``30``)."""
    matched = _SINCE.fullmatch(text.strip())
    if matched is None:
        raise invalid_field("/since", "WRONG_FORMAT", "--since takes a number of days, such as 30d")
    return int(matched.group(1))
