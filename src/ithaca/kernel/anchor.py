"""The journal's anchor and head, sealed with a key the agent can neither read nor write.

The hash chain proves that every row fits the one before it, but not that nothing came
after the last row: deleting the tail, emptying the database or putting an older copy
back leaves a chain that verifies. So each write transaction that appended to the
journal leaves, once committed, its head (``seq`` and ``hash``) in two places:

- the *anchor*, ``.runtime/journal.anchor`` beside the database;
- the *head record*, ``$ITHACA_HOME/journals/<project>.head`` in the user's home, outside
  the project, so that an older database restored together with its older anchor still
  falls short of it.

Both records carry a MAC (HMAC-SHA256) under the user's *seal key*,
``$ITHACA_HOME/journal.key``: 32 random bytes made once, readable and writable by the
user alone. The hooks, the CLI and the MCP server run as the user, outside the agent's
sandbox, and seal; in the sandboxed profiles the agent's shell can write neither
``~/.ithaca`` nor the state folder and cannot read the key, so it can neither cut the
journal nor re-make a seal that matches a cut. The head record only moves forward along
the journal it names: a commit whose journal no longer holds the recorded head (cut,
replaced, rolled back) leaves both records as they are, so the evidence stays until the
user accepts the journal as it is (``rebase_on_commit``: ``ithaca doctor restore``,
``--rebuild``, ``lift-lockdown``). A project that was sealed once and finds its key
missing is reported, never silently given a new key.

In the unsandboxed profile the agent's commands run as the user: they can read the key
and re-make every seal, so a journal rewritten together with its anchor, head record and
page seals cannot be detected there (docs/hooks.md, Threat model).

Each record is one fixed-length line written in place with one ``pwrite`` (a rename
would cost every hook call an inode and a directory update, about 0.4 ms on ext4), and
carries a check of its own so a reader that catches it half written reads again. The
writes follow the commit: a crash in between leaves them behind the journal, never
ahead. Standard library only (hook path).
"""

from __future__ import annotations

import os
import stat  # loaded by ``os`` already

from ithaca.kernel.canon import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3

ANCHOR = "journal.anchor"
KEY = "journal.key"
HEADS = "journals"
# id(connection) -> its database folder; the head its open transaction appended; and the
# connections whose commit accepts the journal as it is.
_FOLDERS: dict[int, str] = {}
_PENDING: dict[int, tuple[int, str]] = {}
_REBASE: set[int] = set()
# A record caught half written fails its check; the writer's one pwrite is microseconds.
_READS = 3
# Never follow a link nor wait on a FIFO someone stood where a record belongs.
_OPEN_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_KEY_BYTES = 32
_BLOCK = 64
_IPAD = int.from_bytes(b"\x36" * _BLOCK, "big")
_OPAD = int.from_bytes(b"\x5c" * _BLOCK, "big")


def track(conn: sqlite3.Connection, database: str) -> None:
    """Remember where ``conn``'s database lives (its anchor goes beside it)."""
    _FOLDERS[id(conn)] = os.path.dirname(os.path.abspath(database))


def note(conn: sqlite3.Connection, seq: int, event_hash: str) -> None:
    """The open transaction on ``conn`` appended ``seq``."""
    _PENDING[id(conn)] = (seq, event_hash)


def rebase_on_commit(conn: sqlite3.Connection) -> None:
    """The open transaction on ``conn`` is the user accepting the journal as it is (a
    restore, a rebuild, a lifted lockdown): once committed, its head is sealed whatever
    the records held before, with a new key where the old one is gone."""
    _REBASE.add(id(conn))


def begun(conn: sqlite3.Connection) -> None:
    """A transaction begins on ``conn``: a head an earlier one left behind (its
    ``COMMIT`` failed) is not this one's to publish."""
    _PENDING.pop(id(conn), None)


def committed(conn: sqlite3.Connection) -> None:
    """Publish the head the transaction appended, now that it is committed."""
    head = _PENDING.pop(id(conn), None)
    rebase = id(conn) in _REBASE
    _REBASE.discard(id(conn))
    folder = _FOLDERS.get(id(conn))
    if head is not None and folder is not None:
        publish(conn, folder, head, rebase=rebase)


def rolled_back(conn: sqlite3.Connection) -> None:
    _PENDING.pop(id(conn), None)
    _REBASE.discard(id(conn))


