"""Each way a project's Ithaca state can be lost, as the hook, CLI and real-host tests
play it: how to lose it, the code it is refused under, and a command the refusal must name
to restore it (for a project that has a verified backup); and a way to meet file
permissions as an ordinary user does, also when the tests run as root."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from ithaca import init_project, open_project
from ithaca.kernel import doctor

RUNTIME = Path(".ithaca") / ".runtime"
DB = RUNTIME / "state.db"
# The capabilities that let root read any file: dropped, root meets permission bits too.
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24


def as_an_ordinary_user() -> None:
    """``preexec_fn``: the child meets file permissions even when the tests run as root
    (a file of mode 000 is then unreadable to it, as to any user)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _remove_db(root: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{root / DB}{suffix}").unlink(missing_ok=True)


def deleted(root: Path) -> None:
    shutil.rmtree(root / ".ithaca")


def emptied(root: Path) -> None:
    shutil.rmtree(root / ".ithaca")
    (root / ".ithaca").mkdir()


def a_file(root: Path) -> None:
    shutil.rmtree(root / ".ithaca")
    (root / ".ithaca").write_text("not a folder\n")


def a_link_to_nothing(root: Path) -> None:
    shutil.rmtree(root / ".ithaca")
    (root / ".ithaca").symlink_to(root.parent / "nowhere")


def a_link_to_other_state(root: Path) -> None:
    """``.ithaca`` pointing at the state of another project, with laxer rules, say."""
    other = root.parent / "other"
    other.mkdir()
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    init_project(other)[0].close()
    shutil.rmtree(root / ".ithaca")
    (root / ".ithaca").symlink_to(other / ".ithaca")


def runtime_deleted(root: Path) -> None:
    shutil.rmtree(root / RUNTIME)


def database_deleted(root: Path) -> None:
    _remove_db(root)


def garbage(root: Path) -> None:
    _remove_db(root)
    (root / DB).write_bytes(b"\x00not a database\xff" * 500)


def zero_length(root: Path) -> None:
    _remove_db(root)
    (root / DB).write_bytes(b"")


def a_folder(root: Path) -> None:
    _remove_db(root)
    (root / DB).mkdir()


def no_permission(root: Path) -> None:
    (root / DB).chmod(0)


# Each way to lose the state, with the code it is refused under and a command that
# restores it, as the refusal must name it (the project has a verified backup).
CASES: dict[str, tuple[Callable[[Path], None], str, tuple[str, ...]]] = {
    "deleted": (deleted, "STATE_MISSING", ("`git checkout -- .ithaca`", "`ithaca init`")),
    "emptied": (emptied, "STATE_MISSING", ("`git checkout -- .ithaca`", "`ithaca init`")),
    "a file": (a_file, "STATE_MISSING", ("`mv .ithaca .ithaca.moved`", "`ithaca init`")),
    "a link to nothing": (a_link_to_nothing, "STATE_MISSING", ("`mv .ithaca", "`ithaca init`")),
    "a link to another state": (
        a_link_to_other_state,
        "STATE_MISSING",
        ("another folder's state", "`mv .ithaca", "`ithaca init`"),
    ),
    "runtime deleted": (runtime_deleted, "STATE_MISSING", ("`ithaca init`",)),
    "database deleted": (database_deleted, "STATE_MISSING", ("`ithaca doctor restore state-",)),
    "garbage": (garbage, "STATE_UNREADABLE", ("`ithaca doctor restore state-",)),
    "zero length": (zero_length, "STATE_EMPTIED", ("`ithaca doctor restore state-",)),
    "a folder": (a_folder, "STATE_UNREADABLE", ("`ithaca doctor restore state-",)),
    "no permission": (no_permission, "STATE_UNREADABLE", ("permission denied", "chmod u+rw")),
}


def with_backup(root: Path) -> Path:
    """``root``'s project with one verified backup (what ``ithaca doctor restore`` takes)."""
    project = open_project(root)
    doctor.backup(project.project, project.store)
    project.close()
    return root
