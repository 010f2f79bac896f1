"""A Codex ``config.toml`` changed only by checked text additions, and taken back by them.

The TOML file is the user's, and the standard library reads TOML but cannot write it, so
the installer never rewrites it: it adds text only, checks with ``tomllib`` that the result
means exactly the old file plus the one key, and records each addition verbatim for the
manifest. Taking an addition back removes its text only while it is still there as
written and still means only that, so the rest of the file stays byte for byte.
"""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

from ithaca.hosts.install.files import invalid_settings
from ithaca.hosts.install.report import InstallReport


class CheckedToml:
    """``config.toml`` as text and as what it means, changed only by checked additions."""

    def __init__(self, path: Path, text: str | None):
        self.path = path
        self.text = text or ""
        self.meaning = _parse(self.text, path)
        self.additions: list[dict[str, Any]] = []

    def get(self, key: list[str]) -> Any:
        value: Any = self.meaning
        for part in key:
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    def add(self, label: str, key: list[str], value: Any, at: int, anchor: str, text: str) -> bool:
        """Insert ``text`` at offset ``at``, just after ``anchor``, if the file then means
        exactly what it meant plus ``key = value``; False (and nothing changed) if not."""
        changed = self.text[:at] + text + self.text[at:]
        expected = _with(self.meaning, key, value)
        if _normal(_parse_or_none(changed)) != _normal(expected):
            return False
        self.text, self.meaning = changed, expected
        self.additions.append(
            {"label": label, "key": key, "value": value, "anchor": anchor, "text": text}
        )
        return True

    def append(self, label: str, key: list[str], value: Any, block: str) -> bool:
        """Add ``block`` at the end of the file, after a blank line."""
        separator = "" if not self.text else ("\n" if self.text.endswith("\n") else "\n\n")
        return self.add(label, key, value, len(self.text), "", separator + block)

    def keep(self, addition: dict[str, Any] | None) -> None:
        """Carry an earlier install's addition forward when it is still as written."""
        if addition is not None and self._without(addition) is not None:
            self.additions.append(addition)

    def take_back(self, addition: dict[str, Any], report: InstallReport) -> bool:
        """Remove ``addition`` when it is still there and still means only its key."""
        without = self._without(addition)
        if without is None:
            report.unchanged.append(addition["label"])
            return False
        self.text, self.meaning = without
        report.removed.append(addition["label"])
        return True

    def _without(self, addition: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        anchor, text, key = addition["anchor"], addition["text"], addition["key"]
        at = self.text.rfind(anchor + text)
        if at < 0 or self.get(key) != addition["value"]:
            return None
        start = at + len(anchor)
        remaining = self.text[:start] + self.text[start + len(text) :]
        expected = _with(self.meaning, key, None)
        if _normal(_parse_or_none(remaining)) != _normal(expected):
            return None
        return remaining, expected


def _with(meaning: dict[str, Any], key: list[str], value: Any) -> dict[str, Any]:
    """A copy of ``meaning`` with ``key`` set to ``value`` (removed when None)."""
    changed = copy.deepcopy(meaning)
    table = changed
    for part in key[:-1]:
        table = table.setdefault(part, {})
    if value is None:
        table.pop(key[-1], None)
    else:
        table[key[-1]] = value
    return changed


def _normal(value: Any) -> Any:
    """``value`` without empty tables: a file that loses its only server loses the table."""
    if not isinstance(value, dict):
        return value
    kept = {key: _normal(item) for key, item in value.items()}
    return {key: item for key, item in kept.items() if item != {}}


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise invalid_settings(path, f"the file is not valid TOML ({exc})") from exc


def _parse_or_none(text: str) -> dict[str, Any] | None:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