def publish(
    conn: sqlite3.Connection, folder: str, head: tuple[int, str], *, rebase: bool = False
) -> None:
    """Seal ``head`` into the anchor and the head record, unless this home's head record
    or the anchor shows the journal no longer holds the head it recorded, or the head
    record cannot be trusted (its key gone, its seal not the key's): the records then
    stay as evidence, until a rebase. (Without the anchor's own test, a commit from a
    process whose home holds no head record, made on a journal that lost its tail,
    would move the anchor over the loss and hide it.)"""
    key, found = load_key()
    recorded = read_record(head_path(folder))
    if not rebase:
        if recorded is not None:
            if (
                key is None
                or sealed_by(key, recorded[2], _head_message(folder, recorded)) is not True
            ):
                return  # sealed from this home before, and its key is gone or the record forged
            if _hash_at(conn, recorded[0]) != recorded[1]:
                return  # cut, replaced or rolled back: keep what Ithaca committed
        anchored = read_record(os.path.join(folder, ANCHOR))
        if (
            anchored is not None
            and (recorded is None or anchored[:2] != recorded[:2])
            and _hash_at(conn, anchored[0]) != anchored[1]
            and not (
                key is not None and sealed_by(key, anchored[2], _anchor_message(anchored)) is False
            )
        ):
            return  # the journal lost what the anchor names: keep it as evidence
    if key is None:
        if found != "missing":
            return
        key = make_key()  # this home never sealed this project: its first seal
        if key is None:
            return
    write(folder, ANCHOR, head, key)
    write_head(folder, head, key)


# --- checking --------------------------------------------------------------------------------


def problems(folder: str, conn: sqlite3.Connection) -> list[tuple[str, str]]:
    """What the anchor, the head record and the key say is wrong with the journal, as
    ``(code, message)``: SEAL_KEY_MISSING (this home sealed the project and its key is
    gone), SEAL_KEY_UNREADABLE (the key cannot be read from here; the records are then
    checked unsealed), ANCHOR_FORGED, HEAD_FORGED, TAIL_MISSING (the journal no longer
    holds the event the anchor names) and ROLLED_BACK (nor the head Ithaca recorded in
    the user's home). An anchor another home's key sealed is checked unsealed."""
    key, found = load_key()
    anchored = read_record(os.path.join(folder, ANCHOR))
    recorded = read_record(head_path(folder))
    listed: list[tuple[str, str]] = []
    if key is None and recorded is not None:
        code = "SEAL_KEY_MISSING" if found == "missing" else "SEAL_KEY_UNREADABLE"
        listed.append((code, MESSAGES[code].format(key_path())))
    cut = False
    if anchored is not None:
        forged = False
        # An unsealed record (an older release's) is forged only where this home sealed
        # the project before; elsewhere it is an upgrade that no commit has sealed yet.
        if key is not None and (anchored[2] or recorded is not None):
            forged = sealed_by(key, anchored[2], _anchor_message(anchored)) is False
        if forged:
            listed.append(("ANCHOR_FORGED", MESSAGES["ANCHOR_FORGED"]))
        elif _hash_at(conn, anchored[0]) != anchored[1]:
            listed.append(("TAIL_MISSING", MESSAGES["TAIL_MISSING"].format(anchored[0])))
            cut = True
    if recorded is not None:
        ours = key is None or sealed_by(key, recorded[2], _head_message(folder, recorded))
        if ours is not True:
            listed.append(("HEAD_FORGED", MESSAGES["HEAD_FORGED"]))
        elif not cut and _hash_at(conn, recorded[0]) != recorded[1]:
            listed.append(("ROLLED_BACK", MESSAGES["ROLLED_BACK"].format(recorded[0])))
    return listed


MESSAGES = {
    "SEAL_KEY_MISSING": "the key that seals the journal ({}) is gone",
    "SEAL_KEY_UNREADABLE": "the key that seals the journal ({}) cannot be read here",
    "HEAD_FORGED": "the journal head kept in the user's home is not sealed with the user's"
    " key: it was rewritten outside Ithaca",
    "ROLLED_BACK": "the journal no longer holds event {}, which Ithaca committed and recorded"
    " in the user's home: an older copy of the database was put back with its anchor, or"
    " the journal was cut",
    "ANCHOR_FORGED": "the journal's anchor is not sealed with the user's key: it was"
    " rewritten outside Ithaca",
    "TAIL_MISSING": "event {}, which Ithaca committed, is gone or rewritten: the database's"
    " write-ahead log was lost (deleted, damaged, or cut short by a power loss), the database"
    " replaced by an older copy or truncated, or the journal cut",
}


