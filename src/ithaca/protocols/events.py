"""Trusted event admission: turning a user's prompt into an immutable event.

Every value of an event comes from the host payload, the hook entry point or
configuration, never from the model: the model later names the event by id and
``load_protocols`` derives selectors from this record. Events are insert-only (SQL
triggers refuse UPDATE and DELETE), and only a digest and length of the prompt are kept.
"""

from __future__ import annotations

import os

from ithaca.kernel import canon, clock, ids, journal, lightjson
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, NotFound
from ithaca.protocols.seeds import known_workflows

TYPE_CHECKING = False
if TYPE_CHECKING:
    import sqlite3
    from collections import namedtuple
    from typing import Any

    from ithaca.kernel.markers import Prompt
else:
    from ithaca.kernel.tuples import namedtuple

HOST_CONNECTORS = {"claude": "claude-code", "codex": "codex", "opencode": "opencode"}
COLUMNS = (
    "id, received_at, connector, kind, actor_id, actor_kind, host_session_id, host_turn_id,"
    " client_id, project_id, workflow, task, context_sources, prompt_sha256, prompt_length,"
    " admitted_by, record_hash"
)


class Admission(namedtuple("Admission", "event sources admitted_by sticky")):
    """An event ready to insert, with where each context value came from and the sticky
    marker values it sets (``None`` clears one; a key that is absent stays as it was)."""

    __slots__ = ()
    if TYPE_CHECKING:  # the fields' types, which ``namedtuple`` cannot carry
        event: dict[str, Any]
        sources: dict[str, str]
        admitted_by: str
        sticky: dict[str, str | None]


def actor_id(config: dict[str, Any]) -> str:
    configured = config.get("user_id")
    if configured:
        return str(configured)
    return login_name()


def login_name() -> str:
    """``getpass.getuser()``'s answer without ``getpass``, which loads ``contextlib``,
    ``warnings`` and ``termios`` into a hook: the login variables, else the password
    entry of the real user id, else ``unknown``."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        value = os.environ.get(name)
        if value:
            return value
    try:
        import pwd

        return pwd.getpwuid(os.getuid())[0]
    except (ImportError, KeyError, OSError):
        return "unknown"


def session_overrides(conn: sqlite3.Connection, session_id: str | None) -> dict[str, str | None]:
    if session_id is None:
        return {"workflow": None, "task": None}
    row = conn.execute(
        "SELECT workflow_override, task_override FROM protocol_sessions WHERE host_session_id = ?",
        (session_id,),
    ).fetchone()
    return {"workflow": row[0], "task": row[1]} if row else {"workflow": None, "task": None}


def prepare(
    *,
    conn: sqlite3.Connection,
    config: dict[str, Any],
    connector: str,
    session_id: str | None,
    turn_id: str | None,
    prompt_text: str | None,
    prompt: Prompt,
    kind: str | None = None,
    admitted_by: str = "hook",
    actor_kind: str = "user",
    event_id: str | None = None,
    explicit: dict[str, str | None] | None = None,
) -> Admission:
    """Resolve an event's fields (docs/protocols.md, "How a turn works"); writes nothing.

    ``explicit`` holds context values a trusted caller (the CLI's ``admit``) supplies.
    """
    if session_id is not None and not ids.is_session_id(session_id):
        raise InvalidInput(
            "INVALID_EVENT", "the host session id is malformed", {"field": "session_id"}
        )
    if event_id is not None and not ids.matches("evt", event_id):
        raise InvalidInput("INVALID_EVENT", "event ids look like evt_<26 base32>", {})
    workflows = known_workflows(config)
    settings = config["protocols"]
    explicit = explicit or {}
    sticky_now = session_overrides(conn, session_id)
    context: dict[str, Any] = {}
    sources: dict[str, str] = {}
    sticky: dict[str, str | None] = {}
    for key, default_key in (("workflow", "default_workflow"), ("task", "default_task")):
        marker = prompt.markers.get(key)
        if marker is not None and marker != "default":
            if key == "workflow" and marker not in workflows:
                raise InvalidInput(
                    "UNKNOWN_WORKFLOW",
                    f"unknown workflow {marker!r}; known: {', '.join(sorted(workflows))}",
                    {"workflow": marker, "known": sorted(workflows)},
                )
            sticky[key] = marker
        elif marker == "default":
            sticky[key] = None
        if explicit.get(key):
            context[key], sources[key] = explicit[key], "caller"
        elif marker is not None and marker != "default":
            context[key], sources[key] = marker, "marker"
        elif marker != "default" and sticky_now[key]:
            context[key], sources[key] = sticky_now[key], "session"
        elif settings[default_key]:
            context[key], sources[key] = settings[default_key], "config"
        else:
            context[key], sources[key] = ("coding" if key == "workflow" else None), "default"
    if context["workflow"] not in workflows:
        raise InvalidInput("UNKNOWN_WORKFLOW", f"unknown workflow {context['workflow']!r}", {})
    for key, setting in (("projectId", "project_id"), ("clientId", "client_id")):
        if explicit.get(key):
            context[key], sources[key] = explicit[key], "caller"
        elif settings[setting]:
            context[key], sources[key] = settings[setting], "config"
        else:
            context[key], sources[key] = None, "default"
    if kind is None:
        kind = "command" if prompt.first_line.startswith("/") else "chat.message"
    encoded = prompt_text.encode("utf-8") if prompt_text is not None else None
    event = {
        "id": event_id or ids.new("evt"),
        "receivedAt": clock.now(),
        "connector": connector,
        "kind": kind,
        "actor": {"id": actor_id(config), "kind": actor_kind},
        "hostSessionId": session_id,
        "hostTurnId": turn_id,
        "context": {
            "clientId": context["clientId"],
            "projectId": context["projectId"],
            "workflow": context["workflow"],
            "task": context["task"],
        },
        "promptSha256": canon.digest_bytes(encoded) if encoded is not None else None,
        "promptLength": len(encoded) if encoded is not None else None,
    }
    check_event_domains(event)
    return Admission(event=event, sources=sources, admitted_by=admitted_by, sticky=sticky)


def admit(conn: sqlite3.Connection, admission: Admission, *, actor: str) -> dict[str, Any]:
    """Insert the event, make it its session's current one, journal it; caller holds the tx."""
    event = admission.event
    if conn.execute("SELECT 1 FROM protocol_events WHERE id = ?", (event["id"],)).fetchone():
        raise Conflict("EVENT_EXISTS", f"event {event['id']} already exists", {"id": event["id"]})
    context = event["context"]
    conn.execute(
        f"INSERT INTO protocol_events ({COLUMNS}) VALUES"
        " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            event["id"],
            event["receivedAt"],
            event["connector"],
            event["kind"],
            event["actor"]["id"],
            event["actor"]["kind"],
            event["hostSessionId"],
            event["hostTurnId"],
            context["clientId"],
            context["projectId"],
            context["workflow"],
            context["task"],
            canon.canonical_text(admission.sources),
            event["promptSha256"],
            event["promptLength"],
            admission.admitted_by,
            canon.digest(event),
        ),
    )
    session_id = event["hostSessionId"]
    if session_id is not None:
        _make_current(conn, event, admission.sticky)
    journal.append(
        conn, actor=actor, kind="protocols.event_admitted", subject=event["id"], payload=event
    )
    return event


