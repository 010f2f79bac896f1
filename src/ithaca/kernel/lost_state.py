"""When a project's Ithaca state is gone, and what brings it back.

Deleting ``.ithaca/`` must not switch Ithaca off: a hook that found no state would
otherwise abstain, and every gate with it. So a folder without state is told apart from
one whose state was lost, by what says Ithaca was set up there:

- the record ``ithaca init`` keeps outside the project, in the user's Ithaca home
  (``$ITHACA_HOME/projects/<digest of the root>.json``), where an agent's file tools are
  refused and a sandboxed shell cannot write. It is the only sign the Claude Code plugin
  has, since the plugin runs its hooks in every repository the user opens;
- the project's own host wiring naming ``ithaca-hook`` (each host adapter's
  ``runs_ithaca``), which a teammate's clone carries too.

A folder with neither was never set up, and is left alone. Where the state folder is
there but its database is missing or cannot be read, the folder itself says Ithaca was set
up, so no other sign is needed.

Each way of losing the state is diagnosed here once, as a ``Lost`` with a stable code
(``STATE_MISSING``, ``STATE_UNREADABLE``, ``STATE_EMPTIED``), what is wrong and the
commands that restore it, so that the hook's refusal, ``ithaca status``, ``ithaca doctor``
and the MCP server say the same. The diagnosis runs only once a cheaper test has failed
(no state found, or the database would not open): a hook call in a healthy project never
loads this module. Standard library and light kernel modules only, for the hook.
"""

from __future__ import annotations

import os
import stat

from ithaca.kernel import config
from ithaca.kernel.canon import sha256
from ithaca.kernel.errors import Corrupt, IthacaError, NotFound
from ithaca.kernel.project import RUNTIME_DIR_NAME, STATE_DIR_NAME, WORK_DIR_NAME, Project

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections import namedtuple
    from typing import Any

    from ithaca.kernel.call import Call
else:
    from ithaca.kernel.tuples import namedtuple

MISSING = "STATE_MISSING"
UNREADABLE = "STATE_UNREADABLE"
EMPTIED = "STATE_EMPTIED"
# The journal no longer holds events Ithaca committed (``kernel.anchor``): the codes the
# doctor reports too.
TAIL_MISSING = "JOURNAL_TAIL_MISSING"
ROLLED_BACK = "JOURNAL_ROLLED_BACK"
ACCEPT = (
    "`ithaca doctor lift-lockdown` (accepts the journal as it is now: what was lost stays lost)"
)
# The folder of the user's Ithaca home where ``ithaca init`` records each project.
RECORDS_DIR_NAME = "projects"
# What ``ithaca init`` recorded, as the reason to expect state in a folder.
INIT_RAN = "`ithaca init` ran here"
START_AGAIN = (
    "`ithaca init` (a new state database: the journal, sessions and approvals that were"
    " kept only on this machine are lost)"
)
REBUILD = "`ithaca doctor --rebuild` (a new database loaded from the tracked files)"
# What SQLite says of a database another process holds for a moment: not lost.
TRANSIENT = ("locked", "busy")
# The Ithaca commands an agent may still run while the state is lost: they only report
# (and report the loss); ``init``, ``record`` and the rest would make new state.
REPORTING_COMMANDS: tuple[list[str], ...] = ([], ["status"], ["doctor"], ["log"], ["next"])


class Lost(namedtuple("Lost", "code root what restore details")):
    """A project's lost state: ``code``, the project ``root``, ``what`` is wrong (a
    sentence), the ``restore`` commands in order (each a sentence part), and ``details``
    for a script (``problem`` names the case)."""

    __slots__ = ()
    if TYPE_CHECKING:  # the fields' types, which ``namedtuple`` cannot carry
        code: str
        root: str
        what: str
        restore: tuple[str, ...]
        details: dict[str, Any]

    @property
    def message(self) -> str:
        """What is wrong, what Ithaca does meanwhile, and how to restore it."""
        steps = ", then ".join(self.restore)
        return (
            f"{self.what} Until it is restored, Ithaca refuses every call that could change"
            f" the project. To restore it, in a terminal at {self.root}: {steps}."
        )

    @property
    def user_message(self) -> str:
        """The message, and, where Ithaca's record is what says it was set up here, how
        the user lets the folder go instead (not for the agent, which cannot)."""
        record = self.details.get("record")
        if not record:
            return self.message
        return (
            f"{self.message} (If Ithaca was removed from this project on purpose, delete"
            f" {record} and Ithaca leaves the folder alone.)"
        )

    def error(self) -> IthacaError:
        """The coded error ``ithaca status``, ``ithaca doctor`` and the MCP server answer."""
        kind = NotFound if self.code == MISSING else Corrupt
        return kind(self.code, self.user_message, {"root": self.root, **self.details})


def acts(call: Call) -> bool:
    """Whether a call could change something, so that it is refused while the state is
    lost: a mutating call, any call of Ithaca's MCP tools, and Ithaca commands other than
    its reports (an agent's ``ithaca init`` would make new state in place of the lost)."""
    if call.mutating:
        return True
    if call.tool_class != "ithaca":
        return False
    if not call.ithaca_commands:
        return True  # one of Ithaca's MCP tools
    from ithaca.kernel.authority import command_words

    return any(
        command_words(argv) not in REPORTING_COMMANDS or "--repair" in argv or "--rebuild" in argv
        for argv in call.ithaca_commands
    )


