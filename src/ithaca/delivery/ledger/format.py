"""The team ledger file, ``.ithaca/tasks/tasks.json``: its records, bytes and checks
(docs/delivery.md, "The team ledger: sync").

The ledger is how a team shares delivery state through Git, so the same state must give
the same bytes in every checkout: records are sorted by type then id, objects are in RFC
8785 key order, and nothing in it holds a time. Each record carries the digest of its
``body`` and a revision counted from the record it replaced, so two branches that touch
different records can be merged record by record; the document carries a state digest
over all records, a generation and up to 64 ancestor state digests, so a stale or
unrelated history is recognised instead of silently accepted.

The document is indented two spaces down to each record's fields, and a record's
``body`` is written as its canonical JSON on one line: those are exactly the bytes its
digest covers, a changed record is one changed line in a diff, and writing or checking
10,000 records needs one canonical encoding per record. A reader accepts any JSON
layout and any key order; only values are verified.

The merge driver runs from Git without a database, so this module needs only the
standard library and ``ithaca.kernel``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from ithaca.delivery.ledger import canonical as ledger_json
from ithaca.kernel.errors import Corrupt, InvalidInput
from ithaca.kernel.lightjson import encode_basestring

LEDGER_PATH = "tasks/tasks.json"
KIND = "ithaca-team-ledger"
SCHEMA_VERSION = 1
MAX_ANCESTORS = 64
TYPES = ("baseline", "change", "checkpoint", "decision", "task")
_HEX = frozenset("0123456789abcdef")
_RECORD_FIELDS = frozenset(("type", "id", "revision", "parent_digest", "digest", "body"))
_TYPE_AND_ID = itemgetter(0, 1)  # a record's ``key`` at C speed, to sort and index 10,000

Key = tuple[str, str]


class Stamp(NamedTuple):
    """What numbering a record's successor needs of it: its digest, revision and parent."""

    digest: str
    revision: int
    parent_digest: str | None


class Record(NamedTuple):
    """One ledger record; ``text`` is the canonical JSON of ``body``. (A named tuple:
    10,000 of them are made per sync, and a frozen dataclass is several times slower to
    build.)"""

    type: str
    id: str
    body: dict[str, Any]
    text: str
    digest: str
    revision: int = 1
    parent_digest: str | None = None
    # Whether the C encoder writes canonical JSON for this body (``ledger_json``).
    exact: bool = False

    @property
    def key(self) -> Key:
        return (self.type, self.id)

    @property
    def label(self) -> str:
        """``type:id``, the name ``resolve`` uses."""
        return f"{self.type}:{self.id}"

    @property
    def stamp(self) -> Stamp:
        return Stamp(self.digest, self.revision, self.parent_digest)

    def as_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "id": self.id,
            "revision": self.revision,
            "parent_digest": self.parent_digest,
            "digest": self.digest,
            "body": self.body,
        }


def record(type_: str, id_: str, body: dict[str, Any], *, exact: bool = False) -> Record:
    """A record at revision 1; ``exact`` when the body came from a ``ledger_json.Reader``
    that found it exact (or was built of such values and plain strings)."""
    text = ledger_json.canonical_text(body, exact)
    return Record(type_, id_, body, text, text_digest(text), exact=exact)


def canonical_part(found: Record, value: Any) -> str:
    """The canonical text of ``value``, a part of ``found``'s body."""
    return ledger_json.canonical_text(value, found.exact)


def document_digest(data: bytes) -> str:
    """The SHA-256 of megabytes: a ledger file, or the canonical text of all its records
    (OpenSSL's hash; ``canon`` keeps to CPython's own, which hooks load faster)."""
    return hashlib.sha256(data).hexdigest()


