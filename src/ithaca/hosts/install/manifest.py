"""The install manifest: what an install placed, its provenance, and whether it still holds.

Each host's manifest (``<state root>/.runtime/installs/<host>.json``) holds what its
uninstall needs (the server name and entry, the hooks by event and command, the host's
own records), and a ``provenance`` block: the Ithaca version and the interpreter that
installed, and one entry per thing Ithaca placed, each with the SHA-256 of what it
placed. A file Ithaca owns whole (a skill) is digested as bytes; a fragment of a file the
user shares (a hook in ``settings.json``, the server table in ``config.toml``) as the
canonical JSON of that fragment, so the user's own edits elsewhere in the file are not
drift. An aggregate digest covers the entries, so an edited manifest shows too.

The same comparison runs twice: on the staged files before they are swapped in (they must
say exactly what the provenance records) and on the project afterwards, for
``ithaca install --doctor``: an entry gone is ``INSTALL_MISSING``, one edited since is
``INSTALL_DRIFT``.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from ithaca.hosts.install.files import invalid_settings, read_json_object
from ithaca.hosts.install.hooks import find_hook, listed_hooks_ok
from ithaca.kernel import RUNTIME_DIR_NAME, IthacaError, digest, digest_bytes

MISSING = "INSTALL_MISSING"
DRIFT = "INSTALL_DRIFT"
_ABSENT: Any = object()  # a key the document does not hold (JSON null is a value)
_UNREADABLE: Any = object()  # a file that no longer parses


def manifest_relpath(host: str) -> str:
    """The install manifest of ``host``, relative to the state root."""
    return f"{RUNTIME_DIR_NAME}/installs/{host}.json"


def read_manifest(
    state: Path, host: str, paths: tuple[str, ...], host_records_ok: Callable[[Any], bool]
) -> dict[str, Any] | None:
    """The install manifest of ``host``; None when there is none. Refused when it lacks
    what an uninstall needs: the server name and entry, the hooks, the ``paths`` of the
    files it changed, and the host's own records (``host_records_ok``)."""
    relpath = manifest_relpath(host)
    manifest = read_json_object(state, relpath)
    if manifest is not None and not (
        isinstance(manifest.get("serverName"), str)
        and isinstance(manifest.get("mcpEntry"), dict)
        and listed_hooks_ok(manifest.get("hooks"))
        and all(isinstance(manifest.get(name), str) for name in paths)
        and host_records_ok(manifest)
    ):
        raise invalid_settings(
            state / relpath, "the install manifest lacks a field or has the wrong shape"
        )
    return manifest


def file_entry(label: str, relpath: str, data: bytes) -> dict[str, Any]:
    """A file Ithaca wrote whole."""
    return {"kind": "file", "label": label, "path": relpath, "sha256": digest_bytes(data)}


def value_entry(
    kind: str, label: str, relpath: str, key: list[str], document: dict[str, Any]
) -> dict[str, Any]:
    """The value at ``key`` of a ``json`` or ``toml`` document the user shares."""
    value = _value_at(document, key)
    assert value is not _ABSENT, key  # recorded from the document just placed
    return {"kind": kind, "label": label, "path": relpath, "key": key, "sha256": digest(value)}


def hook_entry(relpath: str, document: dict[str, Any], event: str, command: str) -> dict[str, Any]:
    """Ithaca's hook for ``event`` in a hooks document, found by its command."""
    hook = find_hook(document, event, command)
    assert hook is not None, event  # recorded from the document just placed
    return {
        "kind": "hook",
        "label": f"hook {event}",
        "path": relpath,
        "event": event,
        "command": command,
        "sha256": digest(hook),
    }


def provenance(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's provenance block for ``entries``."""
    import ithaca

    return {
        "ithacaVersion": ithaca.__version__,
        "python": os.path.abspath(sys.executable),
        "entries": entries,
        "sha256": digest(entries),
    }


def drift(record: dict[str, Any], read: Callable[[str], bytes | None]) -> list[dict[str, str]]:
    """What no longer holds of ``record`` (a provenance block) in the files ``read``
    returns (None: absent), as findings: ``code``, ``label``, ``path``, ``message``."""
    findings = []
    if digest(record["entries"]) != record["sha256"]:
        findings.append(
            finding(DRIFT, "install manifest", "", "the manifest's entries were edited")
        )
    documents: dict[str, Any] = {}
    for entry in record["entries"]:
        path, label = entry["path"], entry["label"]
        current = _current_digest(entry, read, documents)
        if current is None:
            findings.append(finding(MISSING, label, path, f"{label} is no longer in {path}"))
        elif current != entry["sha256"]:
            findings.append(
                finding(DRIFT, label, path, f"{label} in {path} was edited since the install")
            )
    return findings


def well_formed(record: Any) -> TypeGuard[dict[str, Any]]:
    """Whether a provenance block can be checked."""
    entries = record.get("entries") if isinstance(record, dict) else None
    return (
        isinstance(record, dict)
        and isinstance(record.get("sha256"), str)
        and isinstance(entries, list)
        and all(
            isinstance(entry, dict)
            and entry.get("kind") in ("file", "json", "toml", "hook")
            and all(isinstance(entry.get(name), str) for name in ("label", "path", "sha256"))
            for entry in entries
        )
    )


def finding(code: str, label: str, path: str, message: str) -> dict[str, str]:
    return {"code": code, "label": label, "path": path, "message": message}


def _current_digest(
    entry: dict[str, Any], read: Callable[[str], bytes | None], documents: dict[str, Any]
) -> str | None:
    """The digest of what stands where ``entry`` was placed; None if nothing does."""
    path = entry["path"]
    if entry["kind"] == "file":
        data = read(path)
        return None if data is None else digest_bytes(data)
    if path not in documents:
        documents[path] = _parse(entry["kind"], read(path))
    document = documents[path]
    if document is None:
        return None
    if document is _UNREADABLE:
        return "unreadable"
    if entry["kind"] == "hook":
        value = find_hook(document, entry.get("event", ""), entry.get("command", ""))
        value = _ABSENT if value is None else value
    else:
        value = _value_at(document, entry.get("key", []))
    if value is _ABSENT:
        return None
    try:
        return digest(value)
    except IthacaError:
        return "undigestible"  # a TOML date, say: not what Ithaca placed


def _parse(kind: str, data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        text = data.decode("utf-8")
        return tomllib.loads(text) if kind == "toml" else json.loads(text or "{}")
    except (UnicodeDecodeError, ValueError):
        return _UNREADABLE


def _value_at(document: Any, key: list[str]) -> Any:
    value = document
    for part in key:
        if not isinstance(value, dict) or part not in value:
            return _ABSENT
        value = value[part]
    return value