def store_prompt(blobs_dir: str, prompt_text: str) -> str:
    """Keep a prompt's text as a blob named by its digest (``store_prompts = true``)."""
    from ithaca.kernel.blobs import BlobStore

    return BlobStore(blobs_dir).put(prompt_text.encode("utf-8"))


def _make_current(
    conn: sqlite3.Connection, event: dict[str, Any], sticky: dict[str, str | None]
) -> None:
    now = event["receivedAt"]
    conn.execute(
        "INSERT INTO protocol_sessions (host_session_id, connector, current_event_id, updated_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT(host_session_id) DO UPDATE SET"
        " current_event_id = excluded.current_event_id, connector = excluded.connector,"
        " bundle_revision = NULL, bundle_digest = NULL, bundle_ids_json = NULL,"
        " loaded_digest = NULL, loaded_at = NULL, updated_at = excluded.updated_at",
        (event["hostSessionId"], event["connector"], event["id"], now),
    )
    for key, value in sticky.items():
        column = "workflow_override" if key == "workflow" else "task_override"
        conn.execute(
            f"UPDATE protocol_sessions SET {column} = ? WHERE host_session_id = ?",
            (value, event["hostSessionId"]),
        )


def fetch(conn: sqlite3.Connection, event_id: str) -> dict[str, Any]:
    """An admitted event, re-verified against its record hash (``EVENT_CONTEXT_INVALID``)."""
    if not ids.matches("evt", event_id):
        raise NotFound("EVENT_NOT_FOUND", f"no admitted event {event_id!r}", {"eventId": event_id})
    row = conn.execute(
        f"SELECT {COLUMNS} FROM protocol_events WHERE id = ?", (event_id,)
    ).fetchone()
    if row is None:
        raise NotFound("EVENT_NOT_FOUND", f"no admitted event {event_id}", {"eventId": event_id})
    event = row_to_event(row)
    if canon.digest(event) != row[-1]:
        raise Corrupt(
            "EVENT_CONTEXT_INVALID",
            f"event {event_id} does not match its record hash",
            {"eventId": event_id, "problem": "HASH_MISMATCH"},
        )
    check_event_domains(event, corrupt=True)
    return event


def row_to_event(row: tuple[Any, ...]) -> dict[str, Any]:
    (
        event_id,
        received_at,
        connector,
        kind,
        actor_id_,
        actor_kind,
        session_id,
        turn_id,
        client_id,
        project_id,
        workflow,
        task,
        _sources,
        prompt_sha256,
        prompt_length,
        _admitted_by,
        _record_hash,
    ) = row
    return {
        "id": event_id,
        "receivedAt": received_at,
        "connector": connector,
        "kind": kind,
        "actor": {"id": actor_id_, "kind": actor_kind},
        "hostSessionId": session_id,
        "hostTurnId": turn_id,
        "context": {
            "clientId": client_id,
            "projectId": project_id,
            "workflow": workflow,
            "task": task,
        },
        "promptSha256": prompt_sha256,
        "promptLength": prompt_length,
    }


def context_sources(conn: sqlite3.Connection, event_id: str) -> dict[str, str]:
    row = conn.execute(
        "SELECT context_sources FROM protocol_events WHERE id = ?", (event_id,)
    ).fetchone()
    return lightjson.loads(row[0]) if row else {}


def check_event_domains(event: dict[str, Any], *, corrupt: bool = False) -> None:
    """Selector-relevant values must be in their domains, else the event is unusable."""
    from ithaca.protocols import validate

    problems = []
    if event["connector"] not in validate.CONNECTORS:
        problems.append("connector")
    if event["kind"] not in validate.MESSAGE_KINDS:
        problems.append("kind")
    for key, value in [("actor.id", event["actor"]["id"]), *event["context"].items()]:
        if value is not None and (
            not isinstance(value, str) or not value or len(value) > 128 or not value.isprintable()
        ):
            problems.append(key)
    if problems:
        cls = Corrupt if corrupt else InvalidInput
        code = "EVENT_CONTEXT_INVALID" if corrupt else "INVALID_EVENT"
        raise cls(code, f"event fields out of domain: {', '.join(problems)}", {"fields": problems})