# What ``problems`` reports when the journal itself fell short of what Ithaca committed (a
# loss: a deleted or damaged write-ahead log, an older copy put back, a truncated file),
# as opposed to records that are forged or a key that is gone.
LOSSES = ("TAIL_MISSING", "ROLLED_BACK")


def behind(conn: sqlite3.Connection) -> bool:
    """Whether the journal behind ``conn`` no longer holds the head its anchor or this
    home's head record names: the cheap test every hook runs on opening the store (two
    small reads and an indexed query or two; no seal is checked). ``problems`` says what
    it is. A connection to no tracked file is never behind."""
    folder = _FOLDERS.get(id(conn))
    if folder is None:
        return False
    anchored = read_record(os.path.join(folder, ANCHOR))
    recorded = read_record(head_path(folder))
    if anchored is not None and _hash_at(conn, anchored[0]) != anchored[1]:
        return True
    if recorded is None or (anchored is not None and anchored[:2] == recorded[:2]):
        return False
    return _hash_at(conn, recorded[0]) != recorded[1]


def holds(conn: sqlite3.Connection) -> bool:
    """Whether the journal behind ``conn`` still holds what Ithaca committed, under sound
    seals (no ``problems``); a connection to no tracked file holds."""
    folder = _FOLDERS.get(id(conn))
    return folder is None or not problems(folder, conn)


def read(folder: str, name: str) -> tuple[int, str] | None:
    """The head recorded in ``folder/name`` (sealed or not), or None when there is none."""
    found = read_record(os.path.join(folder, name))
    return None if found is None else (found[0], found[1])


# --- the key ---------------------------------------------------------------------------------


def key_path() -> str:
    from ithaca.kernel import config

    return os.path.join(config.home(), KEY)


def load_key() -> tuple[bytes | None, str]:
    """``(key, "ok")``, or ``(None, "missing")``, or ``(None, "unreadable")`` where the
    file exists but cannot be read as a key (a sandbox that denies reading it shows an
    empty file or refuses the open)."""
    try:
        text = _read_head_of(key_path(), 2 * _KEY_BYTES + 2)
    except FileNotFoundError:
        return None, "missing"
    except OSError:
        return None, "unreadable"
    try:
        key = bytes.fromhex(text.decode("ascii").strip())
    except (UnicodeDecodeError, ValueError):
        return None, "unreadable"
    return (key, "ok") if len(key) == _KEY_BYTES else (None, "unreadable")


def make_key() -> bytes | None:
    """A new key, written once (never over an existing one); None where the home cannot
    take it. Another process that made one first wins, and its key is returned."""
    path = key_path()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return load_key()[0]
    except OSError:
        return None
    key = os.urandom(_KEY_BYTES)
    try:
        os.write(handle, key.hex().encode("ascii") + b"\n")
        os.fsync(handle)
    finally:
        os.close(handle)
    return key


def seal(key: bytes, message: bytes) -> str:
    """``keyid:mac``: the MAC of ``message`` under ``key``, and which key made it (each
    home has its own; a seal another home made is not this home's to judge)."""
    return f"{key_id(key)}:{mac(key, message)}"


def sealed_by(key: bytes, sealed: str, message: bytes) -> bool | None:
    """True when ``sealed`` is ``key``'s seal of ``message``, False when it claims to be
    and is not (or is no seal), None when another key made it."""
    made_by, _, made = sealed.partition(":")
    if made_by and made and made_by != key_id(key):
        return None
    return made == mac(key, message) and made_by == key_id(key)


def key_id(key: bytes) -> str:
    return sha256(b"ithaca seal key\n" + key).hexdigest()[:16]


def mac(key: bytes, message: bytes) -> str:
    """HMAC-SHA256 of ``message`` under ``key`` (RFC 2104), without the ``hmac`` module,
    which would load OpenSSL into every hook."""
    block = int.from_bytes(key.ljust(_BLOCK, b"\0"), "big")
    inner = sha256((block ^ _IPAD).to_bytes(_BLOCK, "big") + message).digest()
    return sha256((block ^ _OPAD).to_bytes(_BLOCK, "big") + inner).hexdigest()


