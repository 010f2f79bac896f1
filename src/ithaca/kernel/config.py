"""One configuration loader for every part.

Precedence, lowest first: ``$ITHACA_HOME/config.toml`` (the user's), ``.ithaca/config.toml``
(tracked, the team's), ``.ithaca/.runtime/config.toml`` (this checkout's). Each part owns a
section; an unknown section or key is ``INVALID_CONFIG`` so a typo never silently drops a
rule. Keys that choose an executable are honoured only from the user or local file.
``tomllib`` is imported only when a file exists, to keep hooks fast.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# section -> key -> (accepted types, default)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "protocols": {
        "project_id": ((str,), None),
        "client_id": ((str,), None),
        "default_workflow": ((str,), "coding"),
        "default_task": ((str,), None),
        "workflows": ((list,), []),
        "strict": ((bool,), True),
        "read_only_tools": ((list,), []),
        "approval_ttl_seconds": ((int,), 900),
        "store_prompts": ((bool,), False),
        "mcp_server_name": ((str,), "ithaca"),
    },
    "hooks": {
        "fail_closed": ((bool,), True),
    },
}
# Top-level keys accepted only in the user's own file.
USER_KEYS: dict[str, tuple[tuple[type, ...], Any]] = {"user_id": ((str,), None)}
# Keys that pick an executable: never taken from the tracked team file.
EXECUTABLE_KEYS: frozenset[tuple[str, str]] = frozenset()


def defaults() -> dict[str, Any]:
    config: dict[str, Any] = {
        section: {key: copy.deepcopy(spec[1]) for key, spec in keys.items()}
        for section, keys in SCHEMA.items()
    }
    config.update({key: spec[1] for key, spec in USER_KEYS.items()})
    return config


def home() -> Path:
    return Path(os.environ.get("ITHACA_HOME") or Path.home() / ".ithaca")


def load(state_root: Path | None) -> dict[str, Any]:
    """The effective configuration: defaults overlaid by each file that exists."""
    config = defaults()
    layers: list[tuple[Path, str]] = [(home() / "config.toml", "user")]
    if state_root is not None:
        layers.append((state_root / "config.toml", "team"))
        layers.append((state_root / ".runtime" / "config.toml", "local"))
    for path, layer in layers:
        if path.is_file():
            _overlay(config, _read(path), path, layer)
    return config


def _read(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except (tomllib.TOMLDecodeError, OSError, UnicodeDecodeError) as exc:
        raise _invalid(path, "", f"cannot be read as TOML: {exc}") from exc


def _overlay(config: dict[str, Any], data: dict[str, Any], path: Path, layer: str) -> None:
    for section, values in data.items():
        if section in USER_KEYS and layer == "user":
            _check_type(path, section, values, USER_KEYS[section][0])
            config[section] = values
            continue
        if section not in SCHEMA or not isinstance(values, dict):
            raise _invalid(path, section, "unknown section")
        for key, value in values.items():
            spec = SCHEMA[section].get(key)
            if spec is None:
                raise _invalid(path, f"{section}.{key}", "unknown key")
            if (section, key) in EXECUTABLE_KEYS and layer == "team":
                raise _invalid(
                    path, f"{section}.{key}", "chooses an executable; set it in the local file"
                )
            _check_type(path, f"{section}.{key}", value, spec[0])
            config[section][key] = value


def _check_type(path: Path, name: str, value: Any, types: tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in types:
        raise _invalid(path, name, "wrong type")
    if not isinstance(value, types):
        raise _invalid(path, name, f"must be {' or '.join(t.__name__ for t in types)}")


def _invalid(path: Path, name: str, problem: str) -> InvalidInput:
    return InvalidInput(
        "INVALID_CONFIG", f"{path}: {name or 'file'} {problem}", {"path": str(path), "key": name}
    )
