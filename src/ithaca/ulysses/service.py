"""The Ulysses service: the one path the MCP tool, the CLI and the Python API take.

The state machine decides; this module gathers what it needs from the world and stores
what it decides. Each operation follows the reference's check order: input
(``ulysses.inputs``), session and phase (``machine.check`` on a short read), the
operation's prerequisites (building validator snapshots, observing Git), then one
``BEGIN IMMEDIATE`` transaction that reads the session again, applies the transition,
saves the state, appends its events and updates the gate record the hook reads.

Validators never run inside a transaction (a run can take many seconds and would hold
every other writer back). ``outcome`` and ``complete(resolved)`` therefore note the
session's ``version`` before the run and refuse to commit (``STATE_CONFLICT``) if it moved
meanwhile: of two concurrent outcomes one wins, a rollback during a run voids the run,
and a crash between run and commit leaves the state as it was. Git observations are made
outside the transaction for the same reason; a refusal can at most leave an unused
checkpoint ref behind, never a changed session. A Git that cannot list the worktree
refuses the operation (``GIT_FAILED``) before anything is stored, except in ``reflect``,
whose digest only feeds a diagnostic: the gate blocks edits in REFLECT, so refusing there
would leave no way to repair Git.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Conflict, Corrupt, NotFound, Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.ulysses import checkpoints, inputs, knowledge, machine, views
from ithaca.validators import bindings, runner, snapshot

State = dict[str, Any]
Diagnostics = list[dict[str, Any]]

OWNER_KIND = "ulysses"
HISTORY_LIMIT = 20
THIN_SUMMARY_CHARS = 40


class UlyssesService:
    """Ulysses sessions of one project; every method takes the operation's raw arguments."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config
        self.blobs = BlobStore(project.blobs_dir)

    # --- entry points ---------------------------------------------------------------

    def dispatch(self, arguments: Any) -> dict[str, Any]:
        """``ulysses {operation, ...}`` as the MCP tool receives it."""
        operation = arguments.get("operation") if isinstance(arguments, dict) else None
        if operation == "rollback":
            raise Refused(
                "USER_ONLY",
                "only the user may roll back, with `ithaca ulysses rollback <label>` at a terminal",
                {"reason": "cli_only", "action": "roll back"},
            )
        if operation == "replace_final_validator":
            raise Refused(
                "USER_ONLY",
                f"only the user may replace the final validator, with {machine.USER_BINDS_FINAL}",
                {"reason": "cli_only", "action": "replace the final validator"},
            )
        return self._run(inputs.parse(arguments))

    def init(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("init", arguments)

    def plan(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("plan", arguments)

    def outcome(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("outcome", arguments)

    def bind_final_validator(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("bind_final_validator", arguments)

    def replace_final_validator(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The user's binding: after the first outcome, or over the bound validator (the CLI
        offers it only after its terminal check)."""
        return self._call("replace_final_validator", arguments)

    def reflect(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("reflect", arguments)

    def note(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("note", arguments)

    def status(self, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._call("status", arguments or {})

    def resume(self, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._call("resume", arguments or {})

    def complete(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._call("complete", arguments)

    def rollback(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Restore a checkpoint (the user's: the CLI checks for a person first)."""
        return self._call("rollback", arguments)

    def _call(self, operation: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if isinstance(arguments, dict):
            arguments = {**arguments, "operation": operation}
        return self._run(inputs.parse(arguments))

    def _run(self, command: dict[str, Any]) -> dict[str, Any]:
        handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "init": self._init,
            "plan": self._plan,
            "outcome": self._outcome,
            "bind_final_validator": self._bind_final_validator,
            "replace_final_validator": self._bind_final_validator,
            "reflect": self._reflect,
            "note": self._note,
            "status": self._status,
            "resume": self._resume,
            "complete": self._complete,
            "rollback": self._rollback,
        }
        return handlers[command["operation"]](command)

    # --- operations -----------------------------------------------------------------

    def _init(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        machine.check(_active(conn), command)
        session_id = ids.new("uly")
        checkpoint, diagnostics = self._observe(session_id, "initial")
        with self.store.write() as tx:
            old = _active(tx)
            now = clock.now()
            facts = {"now": now, "session_id": session_id, "checkpoint": checkpoint}
            state, events = machine.transition(old, command, facts)
            assert state is not None
            if old is not None:
                _save(tx, machine.supersede(old, by=session_id, now=now))
            _commit(tx, state, events)
        related = knowledge.related(conn, self.project, command["problem"], command["constraints"])
        answer: dict[str, Any] = {
            "protocol": "ulysses",
            "status": "active",
            "problem": state["problem"],
            "constraints": state["constraints"],
            "checkpoint": checkpoint,
            "related_lessons": related,
        }
        if old is not None:
            answer["superseded_session"] = old["session_id"]
        return {**answer, **views.common(state, diagnostics)}

    def _plan(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = _active(conn)
        machine.check(state, command)
        assert state is not None
        built = {
            role: snapshot.build(conn, ref["notebookId"], ref["cellId"], self.config["validators"])
            for role, ref in (
                ("primary", command["primaryValidator"]),
                ("recovery", command["recoveryValidator"]),
            )
        }
        base, diagnostics = self._observe(state["session_id"], "base", snapshot=False)
        with self.store.write() as tx:
            current = _active(tx)
            machine.check(current, command)
            assert current is not None
            bound = {
                role: bindings.bind(
                    tx,
                    self.blobs,
                    snapshot_value,
                    owner_kind=OWNER_KIND,
                    owner_id=current["session_id"],
                    role=role,
                    cell=cell,
                )
                for role, (snapshot_value, cell) in built.items()
            }
            facts = {
                "now": clock.now(),
                "step_id": ids.new("step"),
                "base": base,
                "bindings": bound,
            }
            after, events = machine.transition(current, command, facts)
            assert after is not None
            seqs = _commit(tx, after, events)
            bindings.attach_event(tx, [view["binding_id"] for view in bound.values()], seqs[0])
        if bound["primary"]["snapshotHash"] == bound["recovery"]["snapshotHash"]:
            diagnostics.append(
                _diagnostic(
                    "same_validator_for_both",
                    "primary and recovery are judged by the same validator; a recovery"
                    " usually needs its own predicate",
                )
            )
        return {"active_step": views.step(after["active_step"]), **views.common(after, diagnostics)}

    def _outcome(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = _active(conn)
        machine.check(state, command)
        assert state is not None
        role = machine.step_role(state)
        binding_id = state["active_step"][f"{role}Validator"]["binding_id"]
        validation, facts, diagnostics = self._judge(conn, state, command, binding_id)
        if not validation["pass"] and not state.get("problem_observed"):
            facts["problem"] = self._keep(command["observed"])
        with self.store.write() as tx:
            current = _unchanged(tx, state)
            after, events = machine.transition(current, command, {**facts, "now": clock.now()})
            assert after is not None
            _store_run(tx, binding_id, validation)
            _commit(tx, after, events)
        answer: dict[str, Any] = {
            "assessment": "expected" if validation["pass"] else "unexpected-unfavorable",
            "validation": validation,
            "forbidden_moves": after["forbidden_moves"],
        }
        if "checkpoint" in facts:
            answer["checkpoint"] = facts["checkpoint"]
        if machine.is_tamper(validation):
            answer["validatorTampering"] = True
        answer["message"] = _outcome_message(role, validation, after)
        return {**answer, **views.common(after, diagnostics)}

    def _bind_final_validator(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = _active(conn)
        machine.check(state, command)
        assert state is not None
        settings = self.config["validators"]
        snapshot_value, cell = snapshot.build(
            conn, command["notebookId"], command["cellId"], settings
        )
        problem, observed = self._problem(state, snapshot_value["mode"], command)
        shown = runner.run_snapshot(
            snapshot_value, observed, settings, project_root=self.project.root
        )
        with self.store.write() as tx:
            current = _unchanged(tx, state)
            binding = bindings.bind(
                tx,
                self.blobs,
                snapshot_value,
                owner_kind=OWNER_KIND,
                owner_id=current["session_id"],
                role="final",
                cell=cell,
            )
            facts = {
                "now": clock.now(),
                "binding": binding,
                "demonstration": shown,
                "problem": problem,
            }
            after, events = machine.transition(current, command, facts)
            assert after is not None
            seqs = _commit(tx, after, events)
            bindings.attach_event(tx, [binding["binding_id"]], seqs[0])
        return {"finalValidator": views.validator(binding), **views.common(after, [])}

    def _reflect(self, command: dict[str, Any]) -> dict[str, Any]:
        machine.check(_active(self.store.connection()), command)
        diagnostics: Diagnostics = []
        try:
            digest = checkpoints.worktree_digest(self.project.root)
        except checkpoints.GitFailed as exc:
            digest = None  # see the module docstring
            diagnostics.append(
                _diagnostic("worktree_unreadable", f"{exc.message}; the worktree was not compared")
            )
        with self.store.write() as tx:
            current = _active(tx)
            machine.check(current, command)
            assert current is not None
            facts = {"now": clock.now(), "worktree_digest": digest}
            after, events = machine.transition(current, command, facts)
            assert after is not None
            _commit(tx, after, events)
        diagnostics += _reflect_diagnostics(command, current["reflect_base"], digest)
        return {
            "hypothesis_seq": after["hypotheses"][-1]["seq"],
            "hypothesis_count": len(after["hypotheses"]),
            **views.common(after, diagnostics),
        }

    def _note(self, command: dict[str, Any]) -> dict[str, Any]:
        data = command.get("data")
        now = clock.now()
        with self.store.write() as tx:
            current = _active(tx)
            facts = {"now": now, "data_digest": None if data is None else canon.digest(data)}
            after, events = machine.transition(current, command, facts)
            assert after is not None
            _save(tx, after)
            seq = _append(tx, events)[-1]
            tx.execute(
                "INSERT INTO ulysses_notes (session_id, note_seq, kind, thought, data_json, at,"
                " journal_seq) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    after["session_id"],
                    after["note_count"],
                    command["kind"],
                    command["thought"],
                    None if data is None else canon.canonical_text(data),
                    now,
                    seq,
                ),
            )
        return {"note_seq": after["note_count"], **views.common(after, [])}

    def _status(self, command: dict[str, Any]) -> dict[str, Any]:
        with self.store.read() as conn:
            state = _active(conn)
            if state is None:
                row = conn.execute(
                    "SELECT state_json FROM ulysses_sessions WHERE status != 'active'"
                    " ORDER BY completed_at DESC, rowid DESC LIMIT 1"
                ).fetchone()
                if row is None:
                    return {"active": False}
                return {"active": False, "last_session": views.last_session(_decode(row[0]))}
            return self._status_answer(conn, state)

    def _resume(self, command: dict[str, Any]) -> dict[str, Any]:
        with self.store.read() as conn:
            state = _active(conn)
            machine.check(state, command)
            assert state is not None
            answer = self._status_answer(conn, state)
            rows = conn.execute(
                "SELECT note_seq, kind, thought, data_json, at FROM ulysses_notes"
                " WHERE session_id = ? ORDER BY note_seq DESC LIMIT ?",
                (state["session_id"], HISTORY_LIMIT),
            ).fetchall()
            history = journal.query(
                conn, subject=state["session_id"], limit=HISTORY_LIMIT, newest=True
            )
        answer["notes"] = [
            {
                "note_seq": note_seq,
                "kind": kind,
                "thought": thought,
                "data": None if data_json is None else json.loads(data_json),
                "at": at,
            }
            for note_seq, kind, thought, data_json, at in reversed(rows)
        ]
        answer["history"] = [
            {key: event[key] for key in ("seq", "at", "actor", "kind", "payload")}
            for event in history
        ]
        return answer

    def _complete(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = _active(conn)
        machine.check(state, command)
        assert state is not None
        terminal = command["terminalState"]
        validation = None
        facts: dict[str, Any] = {}
        diagnostics: Diagnostics = []
        if terminal == "resolved":
            binding_id = state["finalValidator"]["binding_id"]
            validation, facts, diagnostics = self._judge(conn, state, command, binding_id)
        lesson = None
        with self.store.write() as tx:
            current = _active(tx) if validation is None else _unchanged(tx, state)
            after, events = machine.transition(current, command, {**facts, "now": clock.now()})
            assert after is not None
            if validation is not None:
                _store_run(tx, binding_id, validation)
            if after["status"] == terminal and after["summary"] is not None:
                lesson = knowledge.record_lesson(tx, self.project, views.closed_for_lesson(after))
                events[-1]["payload"]["lesson"] = {"id": lesson["id"], "key": lesson["key"]}
            _commit(tx, after, events)
        if after["status"] == "active":
            raise _final_tampered(after, validation)
        answer: dict[str, Any] = {"status": after["status"], "terminalState": terminal}
        if validation is not None:
            answer["validation"] = validation
        if lesson is not None:
            diagnostics.extend(knowledge.write_lesson_file(self.project, lesson))
            diagnostics.extend(_summary_diagnostics(after["summary"]))
            answer["lesson"] = {key: lesson[key] for key in ("id", "path", "merged")}
        return {**answer, **views.common(after, diagnostics)}

    def _rollback(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        wanted = command.get("session_id")
        state = _active(conn) if wanted is None else _session(conn, wanted)
        machine.check(state, command)
        assert state is not None
        target = next(p for p in state["checkpoints"] if p["label"] == command["label"])
        restored = checkpoints.rollback(
            self.project.root,
            session_id=state["session_id"],
            checkpoint=target,
            pre_label=machine.next_checkpoint_label(state, "pre_rollback"),
            settings=self.config["ulysses"],
        )
        with self.store.write() as tx:
            current = _session(tx, state["session_id"])
            facts = {"now": clock.now(), "pre_rollback": restored["pre_rollback"]}
            after, events = machine.transition(current, command, facts)
            assert after is not None
            _commit(tx, after, events)
        warnings = list(restored.get("warnings") or [])
        for step in machine.irreversible_after(after, target):
            warnings.append(
                f"step {step['step_id']} ({step['primary']!r}) was irreversible: what it did"
                " outside the worktree is not undone"
            )
        return {
            "checkpoint": target,
            "pre_rollback": restored["pre_rollback"],
            "restored": restored.get("restored", []),
            "deleted": restored.get("deleted", []),
            "kept": restored.get("kept", []),
            "warnings": warnings,
            **views.common(after, []),
        }

    # --- helpers --------------------------------------------------------------------

    def _problem(self, state: State, mode: str, command: dict[str, Any]) -> tuple[str | None, Any]:
        """The observed data a final validator is shown failing on, and its blob digest
        when it is new to the session: a probe measures the project itself; a judge is
        run on ``observed`` given now, else on the first failing outcome's."""
        if "observed" in command:
            return self._keep(command["observed"]), command["observed"]
        if mode == "probe":
            return None, {}
        kept = state.get("problem_observed")
        if not kept:
            raise Refused(
                "PROBLEM_OBSERVATION_REQUIRED",
                "a judge final validator is bound only once it is seen failing on the"
                " problem as it stands: pass observed, the data that shows the problem now",
                {"pointer": "/observed"},
            )
        return None, json.loads(self.blobs.get(kept))

    def _keep(self, observed: Any) -> str:
        """Store observed data in the blob store; returns its digest."""
        return self.blobs.put(runner.canonical_observed(observed))

    def _status_answer(self, conn: sqlite3.Connection, state: State) -> dict[str, Any]:
        count = conn.execute(
            "SELECT count(*) FROM journal WHERE subject = ?", (state["session_id"],)
        ).fetchone()[0]
        return {**views.status(state, int(count)), **views.common(state, [])}

    def _run_validator(
        self, conn: sqlite3.Connection, binding_id: str, observed: Any
    ) -> dict[str, Any]:
        return bindings.run(
            conn,
            self.blobs,
            binding_id,
            observed,
            self.config["validators"],
            project_root=self.project.root,
        )

    def _judge(
        self, conn: sqlite3.Connection, state: State, command: dict[str, Any], binding_id: str
    ) -> tuple[dict[str, Any], dict[str, Any], Diagnostics]:
        """Steps 1–2 of a judged operation (reference §3.4), outside any transaction: run
        the bound validator on ``observed``, then take the observation the transition will
        record (a checkpoint after a pass, the base on entering REFLECT). Returns the
        validation, the facts for ``machine.transition`` and the diagnostics so far."""
        validation = self._run_validator(conn, binding_id, command["observed"])
        diagnostics = list(validation.get("diagnostics") or [])
        facts: dict[str, Any] = {"validation": validation}
        needed = machine.observation_needed(state, command, validation)
        if needed == "checkpoint":
            label = machine.next_checkpoint_label(state, "checkpoint")
            facts["checkpoint"] = self._observe_into(diagnostics, state, label)
        elif needed == "reflect_base":
            facts["reflect_base"] = self._observe_into(
                diagnostics, state, "reflect_base", snapshot=False
            )
        return validation, facts, diagnostics

    def _observe(
        self, session_id: str, label: str, *, snapshot: bool = True
    ) -> tuple[dict[str, Any], Diagnostics]:
        return checkpoints.observe(
            self.project.root,
            session_id=session_id,
            label=label,
            settings=self.config["ulysses"],
            snapshot=snapshot,
        )

    def _observe_into(
        self, diagnostics: Diagnostics, state: State, label: str, *, snapshot: bool = True
    ) -> dict[str, Any]:
        observed, more = self._observe(state["session_id"], label, snapshot=snapshot)
        diagnostics.extend(more)
        return observed


# --- storage ----------------------------------------------------------------------------


def _decode(text: str) -> State:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise Corrupt(
            "STATE_UNREADABLE", "a stored Ulysses session is not JSON; run `ithaca doctor`"
        ) from exc
    return dict(value)


def _active(conn: sqlite3.Connection) -> State | None:
    row = conn.execute("SELECT state_json FROM ulysses_sessions WHERE status = 'active'").fetchone()
    return None if row is None else _decode(row[0])


def _session(conn: sqlite3.Connection, session_id: str) -> State:
    row = conn.execute(
        "SELECT state_json FROM ulysses_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    if row is None:
        raise NotFound(
            "SESSION_NOT_FOUND", f"no Ulysses session {session_id}", {"session_id": session_id}
        )
    return _decode(row[0])


def _unchanged(conn: sqlite3.Connection, expected: State) -> State:
    """The active session, provided nothing committed since ``expected`` was read."""
    current = _active(conn)
    if (
        current is None
        or current["session_id"] != expected["session_id"]
        or current["version"] != expected["version"]
    ):
        raise Conflict(
            "STATE_CONFLICT",
            "the session changed while the validator ran, so its verdict was not applied;"
            " call status before trying again",
            {
                "session_id": expected["session_id"],
                "expected_version": expected["version"],
                "version": None if current is None else current["version"],
            },
        )
    return current


def _store_run(conn: sqlite3.Connection, binding_id: str, validation: dict[str, Any]) -> None:
    """Keep a run with the transition it causes. A failed snapshot check whose binding
    row was deleted has no row to keep it under; the tamper transition still commits."""
    try:
        bindings.record_run(conn, binding_id, validation)
    except NotFound:
        if not machine.is_tamper(validation):
            raise


def _save(conn: sqlite3.Connection, state: State) -> None:
    conn.execute(
        "INSERT INTO ulysses_sessions (session_id, status, version, state_json, created_at,"
        " completed_at) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id) DO UPDATE SET"
        " status = excluded.status, version = excluded.version,"
        " state_json = excluded.state_json, completed_at = excluded.completed_at",
        (
            state["session_id"],
            state["status"],
            state["version"],
            canon.canonical_text(state),
            state["created_at"],
            state["completed_at"],
        ),
    )


def _append(conn: sqlite3.Connection, events: list[dict[str, Any]]) -> list[int]:
    return [
        journal.append(
            conn,
            actor=event["actor"],
            kind=event["kind"],
            subject=event["subject"],
            payload=event["payload"],
        )
        for event in events
    ]


def _commit(conn: sqlite3.Connection, state: State, events: list[dict[str, Any]]) -> list[int]:
    """Save ``state``, append its events and bring the gate record in step."""
    _save(conn, state)
    seqs = _append(conn, events)
    _sync_gate(conn, seqs[-1])
    return seqs


def _sync_gate(conn: sqlite3.Connection, seq: int) -> None:
    """The kernel gate record names the active session and its phase, or is absent."""
    row = conn.execute(
        "SELECT session_id, json_extract(state_json, '$.phase') FROM ulysses_sessions"
        " WHERE status = 'active'"
    ).fetchone()
    if row is None:
        conn.execute("DELETE FROM gate_state WHERE part = 'ulysses' AND scope_key = 'project'")
        return
    conn.execute(
        "INSERT INTO gate_state (part, scope_key, state_json, updated_seq)"
        " VALUES ('ulysses', 'project', ?, ?) ON CONFLICT (part, scope_key) DO UPDATE SET"
        " state_json = excluded.state_json, updated_seq = excluded.updated_seq",
        (canon.canonical_text({"session_id": row[0], "phase": row[1]}), seq),
    )


# --- answers ----------------------------------------------------------------------------


def _diagnostic(code: str, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def _reflect_diagnostics(
    command: dict[str, Any], reflect_base: dict[str, Any], digest: str | None
) -> Diagnostics:
    """What ``reflect`` notices: files changed while reflection was due, and a
    falsification that only restates its hypothesis."""
    diagnostics = []
    before = reflect_base["worktree_digest"]
    if None not in (before, digest) and before != digest:
        diagnostics.append(
            _diagnostic(
                "worktree_changed_during_reflect",
                "files changed since the session entered REFLECT; reflection is meant to be"
                " read-only",
            )
        )
    if _restates(command["hypothesis"], command["falsification"]):
        diagnostics.append(
            _diagnostic(
                "falsification_restates_hypothesis",
                "the falsification repeats the hypothesis; name an observation that would prove"
                " it wrong",
            )
        )
    return diagnostics


def _restates(hypothesis: str, falsification: str) -> bool:
    """Whether one text contains the other once case, width and spacing are ignored."""
    first, second = machine.forbidden_key(hypothesis), machine.forbidden_key(falsification)
    return first in second or second in first


def _final_tampered(after: State, validation: dict[str, Any] | None) -> Corrupt:
    """Row 23: the tamper transition is committed, and the caller still hears an error."""
    return Corrupt(
        "VALIDATOR_TAMPERED",
        "the final validator's snapshot check failed, so nothing ran; the session is in"
        " REFLECT and cannot end resolved (complete as environment_compromised, or init with"
        " supersede)",
        {"session_id": after["session_id"], "phase": after["phase"], "validation": validation},
    )


def _summary_diagnostics(summary: str) -> Diagnostics:
    if len(summary.strip()) >= THIN_SUMMARY_CHARS:
        return []
    return [
        _diagnostic(
            "thin_summary",
            f"the summary is under {THIN_SUMMARY_CHARS} characters; a lesson should say what"
            " to do differently next time",
        )
    ]


def _outcome_message(role: str, validation: dict[str, Any], after: State) -> str:
    if machine.is_tamper(validation):
        return (
            f"The {role} validator's snapshot check failed ({validation['cause']}); nothing ran."
            " Both moves are forbidden. Reflect before planning again."
        )
    if validation["pass"]:
        return f"Expected: the {role} validator passed. Plan the next step, or complete."
    if after["phase"] == "RECOVERY":
        return "Unexpected: the primary validator failed. Take the recovery action, then report."
    return (
        "Unexpected: the recovery validator failed too. Both moves are forbidden; reflect with"
        " a falsifiable hypothesis before planning again."
    )