def text_digest(text: str) -> str:
    """``canon.digest_bytes`` of a canonical text, through OpenSSL's hash: half the time
    on the 10,000 small texts of a ledger."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def revised(current: Record, previous: Stamp | None) -> Record:
    """``current`` numbered against the record it replaces: the same body keeps
    the previous revision and parent, a changed one is the next revision of it, a new one
    is revision 1 with no parent."""
    if previous is None:
        revision, parent = 1, None
    elif previous.digest == current.digest:
        revision, parent = previous.revision, previous.parent_digest
    else:
        revision, parent = previous.revision + 1, previous.digest
    if (revision, parent) == (current.revision, current.parent_digest):
        return current
    return current._replace(revision=revision, parent_digest=parent)


@dataclass(frozen=True)
class Conflict:
    """A record two branches changed differently, as the merge driver leaves it."""

    type: str
    id: str
    base_digest: str | None
    ours: Record | None
    theirs: Record | None

    @property
    def label(self) -> str:
        return f"{self.type}:{self.id}"


@dataclass(frozen=True)
class Ledger:
    """A verified ledger document; ``records`` in file order (type, then id)."""

    project_id: str
    generation: int
    parent_digest: str | None
    ancestors: tuple[str, ...]
    state_digest: str
    records: tuple[Record, ...]
    conflicts: tuple[Conflict, ...] = ()
    schema_version: int = SCHEMA_VERSION
    index: dict[Key, Record] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = dict(zip(map(_TYPE_AND_ID, self.records), self.records, strict=True))
        object.__setattr__(self, "index", index)


# --- building ---------------------------------------------------------------------------------


def sorted_records(records: list[Record] | tuple[Record, ...]) -> tuple[Record, ...]:
    return tuple(sorted(records, key=_TYPE_AND_ID))


def state_digest(project_id: str, records: tuple[Record, ...]) -> str:
    """``digest({project_id, schema_version, records})``, built from each body's canonical
    text, so no record is encoded twice."""
    parts = [
        '{"project_id":',
        encode_basestring(project_id),
        ',"records":[',
        ",".join(_canonical_record(found) for found in records),
        '],"schema_version":',
        str(SCHEMA_VERSION),
        "}",
    ]
    return document_digest("".join(parts).encode("utf-8"))


def document(
    project_id: str,
    records: tuple[Record, ...],
    *,
    generation: int,
    parent_digest: str | None,
    ancestors: tuple[str, ...],
    conflicts: tuple[Conflict, ...] = (),
) -> Ledger:
    """A ledger over ``records`` (sorted here), its state digest computed."""
    ordered = sorted_records(records)
    return Ledger(
        project_id=project_id,
        generation=generation,
        parent_digest=parent_digest,
        ancestors=bounded(ancestors),
        state_digest=state_digest(project_id, ordered),
        records=ordered,
        conflicts=tuple(sorted(conflicts, key=lambda found: (found.type, found.id))),
    )


def bounded(ancestors: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Ancestor digests without repeats, newest first, at most ``MAX_ANCESTORS``."""
    return tuple(dict.fromkeys(ancestors))[:MAX_ANCESTORS]


def render(ledger: Ledger) -> bytes:
    """The file's bytes: keys in canonical order, two-space indent, final newline."""
    out = ["{\n", '  "ancestors": ', _string_list(ledger.ancestors, "  "), ",\n"]
    if ledger.conflicts:
        out.append('  "conflicts": [')
        out.append(",".join("\n    " + _conflict(found, "    ") for found in ledger.conflicts))
        out.append("\n  ],\n")
    out += [
        f'  "generation": {ledger.generation},\n',
        f'  "kind": "{KIND}",\n',
        f'  "parent_digest": {_optional(ledger.parent_digest)},\n',
        f'  "project_id": {encode_basestring(ledger.project_id)},\n',
        '  "records": [',
        ",".join("\n    " + _record(found, "    ") for found in ledger.records),
        "\n  ]" if ledger.records else "]",
        ",\n",
        f'  "schema_version": {ledger.schema_version},\n',
        f'  "state_digest": "{ledger.state_digest}"\n',
        "}\n",
    ]
    return "".join(out).encode("utf-8")


def _record(found: Record, pad: str) -> str:
    inner = pad + "  "
    return (
        "{\n"
        f'{inner}"body": {found.text},\n'
        f'{inner}"digest": "{found.digest}",\n'
        f'{inner}"id": {encode_basestring(found.id)},\n'
        f'{inner}"parent_digest": {_optional(found.parent_digest)},\n'
        f'{inner}"revision": {found.revision},\n'
        f'{inner}"type": "{found.type}"\n'
        f"{pad}}}"
    )


