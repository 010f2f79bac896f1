"""What a turn began with, and what Ithaca's verification must show against it.

The critic captures, at a turn's first mutating call, the content digest of the project
(``digest``), the runner configuration as it then was (the files the runner's ``config``
patterns name, by content, their bytes kept as blobs) and the last verification run
before the turn. A verification later in the turn runs with that configuration laid over
whatever the turn made of it, and passes the turn only if every test that passed then
still passed; a configuration the turn changed ends the turn UNVERIFIED unless the user
accepted it (``ithaca verify accept-config``). Standard library and light modules only:
the critic loads this in the hook.
"""

from __future__ import annotations

import os

from ithaca.kernel.globmatch import fnmatchcase

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

    from ithaca.kernel.project import Project
    from ithaca.verification.digest import Tree
    from ithaca.verification.runners import Runner

CACHE_NAME = "digest-cache"


def current_tree(project: Project, settings: Mapping[str, Any], until: float | None = None) -> Tree:
    """The project's content digest now, with the stat cache in Ithaca's runtime folder
    (``settings`` is ``config["verification"]``: its ``skip`` folders are left out);
    ``digest.Unfinished`` when ``until`` (monotonic) comes first."""
    from ithaca.verification import digest

    cache = os.path.join(project.runtime, CACHE_NAME)
    return digest.tree(project.root, cache=cache, skip=settings["skip"], until=until)


def configuration(files: Mapping[str, str], patterns: Iterable[str]) -> dict[str, str]:
    """The entries of ``files`` that configure the runner (its ``config`` patterns)."""
    chosen = tuple(patterns)
    return {path: entry for path, entry in files.items() if _configures(path, chosen)}


def settings(verification: Mapping[str, Any], state: Mapping[str, Any] | None) -> dict[str, Any]:
    """The verification settings of a turn (``verification`` is ``config["verification"]``,
    ``state`` the critic's): the commands its ``require_verification`` constraint names,
    when it names some, stand for the configuration's."""
    chosen = dict(verification)
    named = ((state or {}).get("constraint") or {}).get("commands")
    if named:
        chosen["commands"] = list(named)
    return chosen


def runner_config(state: Mapping[str, Any] | None, runner: Runner) -> dict[str, str] | None:
    """The runner's configuration as the turn whose critic state is ``state`` began with
    it, or None when no turn that changed the project is open."""
    if not state or not state.get("changed") or state.get("turn_config") is None:
        return None
    return configuration(state["turn_config"], runner.config)


def configuration_digest(config: Mapping[str, str]) -> str:
    """One digest of a runner configuration (its files' paths and contents)."""
    import hashlib

    text = "\n".join(f"{path}\t{config[path]}" for path in sorted(config))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def overlay(
    then: Mapping[str, str], now: Mapping[str, str], read_blob: Any
) -> dict[str, bytes | None]:
    """The files to lay over the project so the runner sees its configuration as it was
    at the turn's start: each changed file's old bytes, None for a file the turn added."""
    laid: dict[str, bytes | None] = {}
    for path, entry in now.items():
        old = then.get(path)
        if old is None:
            laid[path] = None
        elif old != entry and _is_content(old):
            laid[path] = read_blob(old.lstrip("x"))
    return laid


def runner_sections(data: bytes, prefixes: Iterable[str]) -> str:
    """The sections of an INI or TOML file whose header starts with one of ``prefixes``
    (``[tool.pytest.ini_options]``), as text: what a runner reads of a shared file."""
    kept: list[str] = []
    keeping = False
    wanted = tuple(prefixes)
    for line in data.decode("utf-8", "replace").splitlines():
        stripped = line.strip()
        if stripped.startswith("[") and not stripped.startswith("[["):
            header = stripped.strip("[] \t")
            keeping = header.startswith(wanted)
        if keeping and stripped and not stripped.startswith(("#", ";")):
            kept.append(stripped)
    return "\n".join(kept)


def lost_tests(before: Mapping[str, str], after: Mapping[str, str]) -> list[str]:
    """The tests that passed in ``before`` and did not pass in ``after``, each with what
    became of it (removed or deselected, skipped, failed)."""
    lost = []
    for test_id, outcome in sorted(before.items()):
        if outcome != "passed":
            continue
        now = after.get(test_id)
        if now is None:
            lost.append(f"{test_id} (no longer run)")
        elif now != "passed":
            lost.append(f"{test_id} ({now})")
    return lost


def _is_content(entry: str) -> bool:
    """Whether a digest entry names file content (a SHA-256, executable or not)."""
    return len(entry.lstrip("x")) == 64


def _configures(path: str, patterns: tuple[str, ...]) -> bool:
    name = path.rsplit("/", 1)[-1]
    for pattern in patterns:
        if pattern.startswith("**/"):
            if fnmatchcase(name, pattern[3:]):
                return True
        elif pattern.endswith("/**"):
            if path.startswith(pattern[:-2]):
                return True
        elif fnmatchcase(path, pattern):
            return True
    return False
