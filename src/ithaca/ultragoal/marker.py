"""The pursuing marker: a file that says "this session is pursuing" without the database.

If the Stop gate fails to read the store, it must still know whether to keep the agent
working (docs/hooks.md, "Failure policy"). The marker
``.ithaca/.runtime/ultragoal/pursuing/<session>`` is written after every commit that
enters pursuing and removed after every commit that leaves it; GC reconciles it with the
rows, so a crash between commit and marker write costs at most one wrongly decided error
path, never a completion.
"""

from __future__ import annotations

import os

FOLDER = os.path.join("ultragoal", "pursuing")


def path(runtime: str, session_id: str) -> str:
    return os.path.join(runtime, FOLDER, session_id)


def exists(runtime: str, session_id: str) -> bool:
    return os.path.isfile(path(runtime, session_id))


def sync(runtime: str, session_id: str, pursuing: bool) -> None:
    """Write or remove the marker to match the committed phase (the confined-file helper
    loads ``pathlib`` and ``re``, so it is imported only when a marker changes)."""
    from ithaca.kernel.files import remove_confined, write_atomic

    relative = os.path.join(FOLDER, session_id)
    if pursuing:
        write_atomic(runtime, relative, session_id + "\n")
    else:
        remove_confined(runtime, relative)


def listed(runtime: str) -> list[str]:
    """The sessions that currently have a marker."""
    try:
        return sorted(os.listdir(os.path.join(runtime, FOLDER)))
    except OSError:
        return []
