"""The Ulysses service: the one path the MCP tool, the CLI and the Python API take.

The state machine decides; this module gathers what it needs from the world and stores
what it decides. Each operation follows the reference's check order: input
(``ulysses.inputs``), session and phase (``refusals.check`` on a short read), the
operation's prerequisites (building validator snapshots, observing Git), then one
``BEGIN IMMEDIATE`` transaction that reads the session again, applies the transition,
saves the state, appends its events and updates the gate record the hook reads
(``session_store``).

Validators never run inside a transaction (a run can take many seconds and would hold
every other writer back; ``observations``). ``outcome`` and ``complete(resolved)``
therefore note the session's ``version`` before the run and refuse to commit
(``STATE_CONFLICT``) if it moved meanwhile: of two concurrent outcomes one wins, a
rollback during a run voids the run, and a crash between run and commit leaves the state
as it was. Git observations are made outside the transaction for the same reason; a
refusal can at most leave an unused checkpoint ref behind, never a changed session. A Git
that cannot list the worktree refuses the operation (``GIT_FAILED``) before anything is
stored, except in ``reflect``, whose digest only feeds a diagnostic: the gate blocks edits
in REFLECT, so refusing there would leave no way to repair Git.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from ithaca.kernel import canon, clock, ids, journal
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Refused
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.ulysses import (
    answers,
    checkpoints,
    inputs,
    lesson_recording,
    lesson_search,
    machine,
    refusals,
    session,
    session_store,
    views,
)
from ithaca.ulysses.diagnostics import Diagnostics, diagnostic
from ithaca.ulysses.observations import Observer
from ithaca.ulysses.session import State
from ithaca.validators import bindings, snapshot

OWNER_KIND = "ulysses"
HISTORY_LIMIT = 20


class UlyssesService:
    """Ulysses sessions of one project; every method takes the operation's raw arguments."""

    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config
        self.blobs = BlobStore(project.blobs_dir)
        self.observer = Observer(project, config, self.blobs)

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
                f"only the user may replace the final validator, with {refusals.USER_BINDS_FINAL}",
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
        refusals.check(session_store.load_active(conn), command)
        session_id = ids.new("uly")
        checkpoint, diagnostics = self.observer.observe(session_id, "initial")
        with self.store.write() as tx:
            old = session_store.load_active(tx)
            now = clock.now()
            facts = {"now": now, "session_id": session_id, "checkpoint": checkpoint}
            state, events = machine.transition(old, command, facts)
            assert state is not None
            if old is not None:
                session_store.save(tx, machine.supersede(old, by=session_id, now=now))
            session_store.commit(tx, state, events)
        related = lesson_search.related(
            conn, self.project, command["problem"], command["constraints"]
        )
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
        state = session_store.load_active(conn)
        refusals.check(state, command)
        assert state is not None
        built = {
            role: snapshot.build(conn, ref["notebookId"], ref["cellId"], self.config["validators"])
            for role, ref in (
                ("primary", command["primaryValidator"]),
                ("recovery", command["recoveryValidator"]),
            )
        }
        base, diagnostics = self.observer.observe(state["session_id"], "base", snapshot=False)
        with self.store.write() as tx:
            current = session_store.load_active(tx)
            refusals.check(current, command)
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
            seqs = session_store.commit(tx, after, events)
            bindings.attach_event(tx, [view["binding_id"] for view in bound.values()], seqs[0])
        if bound["primary"]["snapshotHash"] == bound["recovery"]["snapshotHash"]:
            diagnostics.append(
                diagnostic(
                    "same_validator_for_both",
                    "primary and recovery are judged by the same validator; a recovery"
                    " usually needs its own predicate",
                )
            )
        return {"active_step": views.step(after["active_step"]), **views.common(after, diagnostics)}

    def _outcome(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = session_store.load_active(conn)
        refusals.check(state, command)
        assert state is not None
        role = session.step_role(state)
        binding_id = state["active_step"][f"{role}Validator"]["binding_id"]
        validation, facts, diagnostics = self.observer.judge(conn, state, command, binding_id)
        if not validation["pass"] and not state.get("problem_observed"):
            facts["problem"] = self.observer.keep(command["observed"])
        with self.store.write() as tx:
            current = session_store.load_unchanged(tx, state)
            after, events = machine.transition(current, command, {**facts, "now": clock.now()})
            assert after is not None
            session_store.record_validator_run(tx, binding_id, validation)
            session_store.commit(tx, after, events)
        answer: dict[str, Any] = {
            "assessment": "expected" if validation["pass"] else "unexpected-unfavorable",
            "validation": validation,
            "forbidden_moves": after["forbidden_moves"],
        }
        if "checkpoint" in facts:
            answer["checkpoint"] = facts["checkpoint"]
        if session.is_tamper(validation):
            answer["validatorTampering"] = True
        answer["message"] = answers.outcome_message(role, validation, after)
        return {**answer, **views.common(after, diagnostics)}

    def _bind_final_validator(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = session_store.load_active(conn)
        refusals.check(state, command)
        assert state is not None
        snapshot_value, cell = snapshot.build(
            conn, command["notebookId"], command["cellId"], self.config["validators"]
        )
        problem, observed = self.observer.problem(state, snapshot_value["mode"], command)
        shown = self.observer.demonstrate(snapshot_value, observed)
        with self.store.write() as tx:
            current = session_store.load_unchanged(tx, state)
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
            seqs = session_store.commit(tx, after, events)
            bindings.attach_event(tx, [binding["binding_id"]], seqs[0])
        return {"finalValidator": views.validator(binding), **views.common(after, [])}

    def _reflect(self, command: dict[str, Any]) -> dict[str, Any]:
        refusals.check(session_store.load_active(self.store.connection()), command)
        diagnostics: Diagnostics = []
        try:
            digest = checkpoints.worktree_digest(self.project.root)
        except checkpoints.GitFailed as exc:
            digest = None  # see the module docstring
            diagnostics.append(
                diagnostic("worktree_unreadable", f"{exc.message}; the worktree was not compared")
            )
        with self.store.write() as tx:
            current = session_store.load_active(tx)
            refusals.check(current, command)
            assert current is not None
            facts = {"now": clock.now(), "worktree_digest": digest}
            after, events = machine.transition(current, command, facts)
            assert after is not None
            session_store.commit(tx, after, events)
        diagnostics += answers.reflect_diagnostics(command, current["reflect_base"], digest)
        return {
            "hypothesis_seq": after["hypotheses"][-1]["seq"],
            "hypothesis_count": len(after["hypotheses"]),
            **views.common(after, diagnostics),
        }

    def _note(self, command: dict[str, Any]) -> dict[str, Any]:
        data = command.get("data")
        now = clock.now()
        with self.store.write() as tx:
            current = session_store.load_active(tx)
            facts = {"now": now, "data_digest": None if data is None else canon.digest(data)}
            after, events = machine.transition(current, command, facts)
            assert after is not None
            session_store.save(tx, after)
            seq = session_store.append_events(tx, events)[-1]
            session_store.save_note(tx, after, command, now, seq)
        return {"note_seq": after["note_count"], **views.common(after, [])}

    def _status(self, command: dict[str, Any]) -> dict[str, Any]:
        with self.store.read() as conn:
            state = session_store.load_active(conn)
            if state is None:
                closed = session_store.load_last_closed(conn)
                if closed is None:
                    return {"active": False}
                return {"active": False, "last_session": views.last_session(closed)}
            return self._status_answer(conn, state)

    def _resume(self, command: dict[str, Any]) -> dict[str, Any]:
        with self.store.read() as conn:
            state = session_store.load_active(conn)
            refusals.check(state, command)
            assert state is not None
            answer = self._status_answer(conn, state)
            answer["notes"] = session_store.recent_notes(conn, state["session_id"], HISTORY_LIMIT)
            history = journal.query(
                conn, subject=state["session_id"], limit=HISTORY_LIMIT, newest=True
            )
        answer["history"] = [
            {key: event[key] for key in ("seq", "at", "actor", "kind", "payload")}
            for event in history
        ]
        return answer

    def _complete(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        state = session_store.load_active(conn)
        refusals.check(state, command)
        assert state is not None
        terminal = command["terminalState"]
        validation = None
        facts: dict[str, Any] = {}
        diagnostics: Diagnostics = []
        if terminal == "resolved":
            binding_id = state["finalValidator"]["binding_id"]
            validation, facts, diagnostics = self.observer.judge(conn, state, command, binding_id)
        lesson = None
        with self.store.write() as tx:
            if validation is None:
                current = session_store.load_active(tx)
            else:
                current = session_store.load_unchanged(tx, state)
            after, events = machine.transition(current, command, {**facts, "now": clock.now()})
            assert after is not None
            if validation is not None:
                session_store.record_validator_run(tx, binding_id, validation)
            if after["status"] == terminal and after["summary"] is not None:
                lesson = lesson_recording.record_lesson(
                    tx, self.project, views.closed_for_lesson(after)
                )
                events[-1]["payload"]["lesson"] = {"id": lesson["id"], "key": lesson["key"]}
            session_store.commit(tx, after, events)
        if after["status"] == "active":
            raise answers.final_tampered(after, validation)
        answer: dict[str, Any] = {"status": after["status"], "terminalState": terminal}
        if validation is not None:
            answer["validation"] = validation
        if lesson is not None:
            diagnostics.extend(lesson_recording.write_lesson_file(self.project, lesson))
            diagnostics.extend(answers.summary_diagnostics(after["summary"]))
            answer["lesson"] = {key: lesson[key] for key in ("id", "path", "merged")}
        return {**answer, **views.common(after, diagnostics)}

    def _rollback(self, command: dict[str, Any]) -> dict[str, Any]:
        conn = self.store.connection()
        wanted = command.get("session_id")
        if wanted is None:
            state = session_store.load_active(conn)
        else:
            state = session_store.load_session(conn, wanted)
        refusals.check(state, command)
        assert state is not None
        target = next(p for p in state["checkpoints"] if p["label"] == command["label"])
        restored = checkpoints.rollback(
            self.project.root,
            session_id=state["session_id"],
            checkpoint=target,
            pre_label=session.next_checkpoint_label(state, "pre_rollback"),
            settings=self.config["ulysses"],
        )
        with self.store.write() as tx:
            current = session_store.load_session(tx, state["session_id"])
            facts = {"now": clock.now(), "pre_rollback": restored["pre_rollback"]}
            after, events = machine.transition(current, command, facts)
            assert after is not None
            session_store.commit(tx, after, events)
        warnings = list(restored.get("warnings") or [])
        for step in session.irreversible_after(after, target):
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

    def _status_answer(self, conn: sqlite3.Connection, state: State) -> dict[str, Any]:
        count = conn.execute(
            "SELECT count(*) FROM journal WHERE subject = ?", (state["session_id"],)
        ).fetchone()[0]
        return {**views.status(state, int(count)), **views.common(state, [])}