def _conflict(found: Conflict, pad: str) -> str:
    inner = pad + "  "

    def side(value: Record | None) -> str:
        return "null" if value is None else _record(value, inner)

    return (
        "{\n"
        f'{inner}"base_digest": {_optional(found.base_digest)},\n'
        f'{inner}"id": {encode_basestring(found.id)},\n'
        f'{inner}"ours": {side(found.ours)},\n'
        f'{inner}"theirs": {side(found.theirs)},\n'
        f'{inner}"type": "{found.type}"\n'
        f"{pad}}}"
    )


def _canonical_record(found: Record) -> str:
    return (
        f'{{"body":{found.text},"digest":"{found.digest}","id":{encode_basestring(found.id)},'
        f'"parent_digest":{_optional(found.parent_digest)},"revision":{found.revision},'
        f'"type":"{found.type}"}}'
    )


def _optional(digest: str | None) -> str:
    return "null" if digest is None else f'"{digest}"'


def _string_list(values: tuple[str, ...], pad: str) -> str:
    if not values:
        return "[]"
    inner = pad + "  "
    return "[" + ",".join(f"\n{inner}{encode_basestring(v)}" for v in values) + f"\n{pad}]"


# --- reading ----------------------------------------------------------------------------------


def schema_version_of(data: bytes) -> int | None:
    """The ``schema_version`` a ledger file states, None when it states none it can."""
    try:
        value = json.loads(data)
    except ValueError:
        return None
    version = value.get("schema_version") if isinstance(value, dict) else None
    return version if isinstance(version, int) and not isinstance(version, bool) else None


def parse(data: bytes, source: str = LEDGER_PATH) -> Ledger:
    """A ledger file, verified: every record digest and the state digest.

    ``LEDGER_UNPARSEABLE`` for anything that is not a ledger of this schema (Git conflict
    markers included: the merge driver is what prevents them), ``LEDGER_DIGEST_MISMATCH``
    for a record or document that no longer matches its digest."""
    return _read(data, source, None)


def rehash(data: bytes, source: str = LEDGER_PATH) -> tuple[Ledger, list[str]]:
    """A hand-edited ledger taken as it stands, and the records edited: each record whose
    body no longer matches its digest becomes the next revision of what it claimed to be,
    and the state digest is computed afresh. Anything else is checked as ``parse`` does."""
    edited: list[str] = []
    return _read(data, source, edited), edited


def _read(data: bytes, source: str, edited: list[str] | None) -> Ledger:
    reader = ledger_json.Reader()
    try:
        value = reader.load_bytes(data)
    except ValueError as exc:  # UnicodeDecodeError included
        hint = " (Git conflict markers: is the ledger merge driver registered?)"
        shown = hint if b"<<<<<<<" in data else ""
        raise _unparseable(source, f"is not JSON{shown}: {exc}") from exc
    if not isinstance(value, dict) or value.get("kind") != KIND:
        raise _unparseable(source, f"is not an {KIND} document")
    if value.get("schema_version") != SCHEMA_VERSION:
        raise _unparseable(
            source,
            f"has schema_version {value.get('schema_version')!r}; this Ithaca reads"
            f" {SCHEMA_VERSION}",
        )
    project_id = _field(value, "project_id", str, source)
    generation = _field(value, "generation", int, source)
    parent = value.get("parent_digest")
    if parent is not None and not is_digest(parent):
        raise _unparseable(source, "parent_digest is not a digest")
    ancestors = value.get("ancestors")
    if not isinstance(ancestors, list) or not all(is_digest(item) for item in ancestors):
        raise _unparseable(source, "ancestors is not a list of digests")
    raw_records = _field(value, "records", list, source)
    records = tuple(
        _read_record(item, ("records", n), source, reader.exact, edited)
        for n, item in enumerate(raw_records)
    )
    if len(set(map(_TYPE_AND_ID, records))) != len(records):
        raise _unparseable(source, "holds one type and id twice")
    ordered = sorted_records(records)
    conflicts = tuple(
        _read_conflict(item, ("conflicts", n), source, reader.exact)
        for n, item in enumerate(value.get("conflicts") or [])
    )
    stated = _field(value, "state_digest", str, source)
    actual = state_digest(project_id, ordered)
    if edited is not None:
        stated = actual
    if stated != actual:
        raise Corrupt(
            "LEDGER_DIGEST_MISMATCH",
            f"{source}: the state digest does not match its records; it was edited by hand"
            " (`ithaca sync import --rehash` accepts such an edit)",
            {"path": source, "expected": stated, "actual": actual},
        )
    return Ledger(
        project_id=project_id,
        generation=generation,
        parent_digest=parent,
        ancestors=tuple(ancestors),
        state_digest=stated,
        records=ordered,
        conflicts=conflicts,
    )


