"""The protocols service: the one path the CLI, the MCP server and the Python API take.

Every write runs in one ``BEGIN IMMEDIATE`` transaction with its journal event. User
operations take an ``actor``; the interfaces decide who is asking (the CLI checks the
terminal before it calls a user-only operation, the MCP server exposes none of them).
"""

from __future__ import annotations

from typing import Any

from ithaca.kernel import clock, journal, states
from ithaca.kernel.errors import Conflict, InvalidInput, NotFound, Refused
from ithaca.kernel.markers import Prompt, is_name
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.protocols import approvals, bundle, events, reconcile, records, seeds, validate
from ithaca.protocols.loading import load, require_event_id, with_loaded_at
from ithaca.protocols.overrides import check_override

ADMIT_CONNECTORS = ("cli", "test", "web-api", "scheduled-job")


class ProtocolsService:
    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config
        self.workflows = seeds.known_workflows(config)
        self.bundles = bundle.BundleCache()

    def summary(self) -> dict[str, Any]:
        """``{counts, recentSessions}``: what ``ithaca status`` shows of protocols."""
        conn = self.store.connection()
        return {"counts": records.counts(conn), "recentSessions": records.recent_sessions(conn)}

    # --- reconciliation -------------------------------------------------------

    def reconcile(self) -> dict[str, Any]:
        """Bring seeds and protocol files into the store; cheap when nothing changed."""
        conn = self.store.connection()
        report: dict[str, Any] = {"seeds": None, "files": None}
        if not reconcile.seeds_in_sync(conn):
            with self.store.write() as tx:
                report["seeds"] = reconcile.reconcile_seeds(tx)
        if reconcile.files_changed(conn, self.project.protocols_dir):
            with self.store.write() as tx:
                report["files"] = reconcile.reconcile_files(
                    tx, self.project.protocols_dir, self.project.root, self.workflows
                )
        return report

    # --- events and bundles ---------------------------------------------------

    def admit_event(
        self,
        *,
        connector: str = "test",
        kind: str = "chat.message",
        workflow: str | None = None,
        task: str | None = None,
        project_id: str | None = None,
        client_id: str | None = None,
        host_session_id: str | None = None,
        prompt_text: str | None = None,
        event_id: str | None = None,
        actor: str = "system",
        check_only: bool = False,
    ) -> dict[str, Any]:
        """Admit an event outside a host hook (scheduled jobs, bridges, the CLI)."""
        if connector not in ADMIT_CONNECTORS:
            raise InvalidInput(
                "INVALID_EVENT",
                f"connector must be one of {', '.join(ADMIT_CONNECTORS)}; host connectors are"
                " admitted only by hooks",
                {"connector": connector},
            )
        if kind not in validate.MESSAGE_KINDS:
            raise InvalidInput("INVALID_EVENT", f"unknown kind {kind!r}", {"kind": kind})
        if workflow is not None and workflow not in self.workflows:
            raise InvalidInput(
                "UNKNOWN_WORKFLOW", f"unknown workflow {workflow!r}", {"workflow": workflow}
            )
        if task is not None and not is_name(task):
            raise InvalidInput(
                "INVALID_EVENT", f"task {task!r} is not a name like 'release-2'", {"task": task}
            )
        admitted_by = "user" if actor == "user" else "system"
        with self.store.write() as conn:
            admission = events.prepare(
                conn=conn,
                config=self.config,
                connector=connector,
                session_id=host_session_id,
                turn_id=None,
                prompt_text=prompt_text,
                prompt=Prompt(),
                kind=kind,
                admitted_by=admitted_by,
                actor_kind="test" if connector == "test" else "user",
                event_id=event_id,
                explicit={
                    "workflow": workflow,
                    "task": task,
                    "projectId": project_id,
                    "clientId": client_id,
                },
            )
            if check_only:
                return dict(admission.event)
            event = events.admit(conn, admission, actor=admitted_by)
        if prompt_text is not None and self.config["protocols"]["store_prompts"]:
            events.store_prompt(self.project.blobs_dir, prompt_text)
        return event

    def compute_bundle(self, event_id: str) -> dict[str, Any]:
        """The bundle an event would get, without recording a load."""
        conn = self.store.connection()
        event = events.fetch(conn, require_event_id(event_id))
        computed = bundle.compute(conn, event, self.workflows, self.bundles)
        return with_loaded_at(computed, clock.now())

    def read(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``protocols {operation, ...}``: list, get or explain, nothing changed."""
        from ithaca.protocols.reading import read

        return read(self, arguments)

    def load_protocols(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``load_protocols {eventId}``: fail closed, never partial."""
        return load(self, arguments)

    def get_event(self, event_id: str) -> dict[str, Any]:
        return events.fetch(self.store.connection(), require_event_id(event_id))

    # --- records --------------------------------------------------------------

    def list_protocols(
        self,
        *,
        scope: str | None = None,
        source: str | None = None,
        enabled: bool | None = None,
        tag: str | None = None,
    ) -> list[dict[str, Any]]:
        conn = self.store.connection()
        seed_rows = records.seed_records(conn)
        found = []
        for record in records.read_all(conn):
            if scope is not None and record["scope"] != scope:
                continue
            if source is not None and record["source"] != source:
                continue
            if enabled is not None and record["enabled"] != enabled:
                continue
            if tag is not None and tag not in record["tags"]:
                continue
            found.append(records.public_shape(record, seed_rows))
        return found

    def get_protocol(self, protocol_id: str) -> dict[str, Any]:
        conn = self.store.connection()
        record = records.read_one(conn, protocol_id)
        if record is None:
            raise NotFound("PROTOCOL_NOT_FOUND", f"no protocol {protocol_id}", {"id": protocol_id})
        return records.public_shape(record, records.seed_records(conn))

    def create_protocol(
        self, raw: dict[str, Any], *, actor: str = "user", override: bool = False
    ) -> dict[str, Any]:
        _require_user(actor, "create a protocol")
        with self.store.write() as conn:
            seed_rows = records.seed_records(conn)
            raw_id = raw.get("id") if isinstance(raw, dict) else None
            is_base_id = raw_id in seed_rows
            existing = records.read_one(conn, raw_id) if isinstance(raw_id, str) else None
            if existing is not None and not (override and existing["scope"] == "base"):
                raise Conflict(
                    "PROTOCOL_EXISTS",
                    f"protocol {raw_id} already exists"
                    + ("; use --override to override a base protocol" if is_base_id else ""),
                    {"id": raw_id},
                )
            record = self._validate(raw, allow_reserved=is_base_id and override)
            if override and not is_base_id:
                raise Refused(
                    "NOT_A_BASE_PROTOCOL",
                    f"{raw_id!r} is not a base protocol, so there is nothing to override",
                    {"id": raw_id},
                )
            if is_base_id:
                check_override(seed_rows[record["id"]], record)
                stored = records.write_row(
                    conn,
                    record,
                    scope="user",
                    source="sqlite",
                    overrides_base=True,
                    base_hash=seeds.seed_hash(seed_rows[record["id"]]),
                )
                kind = "protocols.override_created"
                before = existing["contentHash"] if existing else None
            else:
                stored = records.write_row(conn, record, scope="user", source="sqlite")
                kind, before = "protocols.created", None
            self._journal(conn, actor, kind, stored, before)
            return records.public_shape(stored, seed_rows)

    def update_protocol(
        self,
        protocol_id: str,
        changes: dict[str, Any],
        *,
        actor: str = "user",
        check_only: bool = False,
    ) -> dict[str, Any]:
        _require_user(actor, "update a protocol")
        with self.store.write() as conn:
            existing = self._mutable(conn, protocol_id)
            seed_rows = records.seed_records(conn)
            merged = {key: existing[key] for key in validate.INPUT_FIELDS}
            for key in changes:
                if key == "id":
                    if changes[key] != protocol_id:
                        raise InvalidInput(
                            "INVALID_FIELD",
                            "the id of a protocol cannot change",
                            {"pointer": "/id", "problem": "IMMUTABLE"},
                        )
                    continue
                merged[key] = changes[key]
            record = self._validate(merged, allow_reserved=existing["overridesBase"])
            if existing["overridesBase"]:
                check_override(seed_rows[protocol_id], record)
            if check_only or (
                validate.record_hash(dict(record, scope="user")) == existing["contentHash"]
            ):
                return records.public_shape(existing, seed_rows)
            stored = records.write_row(
                conn,
                record,
                scope="user",
                source="sqlite",
                overrides_base=existing["overridesBase"],
                base_hash=existing["baseHash"],
            )
            self._journal(conn, actor, "protocols.updated", stored, existing["contentHash"])
            return records.public_shape(stored, seed_rows)

    def set_enabled(
        self, protocol_id: str, enabled: bool, *, actor: str = "user", check_only: bool = False
    ) -> dict[str, Any]:
        _require_user(actor, "enable or disable a protocol")
        with self.store.write() as conn:
            existing = self._require(conn, protocol_id)
            seed_rows = records.seed_records(conn)
            if existing["scope"] == "base" or (existing["overridesBase"] and not enabled):
                if enabled:
                    return records.public_shape(existing, seed_rows)
                raise _base_locked(protocol_id, "base protocols and their overrides stay enabled")
            self._not_file(existing)
            if check_only or existing["enabled"] == enabled:
                return records.public_shape(existing, seed_rows)
            record = {key: existing[key] for key in validate.INPUT_FIELDS}
            record["enabled"] = enabled
            stored = records.write_row(
                conn,
                record,
                scope="user",
                source="sqlite",
                overrides_base=existing["overridesBase"],
                base_hash=existing["baseHash"],
            )
            kind = "protocols.enabled" if enabled else "protocols.disabled"
            self._journal(conn, actor, kind, stored, existing["contentHash"])
            return records.public_shape(stored, seed_rows)

    def remove_protocol(
        self, protocol_id: str, *, actor: str = "user", check_only: bool = False
    ) -> dict[str, Any]:
        _require_user(actor, "remove a protocol")
        with self.store.write() as conn:
            existing = self._mutable(conn, protocol_id)
            seed_rows = records.seed_records(conn)
            if check_only:
                return {"id": protocol_id, "removed": False, "restoredBase": False}
            conn.execute("DELETE FROM protocols WHERE id = ?", (protocol_id,))
            if existing["overridesBase"] and protocol_id in seed_rows:
                restored = records.write_row(
                    conn, seed_rows[protocol_id], scope="base", source="seed"
                )
                payload = {
                    "id": protocol_id,
                    "beforeHash": existing["contentHash"],
                    "afterHash": restored["contentHash"],
                    "record": records.hashed_view(restored),
                }
                journal.append(
                    conn,
                    actor=actor,
                    kind="protocols.override_removed",
                    subject=protocol_id,
                    payload=payload,
                )
                return {"id": protocol_id, "removed": True, "restoredBase": True}
            journal.append(
                conn,
                actor=actor,
                kind="protocols.removed",
                subject=protocol_id,
                payload={
                    "id": protocol_id,
                    "beforeHash": existing["contentHash"],
                    "afterHash": None,
                    "record": records.hashed_view(existing),
                },
            )
            return {"id": protocol_id, "removed": True, "restoredBase": False}

    # --- decisions and approvals ----------------------------------------------

    def list_decisions(
        self,
        *,
        event_id: str | None = None,
        session: str | None = None,
        effect: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        found = []
        for entry in reversed(journal.query(self.store.connection(), kind="protocols.decision")):
            payload = entry["payload"]
            if event_id and payload.get("eventId") != event_id:
                continue
            if session and payload.get("hostSessionId") != session:
                continue
            if effect and payload.get("effect") != effect:
                continue
            found.append({"seq": entry["seq"], "at": entry["at"], **payload})
            if len(found) >= limit:
                break
        return found

    def list_approvals(self, *, include_all: bool = False) -> list[dict[str, Any]]:
        return approvals.listing(self.store.connection(), include_all=include_all, now=clock.now())

    def get_approval(self, approval_id: str) -> dict[str, Any]:
        return approvals.get(self.store.connection(), approval_id)

    def check_grantable(self, approval_id: str) -> dict[str, Any]:
        """The pending request, or ``APPROVAL_USED``/``APPROVAL_EXPIRED`` before anyone types."""
        return approvals.check_grantable(self.store.connection(), approval_id, clock.now())

    def grant_approval(self, approval_id: str, *, actor: str = "user") -> dict[str, Any]:
        _require_user(actor, "grant an approval")
        ttl = self.config["protocols"]["approval_ttl_seconds"]
        with self.store.write() as conn:
            return approvals.grant(conn, approval_id, ttl_seconds=ttl, now=clock.now())

    # --- the user's tooling ---------------------------------------------------

    def explain(self, event_id: str) -> dict[str, Any]:
        """Why an event gets the bundle it gets, record by record."""
        from ithaca.protocols.explanation import explain

        return explain(self, event_id)

    def run_fixtures(self, text: str) -> dict[str, Any]:
        """Run the cases of a fixtures file in memory against the current store."""
        from ithaca.protocols.fixtures import parse_fixtures, run_fixtures

        return run_fixtures(self, parse_fixtures(text))

    def lint(self, since_days: int = 30) -> list[dict[str, Any]]:
        """Findings about the user's records, most severe kinds first."""
        from ithaca.protocols.lint import lint_protocols

        return lint_protocols(self, since_days)

    def seed_status(self) -> dict[str, Any]:
        """Each shipped base record and what the store holds for it."""
        from ithaca.protocols.seed_report import seed_status

        return seed_status(self)

    def check_shape(self, raw: Any) -> dict[str, Any]:
        """The record checked for shape only (a typo is refused before anyone confirms);
        whether its id may be used is for the operation that writes it."""
        return self._validate(raw, allow_reserved=True)

    # --- helpers --------------------------------------------------------------

    def _validate(self, raw: Any, *, allow_reserved: bool) -> dict[str, Any]:
        return validate.validate_record(
            raw,
            workflows=self.workflows,
            known_states=states.KNOWN_STATES,
            allow_reserved=allow_reserved,
        )

    def _require(self, conn: Any, protocol_id: str) -> dict[str, Any]:
        record = records.read_one(conn, protocol_id)
        if record is None:
            raise NotFound("PROTOCOL_NOT_FOUND", f"no protocol {protocol_id}", {"id": protocol_id})
        return record

    def _mutable(self, conn: Any, protocol_id: str) -> dict[str, Any]:
        record = self._require(conn, protocol_id)
        if record["scope"] == "base":
            raise _base_locked(
                protocol_id, "base protocols cannot change; create an override with --override"
            )
        self._not_file(record)
        return record

    @staticmethod
    def _not_file(record: dict[str, Any]) -> None:
        if record["source"] == "file":
            raise Refused(
                "FILE_MANAGED",
                f"protocol {record['id']} comes from {record['filePath']}; edit the file instead",
                {"id": record["id"], "path": record["filePath"]},
            )

    @staticmethod
    def _journal(
        conn: Any, actor: str, kind: str, stored: dict[str, Any], before: str | None
    ) -> None:
        journal.append(
            conn,
            actor=actor,
            kind=kind,
            subject=stored["id"],
            payload={
                "id": stored["id"],
                "beforeHash": before,
                "afterHash": stored["contentHash"],
                "record": records.hashed_view(stored),
            },
        )


def _require_user(actor: str, action: str) -> None:
    """User operations are the user's: the interfaces check who is asking, and any other
    actor named here is refused."""
    if actor != "user":
        raise Refused(
            "USER_ONLY",
            f"only the user may {action}",
            {"reason": "not_user", "actor": actor, "action": action},
        )


def _base_locked(protocol_id: str, why: str) -> Refused:
    return Refused("BASE_LOCKED", f"{protocol_id}: {why}", {"id": protocol_id})