# --- the records -----------------------------------------------------------------------------


def head_path(folder: str) -> str:
    """Where the user's home keeps the head of the project whose database is in
    ``folder``: named after that folder's real path, so a copy elsewhere is another."""
    from ithaca.kernel import config

    return os.path.join(config.home(), HEADS, f"{_project_id(folder)}.head")


def write(folder: str, name: str, head: tuple[int, str], key: bytes) -> None:
    """The anchor record of ``head`` in ``folder/name``, written over the last one; a
    folder that cannot take it (a read-only mount) leaves it as it was, which the doctor
    will see."""
    _put(os.path.join(folder, name), head, seal(key, _anchor_message((*head, ""))))


def write_head(folder: str, head: tuple[int, str], key: bytes) -> None:
    path = head_path(folder)
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    except OSError:
        return
    _put(path, head, seal(key, _head_message(folder, (*head, ""))))


def read_record(path: str) -> tuple[int, str, str] | None:
    """``(seq, hash, seal)`` recorded at ``path``, or None when there is none (or it is not
    one); an older release's record has the seal ""."""
    for _ in range(_READS):
        try:
            line = _read_head_of(path, 256).split(b"\n", 1)[0]
        except OSError:
            return None
        found = _parse(line)
        if found is not None:
            return found
    return None


def _read_head_of(path: str, size: int) -> bytes:
    """The first ``size`` bytes of the regular file ``path`` (a plain descriptor: no
    buffered file object); a link, a FIFO or a device there is an ``OSError``, never a
    wait."""
    handle = os.open(path, _OPEN_FLAGS | os.O_RDONLY)
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            raise OSError(f"{path} is not a regular file")
        return os.read(handle, size)
    finally:
        os.close(handle)


def _put(path: str, head: tuple[int, str], sealed: str) -> None:
    try:
        handle = os.open(path, _OPEN_FLAGS | os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            if stat.S_ISREG(os.fstat(handle).st_mode):
                os.pwrite(handle, _record(head, sealed), 0)
        finally:
            os.close(handle)
    except OSError:
        return


def _record(head: tuple[int, str], sealed: str) -> bytes:
    """``seq hash keyid:mac check``: seq right-aligned in 20 places, so every record has
    one length; the check (of the rest) tells a whole record from a torn one."""
    body = f"{head[0]:>20} {head[1]} {sealed}"
    return f"{body} {_check(body)}\n".encode()


def _check(body: str) -> str:
    return sha256(body.encode()).hexdigest()[:16]


def _parse(line: bytes) -> tuple[int, str, str] | None:
    try:
        fields = line.decode("ascii").split()
        if len(fields) == 4:  # seq hash keyid:mac check
            seq, event_hash, sealed, check = fields
            if check == _check(f"{int(seq):>20} {event_hash} {sealed}"):
                return int(seq), event_hash, sealed
        elif len(fields) == 3:  # an older release's record: seq hash check, no mac
            seq, event_hash, check = fields
            if check == _check(f"{int(seq):>20} {event_hash}"):
                return int(seq), event_hash, ""
    except ValueError:  # also UnicodeDecodeError
        return None
    return None


def _anchor_message(found: tuple[int, str, str]) -> bytes:
    return f"journal anchor\n{found[0]} {found[1]}".encode()


def _head_message(folder: str, found: tuple[int, str, str]) -> bytes:
    return f"journal head\n{_project_id(folder)}\n{found[0]} {found[1]}".encode()


def _project_id(folder: str) -> str:
    """The name of the project's head record: its database folder's real path, hashed
    (kept per process: a hook asks for it on every check and every commit)."""
    found = _PROJECT_IDS.get(folder)
    if found is None:
        found = _PROJECT_IDS[folder] = sha256(os.path.realpath(folder).encode()).hexdigest()[:32]
    return found


_PROJECT_IDS: dict[str, str] = {}


def _hash_at(conn: sqlite3.Connection, seq: int) -> str | None:
    from ithaca.kernel.connection import sqlite  # loaded already: it imports this module

    try:
        row = conn.execute("SELECT hash FROM journal WHERE seq = ?", (seq,)).fetchone()
    except sqlite.Error:  # an emptied or unreadable database holds no event
        return None
    return str(row[0]) if row else None
