"""One configuration loader for every part.

Precedence, lowest first: ``$ITHACA_HOME/config.toml`` (the user's), ``.ithaca/config.toml``
(tracked, the team's), ``.ithaca/.runtime/config.toml`` (this checkout's). Each part owns a
section; an unknown section or key is ``INVALID_CONFIG`` so a typo never silently drops a
rule. Keys that choose an executable are honoured only from the user or local file.

Hooks load the configuration on every call, and ``tomllib`` (with the ``typing`` module it
pulls in) is the largest import they would pay for. So the merged, validated result is
kept in ``.ithaca/.runtime/config.json`` keyed by each file's size and modification time,
and TOML is parsed only when a file changed. The cache is read with the hook path's
JSON reader, which does not import ``json`` (and its ``re``). What the files may hold, and
how each is read and merged, is ``kernel.config_schema``, loaded only when the cache misses
(or no file exists).
"""

from __future__ import annotations

import os

from ithaca.kernel import lightjson
from ithaca.kernel.errors import IthacaError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CACHE_NAME = "config.json"


def defaults() -> dict[str, Any]:
    """Every section and key at its default (``kernel.config_schema``)."""
    from ithaca.kernel import config_schema

    return config_schema.defaults()


def home() -> str:
    return os.environ.get("ITHACA_HOME") or os.path.join(os.path.expanduser("~"), ".ithaca")


def load(state_root: str | os.PathLike[str] | None) -> dict[str, Any]:
    """The effective configuration: defaults overlaid by each file that exists."""
    layers = [(os.path.join(home(), "config.toml"), "user")]
    cache_path = None
    if state_root is not None:
        runtime = os.path.join(state_root, ".runtime")
        layers.append((os.path.join(state_root, "config.toml"), "team"))
        layers.append((os.path.join(runtime, "config.toml"), "local"))
        cache_path = os.path.join(runtime, CACHE_NAME)
    present = []
    for path, layer in layers:
        stamp = _stamp(path)
        if stamp is not None:
            present.append((path, layer, stamp))
    if not present:
        return defaults()
    key = [[path, *stamp] for path, _, stamp in present]
    cached = _cached(cache_path, key)
    if cached is not None:
        return cached
    from ithaca.kernel import config_schema

    config = config_schema.merged([(path, layer) for path, layer, _ in present])
    if cache_path is not None:
        _remember(cache_path, key, config)
    return config


def _stamp(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


def _cached(cache_path: str | None, key: list[list[Any]]) -> dict[str, Any] | None:
    if cache_path is None:
        return None
    try:
        with open(cache_path, encoding="utf-8") as handle:
            stored = lightjson.loads(handle.read())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("key") != key:
        return None
    config = stored.get("config")
    return config if isinstance(config, dict) else None


def _remember(cache_path: str, key: list[list[Any]], config: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only costs the next call a TOML parse."""
    from ithaca.kernel.files import write_atomic

    folder, name = os.path.split(cache_path)
    try:
        write_atomic(folder, name, lightjson.dumps({"key": key, "config": config}))
    except (OSError, IthacaError):
        return
