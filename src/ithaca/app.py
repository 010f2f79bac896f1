"""Opening a project for the CLI, the MCP server and the Python API.

``init_project`` creates the ``.ithaca/`` planes and the store (and, in a Git repository,
publishes the team ledger and registers its merge driver); ``open_project`` finds an
existing project, migrates its store and reconciles the protocol seeds and files. Both
are for long-lived or user-driven processes: hooks use ``kernel.project`` directly and
never migrate.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ithaca.kernel import (
    IGNORE_LINE,
    Corrupt,
    NotFound,
    Project,
    Refused,
    Store,
    find_project,
    git_top,
    lost_state,
    planned_project,
)
from ithaca.kernel import config as config_loader

if TYPE_CHECKING:
    from ithaca.delivery import DeliveryService
    from ithaca.protocols import ProtocolsService
    from ithaca.ultragoal import UltragoalService
    from ithaca.ulysses import KnowledgeService, UlyssesService
    from ithaca.validators import NotebookService
    from ithaca.verification import VerificationService


# What a store that would not open raises (``kernel.connection``, ``kernel.store``).
LOST_CODES = ("STATE_UNREADABLE", "STATE_EMPTIED")


class IthacaProject:
    """An open project: its roots, configuration, store and part services."""

    def __init__(self, project: Project):
        self.project = project
        self.config: dict[str, Any] = config_loader.load(project.state_root)
        # The CLI's and the MCP server's store backs itself up (``kernel.store``).
        self.store = Store(project.db_path, backups_dir=project.backups_dir, auto_backup=True)

    @cached_property
    def protocols(self) -> ProtocolsService:
        from ithaca.protocols import ProtocolsService

        return ProtocolsService(self.project, self.store, self.config)

    @cached_property
    def notebooks(self) -> NotebookService:
        from ithaca.validators import NotebookService

        return NotebookService(self.project, self.store, self.config)

    @cached_property
    def ulysses(self) -> UlyssesService:
        from ithaca.ulysses import UlyssesService

        return UlyssesService(self.project, self.store, self.config)

    @cached_property
    def delivery(self) -> DeliveryService:
        """Opening it finishes or rolls back what a crashed writer left half done."""
        from ithaca.delivery import DeliveryService

        return DeliveryService(self.project, self.store, self.config)

    @cached_property
    def ultragoal(self) -> UltragoalService:
        from ithaca.ultragoal import UltragoalService

        return UltragoalService(self.project, self.store, self.config)

    @cached_property
    def knowledge(self) -> KnowledgeService:
        from ithaca.ulysses import KnowledgeService

        return KnowledgeService(self.project, self.store, self.config)

    @cached_property
    def verification(self) -> VerificationService:
        from ithaca.verification import VerificationService

        return VerificationService(self.project, self.store, self.config)

    def close(self) -> None:
        self.store.close()


def open_project(path: str | os.PathLike[str] = ".", *, reconcile: bool = True) -> IthacaProject:
    """The project containing ``path``; ``NOT_INITIALISED`` when there is none, and the
    code of ``kernel.lost_state`` (``STATE_MISSING``, ``STATE_UNREADABLE``,
    ``STATE_EMPTIED``) when Ithaca was set up there but its state is gone, or
    (``JOURNAL_TAIL_MISSING``, ``JOURNAL_ROLLED_BACK``) its journal lost events Ithaca
    had committed: nothing is written on top of a loss until the user restores a backup or
    accepts the journal as it is (``ithaca doctor`` opens the store without this)."""
    found = find_project(path)
    lost = lost_state_at(path, found)
    if lost is not None:
        raise lost.error()
    if found is None or not os.path.exists(found.db_path):
        raise NotFound(
            "NOT_INITIALISED",
            f"no Ithaca project at or above {os.path.abspath(path)}; run `ithaca init`",
            {"path": os.path.abspath(path)},
        )
    with lost_database_named(found):
        opened = IthacaProject(found)
    lost_journal = journal_lost(opened)
    if lost_journal is not None:
        opened.close()
        raise lost_journal.error()
    lost_state.record(found.root, found.state_root)
    if reconcile:
        opened.protocols.reconcile()
    return opened


def lost_state_at(
    path: str | os.PathLike[str], found: Project | None, *, database: bool = True
) -> lost_state.Lost | None:
    """What is lost of the state of the project at ``path`` (``found`` there), when Ithaca
    was set up there (``ithaca init``'s record, or a host's wiring naming ``ithaca-hook``)
    and its state folder holds no state of its own, or (with ``database``) its database is
    gone, a folder, or emptied; None otherwise. Only a stat or two on a healthy project."""
    here = os.path.abspath(path)
    home = found.work_root if found is not None else (git_top(here) or here)
    if (found is None or found.root != home) and not os.environ.get("ITHACA_DIR"):
        from ithaca.hosts import runs_ithaca

        why, record = lost_state.set_up_here(home, runs_ithaca(home))
        gone = lost_state.folder_lost(home, why, record) if why is not None else None
        if gone is not None:
            return gone
    if found is None or not database:
        return None
    return lost_state.database_lost(found)


@contextmanager
def lost_database_named(found: Project) -> Iterator[None]:
    """Turn a database that would not open (``STATE_UNREADABLE`` from the store) into the
    same diagnosis, with the commands that restore it, as the hooks give."""
    try:
        yield
    except Corrupt as exc:
        lost = lost_state.database_lost(found, exc.message) if exc.code in LOST_CODES else None
        if lost is None:
            raise
        raise lost.error() from None


def journal_lost(opened: IthacaProject) -> lost_state.Lost | None:
    """The loss of committed journal events, as the hooks report it; the cheap test of
    the anchor first (``kernel.anchor.behind``), the diagnosis only where it fails."""
    from ithaca.kernel import anchor

    conn = opened.store.connection()
    if not anchor.behind(conn):
        return None
    return lost_state.journal_lost(opened.project, conn)


def init_project(path: str | os.PathLike[str] = ".") -> tuple[IthacaProject, list[str]]:
    """Create (or complete) a project's planes; safe to run again. Returns what it made."""
    project = planned_project(path)
    if os.path.exists(project.state_root) and not os.path.isdir(project.state_root):
        raise Refused(
            "STATE_ROOT_NOT_A_FOLDER",
            f"{project.state_root} exists and is not a folder; move it away first",
            {"path": project.state_root},
        )
    writable = project.state_root
    while not os.path.isdir(writable) and os.path.dirname(writable) != writable:
        writable = os.path.dirname(writable)  # the folder that would hold what is made
    if not os.access(writable, os.W_OK):  # also EROFS, even for root
        raise Refused(
            "PATH_NOT_WRITABLE",
            f"{writable} cannot be written, so Ithaca cannot keep its state there; run"
            " `ithaca init` in a checkout you can write (check the folder's permissions, or"
            " that its file system is not mounted read-only)",
            {"path": writable},
        )
    made = []
    # The ignore rule first: if it cannot be written, nothing else has been created.
    if _ensure_ignored(project):
        made.append("ignore rule for .ithaca/.runtime/")
    for folder in (
        project.state_root,
        project.protocols_dir,
        project.runtime,
        project.blobs_dir,
        project.backups_dir,
    ):
        if not os.path.isdir(folder):
            os.makedirs(folder)
            made.append(_relative(folder, project.root))
    existed = os.path.exists(project.db_path)
    opened = IthacaProject(project)
    if not existed:
        made.append(_relative(project.db_path, project.root))
    opened.protocols.reconcile()
    made.extend(opened.delivery.set_up())
    from ithaca.kernel import clock, lockdown

    with opened.store.write() as conn:
        if lockdown.baseline(conn) is None:  # what it protects, as the user set it up
            lockdown.record_baseline(
                conn, project, actor="user", reason="ithaca init", at=clock.now()
            )
    # Outside the project: what tells a hook, once .ithaca/ is gone, that it was lost.
    lost_state.record(project.root, project.state_root)
    return opened, made


def _ensure_ignored(project: Project) -> bool:
    """Ignore the runtime plane in ``.gitignore``, or ``.git/info/exclude`` when the project
    keeps no ignore file of its own."""
    root = Path(project.root)
    gitignore = root / ".gitignore"
    exclude = root / ".git" / "info" / "exclude"
    line = IGNORE_LINE
    if Path(project.state_root) != root / ".ithaca":
        return False
    for candidate in (gitignore, exclude):
        if candidate.is_file() and line in candidate.read_text(encoding="utf-8").splitlines():
            return False
    target = gitignore if gitignore.is_file() or not exclude.parent.is_dir() else exclude
    from ithaca.kernel import write_atomic

    existing = target.read_text(encoding="utf-8") if target.is_file() else ""
    if existing and not existing.endswith("\n"):
        existing += "\n"
    write_atomic(root, target.relative_to(root).as_posix(), existing + line + "\n")
    return True


def _relative(path: str, root: str) -> str:
    return os.path.relpath(path, root).replace(os.sep, "/")
