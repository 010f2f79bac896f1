"""What a Ulysses operation learns from outside the store: Git observations and validator
runs, always taken before its transaction opens.

A validator run can take many seconds and would hold every other writer back, and a Git
observation reads the whole worktree; neither ever runs inside a transaction. The service
asks an ``Observer`` first, then commits what it learned together with the transition.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Refused
from ithaca.kernel.project import Project
from ithaca.ulysses import checkpoints
from ithaca.ulysses.diagnostics import Diagnostics
from ithaca.ulysses.session import State, next_checkpoint_label, observation_needed
from ithaca.validators import bindings, runner


class Observer:
    """Git observations and validator runs for the sessions of one project."""

    def __init__(self, project: Project, config: dict[str, Any], blobs: BlobStore):
        self.project = project
        self.config = config
        self.blobs = blobs

    def observe(
        self, session_id: str, label: str, *, snapshot: bool = True
    ) -> tuple[dict[str, Any], Diagnostics]:
        """A checkpoint of the worktree (``snapshot=False``: its digest only)."""
        return checkpoints.observe(
            self.project.root,
            session_id=session_id,
            label=label,
            settings=self.config["ulysses"],
            snapshot=snapshot,
        )

    def judge(
        self, conn: sqlite3.Connection, state: State, command: dict[str, Any], binding_id: str
    ) -> tuple[dict[str, Any], dict[str, Any], Diagnostics]:
        """The first two steps of a judged operation, outside any transaction: run
        the bound validator on ``observed``, then take the observation the transition will
        record (a checkpoint after a pass, the base on entering REFLECT). Returns the
        validation, the facts for ``machine.transition`` and the diagnostics so far."""
        validation = self._run_validator(conn, binding_id, command["observed"])
        diagnostics = list(validation.get("diagnostics") or [])
        facts: dict[str, Any] = {"validation": validation}
        needed = observation_needed(state, command, validation)
        if needed == "checkpoint":
            label = next_checkpoint_label(state, "checkpoint")
            facts["checkpoint"] = self._observe_into(diagnostics, state, label)
        elif needed == "reflect_base":
            facts["reflect_base"] = self._observe_into(
                diagnostics, state, "reflect_base", snapshot=False
            )
        return validation, facts, diagnostics

    def problem(self, state: State, mode: str, command: dict[str, Any]) -> tuple[str | None, Any]:
        """The observed data a final validator is shown failing on, and its blob digest
        when it is new to the session: a probe measures the project itself; a judge is
        run on ``observed`` given now, else on the first failing outcome's."""
        if "observed" in command:
            return self.keep(command["observed"]), command["observed"]
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

    def demonstrate(self, snapshot_value: dict[str, Any], observed: Any) -> dict[str, Any]:
        """A final validator's run on the problem as it stands, before it is bound."""
        return runner.run_snapshot(
            snapshot_value, observed, self.config["validators"], project_root=self.project.root
        )

    def keep(self, observed: Any) -> str:
        """Store observed data in the blob store; returns its digest."""
        return self.blobs.put(runner.canonical_observed(observed))

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

    def _observe_into(
        self, diagnostics: Diagnostics, state: State, label: str, *, snapshot: bool = True
    ) -> dict[str, Any]:
        observed, more = self.observe(state["session_id"], label, snapshot=snapshot)
        diagnostics.extend(more)
        return observed