def record_path(root: str) -> str:
    """Where Ithaca records, outside the project, that it was set up at ``root``:
    ``$ITHACA_HOME/projects/<SHA-256 of the resolved root, 32 digits>.json``."""
    name = sha256(os.path.realpath(root).encode()).hexdigest()[:32]
    return os.path.join(config.home(), RECORDS_DIR_NAME, f"{name}.json")


def set_up_here(root: str, wiring: str | None) -> tuple[str | None, str | None]:
    """Why state is expected at ``root`` (``INIT_RAN``, or the wiring file that runs
    Ithaca's hook), and the record's path when the record is why; (None, None) when
    nothing says Ithaca was set up there."""
    record = record_path(root)
    if os.path.exists(record):
        return INIT_RAN, record
    if wiring is not None:
        return f"its {wiring} runs ithaca-hook", None
    return None, None


def folder_lost(root: str, why: str, record: str | None = None) -> Lost | None:
    """What became of ``root``'s state folder, when it holds no state of this project
    (deleted, emptied, a file, a link to nothing or to another folder's state), or None
    when it holds state (a session worktree's link to the project's state included).
    ``why`` says how Ithaca knows it was set up there."""
    path = os.path.join(root, STATE_DIR_NAME)
    opening = f"Ithaca was set up in {root} ({why}), but"
    moved = None
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        problem, what = "deleted", f"{opening} its state folder `.ithaca/` is gone: it was deleted."
    except OSError as exc:
        problem = "unreadable"
        what = f"{opening} its state folder `.ithaca/` cannot be read ({exc.strerror})."
    else:
        if stat.S_ISLNK(mode):
            target = os.path.realpath(path)
            if _holds_state(target):
                owner_work = os.path.join(os.path.dirname(target), WORK_DIR_NAME)
                if _inside(os.path.realpath(root), owner_work):
                    return None  # a session worktree's link to its project's state
                problem = "link"
                what = (
                    f"{opening} `.ithaca` is now a link to {target}, another folder's state,"
                    " which Ithaca does not obey."
                )
            else:
                problem = "link"
                what = (
                    f"{opening} `.ithaca` is now a link to {target}, which holds no Ithaca state."
                )
            moved = "`mv .ithaca .ithaca.moved` (the link)"
        elif stat.S_ISDIR(mode):
            if _holds_state(path):
                return None
            problem = "emptied"
            what = f"{opening} its state folder `.ithaca/` is empty: what it held was deleted."
        else:
            problem = "file"
            what = f"{opening} `.ithaca` is now a file, not Ithaca's state folder."
            moved = "`mv .ithaca .ithaca.moved` (the file)"
    restore = (
        *((moved,) if moved else ()),
        "`git checkout -- .ithaca` (its committed files, if it was committed)",
        START_AGAIN,
    )
    details: dict[str, Any] = {"problem": problem, "setUpBy": why}
    if record:
        details["record"] = record
    return Lost(MISSING, root, what, restore, details)


def database_lost(project: Project, error: str | None = None) -> Lost | None:
    """What is wrong with ``project``'s state database: gone, a folder, empty (0 bytes)
    after Ithaca had committed to it, or, given the ``error`` opening it raised, not
    readable. None when none of these holds (without ``error``: as far as a stat can tell,
    which is all a healthy project costs), and for an error that passes (a lock held by
    another process: nothing is lost, and the failure policy answers it).
    """
    db = project.db_path
    try:
        info = os.stat(db)
    except FileNotFoundError:
        if not os.path.isdir(project.runtime):
            what = (
                f"Ithaca's local state for {project.root}, `{STATE_DIR_NAME}/{RUNTIME_DIR_NAME}/`"
                " (its database, backups and sessions), is missing: it was deleted, or"
                " `ithaca init` never ran in this checkout."
            )
            return _lost(MISSING, project, what, (START_AGAIN,), "runtime_deleted")
        return _database(MISSING, project, "is gone.", "database_deleted", START_AGAIN)
    except OSError as exc:
        return _unreachable(project, f"cannot be reached ({exc.strerror}).")
    if stat.S_ISDIR(info.st_mode):
        return _database(UNREADABLE, project, "is a folder, not a database.", "folder")
    if info.st_size == 0 and _anchored(project):
        what = (
            "is empty (0 bytes), though Ithaca had committed journal events to it: it was"
            " emptied or replaced behind Ithaca's back."
        )
        return _database(EMPTIED, project, what, "zero_length", REBUILD)
    if error is None or any(word in error.lower() for word in TRANSIENT):
        return None
    if not os.access(db, os.R_OK | os.W_OK):
        return _unreachable(project, "cannot be opened: permission denied.")
    return _database(UNREADABLE, project, f"cannot be read ({error}).", "not_a_database", REBUILD)


