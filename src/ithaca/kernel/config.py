"""One configuration loader for every part.

Precedence, lowest first: ``$ITHACA_HOME/config.toml`` (the user's), ``.ithaca/config.toml``
(tracked, the team's), ``.ithaca/.runtime/config.toml`` (this checkout's). Each part owns a
section; an unknown section or key is ``INVALID_CONFIG`` so a typo never silently drops a
rule. Keys that choose an executable are honoured only from the user or local file.

The files are read by their bytes (``kernel.regular``): the team's and the local file only
as singly linked regular files, the user's through a link if it is one. Anything else
where a layer belongs (a symbolic link, a FIFO, a folder) is ``INVALID_CONFIG``, never
skipped and never waited on.

Hooks load the configuration on every call, and ``tomllib`` (with the ``typing`` module it
pulls in) is the largest import they would pay for. So the merged, validated result is
kept in ``.ithaca/.runtime/config.json`` keyed by each file's SHA-256 (and Ithaca's
version), and TOML is parsed only when a file's bytes changed. That cache is derived: it
is never accepted as configuration in its own right. The effect check
(``ithaca.hosts.effects``) covers it, and when it changed ``audit`` rebuilds it from the
files and says whether it claimed a configuration they do not give; recording the
accepted fingerprint rebuilds it first (``refresh``). The cache is read with the hook
path's JSON reader, which does not import ``json`` (and its ``re``). What the files may
hold, and how each is read and merged, is ``kernel.config_schema``, loaded only when the
cache misses (or no file exists).
"""

from __future__ import annotations

import os

from ithaca.kernel import lightjson, regular
from ithaca.kernel.errors import InvalidInput, IthacaError

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
    present = _present(state_root)
    if not present:
        return defaults()
    cache_path = _cache_path(state_root)
    key = _key(present)
    cached = _cached(cache_path, key)
    if cached is not None:
        return cached
    config = _merged(present)
    if cache_path is not None:
        _remember(cache_path, key, config)
    return config


def audit(state_root: str | os.PathLike[str]) -> str | None:
    """Rebuild the derived cache from the files, and say what was wrong with the one it
    replaced when ``load`` would have taken it (keyed by the files as they are) although
    it holds a configuration they do not give; else None. A stale, unreadable or missing
    cache, which ``load`` never takes, is only rebuilt."""
    cache_path = _cache_path(state_root)
    assert cache_path is not None
    try:
        present = _present(state_root)
    except IthacaError:
        return None  # ``load`` refuses such a file before it looks at the cache
    token, data = regular.read(cache_path)
    if regular.odd(token):
        _unlink(cache_path)  # a link or a FIFO is never the cache; a folder stays
    stored = _parsed(data)
    taken = stored["config"] if stored and present and stored["key"] == _key(present) else None
    try:
        config = _merged(present) if present else None
    except IthacaError:
        config = None
    if config is None:
        _unlink(cache_path)
    elif taken is None or _text(taken) != _text(config):
        _remember(cache_path, _key(present), config)
    if taken is None or config is not None and _text(taken) == _text(config):
        return None
    if config is None:
        return "holds a configuration for files that Ithaca refuses (removed)"
    return "holds a configuration its files do not give (rebuilt from them)"


def refresh(state_root: str | os.PathLike[str]) -> None:
    """Rebuild the derived cache from the files, whatever it holds now."""
    audit(state_root)


def _present(state_root: str | os.PathLike[str] | None) -> list[tuple[str, str, str, bytes]]:
    """``(path, layer, token, bytes)`` of each configuration file that exists, lowest
    first (the token is ``kernel.regular``'s: the SHA-256, and the link the user's own
    file was read through); ``INVALID_CONFIG`` when something other than a regular file
    stands there."""
    layers = [(os.path.join(home(), "config.toml"), "user")]
    if state_root is not None:
        layers.append((os.path.join(state_root, "config.toml"), "team"))
        layers.append((os.path.join(state_root, ".runtime", "config.toml"), "local"))
    present = []
    for path, layer in layers:
        token, data = regular.read_through(path) if layer == "user" else regular.read(path)
        if token is None:
            continue
        if data is None:
            raise InvalidInput(
                "INVALID_CONFIG",
                f"{path}: file is {regular.KINDS.get(token, token)}, not a regular file with"
                " one name; Ithaca reads no other: put the file itself there, or remove it",
                {"path": path, "key": ""},
            )
        present.append((path, layer, token, data))
    return present


def _cache_path(state_root: str | os.PathLike[str] | None) -> str | None:
    if state_root is None:
        return None
    return os.path.join(state_root, ".runtime", CACHE_NAME)


def _key(present: list[tuple[str, str, str, bytes]]) -> list[Any]:
    """What a cached result was made from: each file's path and token (its SHA-256, and
    the link it was read through), and the release that merged them."""
    import ithaca  # loaded already: the hook imports the package first

    return [ithaca.__version__, *([path, token] for path, _, token, _ in present)]


def _merged(present: list[tuple[str, str, str, bytes]]) -> dict[str, Any]:
    from ithaca.kernel import config_schema

    return config_schema.merged([(path, layer, data) for path, layer, _, data in present])


def _text(config: Any) -> str:
    """The configuration as one exact text: ``1`` and ``true`` differ, as TOML has them."""
    return lightjson.dumps(config, sort_keys=True)


def _cached(cache_path: str | None, key: list[Any]) -> dict[str, Any] | None:
    if cache_path is None:
        return None
    stored = _parsed(regular.read(cache_path)[1])  # a link, a FIFO or a second name: none
    return stored["config"] if stored is not None and stored["key"] == key else None


def _parsed(data: bytes | None) -> dict[str, Any] | None:
    """A cache's record (``{"key", "config"}``), or None when ``data`` is not one."""
    if data is None:
        return None
    try:
        stored = lightjson.loads(data.decode("utf-8"))  # text: bytes would cost ``json``
    except ValueError:  # UnicodeDecodeError too
        return None
    if not isinstance(stored, dict) or not isinstance(stored.get("config"), dict):
        return None
    stored.setdefault("key", None)
    return stored


def _remember(cache_path: str, key: list[Any], config: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only costs the next call a TOML parse."""
    from ithaca.kernel.files import write_atomic

    folder, name = os.path.split(cache_path)
    try:
        write_atomic(folder, name, lightjson.dumps({"key": key, "config": config}))
    except (OSError, IthacaError):
        return


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        return