def is_digest(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and _HEX.issuperset(value)


def _read_record(
    item: Any, at: tuple[str | int, ...], source: str, exact: bool, edited: list[str] | None = None
) -> Record:
    """One record, its digest verified; with ``edited`` (rehashing), a record that does
    not match is stamped afresh and its label noted instead. ``at`` is where it lies,
    made a JSON pointer only for an error."""
    if not isinstance(item, dict) or item.keys() != _RECORD_FIELDS:
        raise _unparseable(source, f"{_where(at)} is not a ledger record")
    kind, name, body = item["type"], item["id"], item["body"]
    revision, parent = item["revision"], item["parent_digest"]
    if kind not in TYPES or not isinstance(name, str) or not name:
        raise _unparseable(source, f"{_where(at)} has an unknown type or an empty id")
    if not isinstance(body, dict):
        raise _unparseable(source, f"{_where(at)} needs an object body")
    if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
        raise _unparseable(source, f"{_where(at)}/revision must be a whole number from 1")
    if parent is not None and not is_digest(parent):
        raise _unparseable(source, f"{_where(at)}/parent_digest is not a digest")
    try:
        text = ledger_json.canonical_text(body, exact)
    except InvalidInput as exc:
        problem = f"{_where(at)}/body has no canonical JSON form ({exc.message})"
        raise _unparseable(source, problem) from exc
    digest = text_digest(text)
    stated = item["digest"]
    if digest != stated and edited is not None:
        edited.append(f"{kind}:{name}")
        revision, parent = revision + 1, stated if is_digest(stated) else None
    elif digest != stated:
        raise Corrupt(
            "LEDGER_DIGEST_MISMATCH",
            f"{source}: record {kind}:{name} does not match its digest; it was edited by hand",
            {"path": source, "record": f"{kind}:{name}", "expected": item["digest"]},
        )
    return Record(kind, name, body, text, digest, revision, parent, exact)


def _read_conflict(item: Any, at: tuple[str | int, ...], source: str, exact: bool) -> Conflict:
    pointer = _where(at)
    if not isinstance(item, dict) or set(item) != {"type", "id", "base_digest", "ours", "theirs"}:
        raise _unparseable(source, f"{pointer} is not a conflict entry")
    base = item["base_digest"]
    if base is not None and not is_digest(base):
        raise _unparseable(source, f"{pointer}/base_digest is not a digest")
    sides = [
        None if item[side] is None else _read_record(item[side], (*at, side), source, exact)
        for side in ("ours", "theirs")
    ]
    for found in sides:
        if found is not None and found.key != (item["type"], item["id"]):
            raise _unparseable(source, f"{pointer} mixes records of different ids")
    return Conflict(item["type"], item["id"], base, sides[0], sides[1])


def _where(at: tuple[str | int, ...]) -> str:
    return "".join(f"/{step}" for step in at)


def _field(value: dict[str, Any], name: str, kind: type, source: str) -> Any:
    found = value.get(name)
    if not isinstance(found, kind) or isinstance(found, bool):
        raise _unparseable(source, f"{name} is missing or not a {kind.__name__}")
    return found


def _unparseable(source: str, problem: str) -> Corrupt:
    return Corrupt("LEDGER_UNPARSEABLE", f"{source} {problem}", {"path": source})