def journal_lost(project: Project, conn: Any) -> Lost | None:
    """What the journal lost, when it no longer holds events Ithaca committed (its
    anchor's or this home's head record's: ``kernel.anchor``), as a loss with the backup
    that restores it: ``JOURNAL_TAIL_MISSING`` (the anchor beside the database names an
    event that is gone) or ``JOURNAL_ROLLED_BACK`` (the head kept in the user's home does;
    an older copy was put back with its anchor). A write-ahead log deleted or damaged
    after a crash, an older copy of the database, a truncated file: each reads so. None
    when nothing was lost, or when what is wrong is a forged record or a missing key (the
    effect check's lockdown answers those)."""
    from ithaca.kernel import anchor

    found = dict(anchor.problems(project.runtime, conn))
    code = next((code for code in anchor.LOSSES if code in found), None)
    if code is None:
        return None
    shown = os.path.relpath(project.db_path, project.root)
    what = (
        f"Ithaca's journal for {project.root} (`{shown}`) lost events it had committed:"
        f" {found[code]}. What those events recorded is gone with them."
    )
    backup = latest_backup(project)
    steps: tuple[str, ...]
    if backup is None:
        steps = (ACCEPT,)
    else:
        holds = _backup_head(project, backup)
        reach = f", journal up to event {holds}" if holds is not None else ""
        steps = (
            f"`ithaca doctor restore {backup}` (the latest verified backup{reach}), or {ACCEPT}",
        )
    lost = _lost(f"JOURNAL_{code}", project, what, steps, code.lower(), backup)
    anchored = anchor.read(project.runtime, anchor.ANCHOR)
    if anchored is not None:
        lost.details["anchoredSeq"] = anchored[0]
    return lost


def _backup_head(project: Project, backup: str) -> int | None:
    """The journal head seq a backup's manifest names, or None when it cannot be read."""
    from ithaca.kernel import lightjson

    path = os.path.join(project.backups_dir, backup[: -len(".db")] + ".json")
    try:
        with open(path, encoding="utf-8") as stream:
            manifest = lightjson.loads(stream.read())
        return int(manifest["journal_head_seq"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _database(
    code: str, project: Project, what: str, problem: str, otherwise: str | None = None
) -> Lost:
    """A lost database: ``what`` is wrong with it; restored from the latest backup, else by
    ``otherwise`` (None: a folder in its place, moved away and then rebuilt)."""
    shown = os.path.relpath(project.db_path, project.root)
    backup = latest_backup(project)
    restore_backup = f"`ithaca doctor restore {backup}` (the latest verified backup)"
    if otherwise is None:  # a restore moves the folder into its quarantine itself
        steps = (restore_backup,) if backup else (f"`mv {shown} {shown}.moved`", REBUILD)
    else:
        steps = (f"{restore_backup}, or {otherwise}",) if backup else (otherwise,)
    opening = f"Ithaca's state database for {project.root}, `{shown}`,"
    return _lost(code, project, f"{opening} {what}", steps, problem, backup)


def latest_backup(project: Project) -> str | None:
    """The newest backup ``ithaca doctor restore`` takes, by file name (every backup was
    verified when it was taken, ``kernel.backups``; the restore verifies it again); None
    when there is none."""
    from ithaca.kernel import backups

    return max(backups.names(project.backups_dir), default=None)


def record(root: str, state_root: str) -> None:
    """Record, in the user's Ithaca home, that Ithaca was set up at ``root``, unless it is
    recorded already (``ithaca init``, and any project the CLI or the MCP server opens, so
    that projects set up before the record existed get one; not the hook path). Best
    effort: a home that cannot be written (an agent's sandbox shows it read-only) goes
    without."""
    path = record_path(root)
    if os.path.exists(path):
        return
    from ithaca.kernel import clock, lightjson
    from ithaca.kernel.files import write_atomic

    text = lightjson.dumps({"root": root, "stateRoot": state_root, "initialisedAt": clock.now()})
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        write_atomic(os.path.dirname(path), os.path.basename(path), text + "\n")
    except (OSError, IthacaError):
        return


def _unreachable(project: Project, what: str) -> Lost:
    db = project.db_path
    shown = os.path.relpath(db, project.root)
    restore = (f"give it back its permissions (`chmod u+rw {db}`; `ls -l {db}` shows its owner)",)
    opening = f"Ithaca's state database for {project.root}, `{shown}`,"
    return _lost(UNREADABLE, project, f"{opening} {what}", restore, "permission")


def _lost(
    code: str,
    project: Project,
    what: str,
    restore: tuple[str, ...],
    problem: str,
    backup: str | None = None,
) -> Lost:
    details: dict[str, Any] = {"problem": problem, "database": project.db_path}
    if backup:
        details["backup"] = backup
    return Lost(code, project.root, what, restore, details)


def _anchored(project: Project) -> bool:
    """Whether Ithaca had committed a journal event to this database (its anchor)."""
    from ithaca.kernel.anchor import ANCHOR

    return os.path.exists(os.path.join(project.runtime, ANCHOR))


def _holds_state(folder: str) -> bool:
    try:
        return bool(os.listdir(folder))
    except OSError:
        return False


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)
