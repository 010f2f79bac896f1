"""The host's settings files as the installers read them: confined, UTF-8, checked.

Claude Code's ``.claude/settings.json`` and ``.mcp.json`` and Codex's ``.codex/hooks.json``
and ``.codex/config.toml`` belong to the user as much as to Ithaca. Every read checks the
path for symlinks and the text for its format before anything is written, so a refused
file (malformed JSON, an object where a list belongs, an unsafe path) leaves an install
undone rather than half done; the refusal names the file and says nothing was written.
The JSON files are written back the way these hosts lay them out: two-space indent. The
text each had before Ithaca first changed it is kept in the install manifest
(``originals``), so an uninstall that leaves a file meaning what it meant then gives it
back byte for byte, in the user's own layout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ithaca.kernel import STATE_DIR_NAME, InvalidInput, IthacaError, digest, resolve_confined


def state_root(project_root: Path) -> Path:
    """Where the project's Ithaca state lives: ``ITHACA_DIR``, else ``<project>/.ithaca``."""
    override = os.environ.get("ITHACA_DIR")
    return Path(os.path.abspath(override)) if override else project_root / STATE_DIR_NAME


def file_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def read_text(root: Path, relpath: str) -> str | None:
    """The UTF-8 text at ``relpath`` under ``root``; None if the file is absent."""
    resolve_confined(root, relpath)
    try:
        return (root / relpath).read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise invalid_settings(root / relpath, "the file is not UTF-8 text") from exc


def read_json_object(root: Path, relpath: str) -> dict[str, Any] | None:
    """The JSON object stored at ``relpath`` under ``root``; None if the file is absent.
    An empty file reads as ``{}``."""
    text = read_text(root, relpath)
    return None if text is None else parse_json_object(text, root / relpath)


def read_json_document(root: Path, relpath: str) -> tuple[dict[str, Any], str | None]:
    """The JSON object at ``relpath`` (``{}`` when absent) and the text it was read from
    (None when absent)."""
    text = read_text(root, relpath)
    return parse_json_object(text or "", root / relpath), text


def parse_json_object(text: str, path: Path) -> dict[str, Any]:
    """``text`` as a JSON object, refused (naming ``path``) when it is anything else."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except ValueError as exc:
        raise invalid_settings(path, f"the file is not valid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise invalid_settings(path, "the file does not hold a JSON object")
    return value


def object_at(document: dict[str, Any], key: str, path: Path, *, create: bool) -> Any:
    """The JSON object under ``key`` (created empty when missing and ``create``; else
    None); refused when ``key`` holds anything but an object."""
    if key not in document:
        if not create:
            return None
        document[key] = {}
    value = document[key]
    if not isinstance(value, dict):
        raise invalid_settings(path, f"{key!r} is not a JSON object")
    return value


def originals(previous: dict[str, Any] | None, texts: dict[str, str | None]) -> dict[str, str]:
    """The text of each shared file before Ithaca first changed it: an earlier install's
    record, else (on a first install) ``texts`` as read now, for the files that exist."""
    if previous is not None:
        kept = previous.get("originals")
        return kept if isinstance(kept, dict) else {}
    return {relpath: text for relpath, text in texts.items() if text is not None}


def restored_text(document: dict[str, Any], manifest: dict[str, Any], relpath: str) -> str:
    """The text to write for ``document``: the file's original text when the document
    still means exactly that, else the document laid out as the host does."""
    original = (manifest.get("originals") or {}).get(relpath)
    if isinstance(original, str):
        try:
            same = digest(json.loads(original or "{}")) == digest(document)
        except (ValueError, IthacaError):
            same = False
        if same:
            return original
    return pretty(document)


def pretty(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def invalid_settings(path: Path, problem: str) -> InvalidInput:
    return InvalidInput(
        "INVALID_SETTINGS",
        f"{path}: {problem}; nothing was written",
        {"path": str(path), "problem": problem},
    )


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")
