"""The verification service: ``ithaca verify`` and the ``verify`` MCP tool.

It finds the project's runner (``runners``), takes the content digest of the project
(``turn.current_tree``), reuses a settled run of the same tree, runner and configuration,
or else runs the tests itself in the validator sandbox with Ithaca's own environment
(``run``), and records the run with its journal event (``records``). For an agent's
call it also says what the Stop will say: a passing run still leaves a turn unverified
when the turn changed the runner's configuration or lost tests it began with
(``judgement``). Nothing the agent ran or printed plays a part.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ithaca.kernel import clock, gates, ids, journal, lightjson
from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Refused, invalid_field
from ithaca.kernel.project import Project
from ithaca.kernel.store import Store
from ithaca.verification import judgement, records, runners, turn

CRITIC = "critic"  # the critic's gate state part (``protocols.critic``)
TAIL_LINES = 20


class VerificationService:
    def __init__(self, project: Project, store: Store, config: dict[str, Any]):
        self.project = project
        self.store = store
        self.config = config
        self.blobs = BlobStore(project.blobs_dir)

    def runner(self, state: dict[str, Any] | None = None) -> runners.Runner:
        """The project's runner (for the turn whose critic state is ``state``: the one the
        critic will ask for), or ``VERIFY_NO_RUNNER``."""
        found = runners.detect(self.project.root, turn.settings(self.config["verification"], state))
        if found is None:
            raise Refused(
                "VERIFY_NO_RUNNER",
                "Ithaca found no test runner in this project: set [verification] runner or"
                " commands in .ithaca/config.toml (the user's to write).",
            )
        return found

    def summary(self) -> dict[str, Any]:
        """What ``ithaca status`` shows: the runner and why, and the latest run."""
        found = runners.detect(self.project.root, self.config["verification"])
        latest = records.latest(self.store.connection())
        return {
            "runner": None
            if found is None
            else {"name": found.name, "command": list(found.command), "why": found.why},
            "latest": latest,
        }

    def verify(
        self, *, session: str | None = None, actor: str = "user", fresh: bool = False
    ) -> dict[str, Any]:
        """Run (or reuse) the verification of the project as it is now."""
        conn = self.store.connection()
        state = self._turn_state(conn, session)
        runner = self.runner(state)
        tree = turn.current_tree(self.project, self.config["verification"])
        now_config = turn.configuration(tree.files, runner.config)
        then_config = turn.runner_config(state, runner)
        laid = turn.overlay(then_config, now_config, self.blobs.get) if then_config else {}
        config_digest = turn.configuration_digest(then_config or now_config)
        run = None if fresh else records.settled_for(conn, tree.digest, runner.name, config_digest)
        reused = run is not None
        tail = ""
        if run is None:
            run, tail = self._run(runner, tree.digest, config_digest, laid, session, actor)
        view = _view(run, reused=reused)
        found = judgement.problems(
            conn, self.blobs, state, run, then_config, now_config, self.project.root
        )
        view["verifies_turn"] = run["status"] == "passed" and not any(found.values())
        view["problems"] = judgement.describe(found) or None
        if tail:
            view["tail"] = tail
        return view

    def tool(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The ``verify`` MCP tool: ``{fresh?}``, and the session the hook's ticket named."""
        unknown = sorted(set(arguments) - {"fresh", "session"})
        if unknown:
            raise invalid_field(f"/{unknown[0]}", "UNKNOWN_FIELD", f"unknown field {unknown[0]!r}")
        fresh = arguments.get("fresh", False)
        if not isinstance(fresh, bool):
            raise invalid_field("/fresh", "WRONG_TYPE", "fresh is true or false")
        session = arguments.get("session")
        if session is not None and not ids.is_session_id(session):
            raise invalid_field("/session", "WRONG_TYPE", "session is the host session id")
        return self.verify(session=session, actor="agent", fresh=fresh)

    def accept_config(self) -> dict[str, Any]:
        """Accept the runner configuration as it is now (the user's, at a terminal)."""
        runner = self.runner()
        tree = turn.current_tree(self.project, self.config["verification"])
        config = turn.configuration(tree.files, runner.config)
        config_digest = turn.configuration_digest(config)
        with self.store.write() as tx:
            payload = {"runner": runner.name, "config_digest": config_digest, "files": config}
            seq = journal.append(
                tx, actor="user", kind="verify.config_accepted", subject=None, payload=payload
            )
            tx.execute(
                "INSERT INTO verification_accepted (seq, at, config_digest, files_json)"
                " VALUES (?, ?, ?, ?)",
                (seq, clock.now(), config_digest, lightjson.dumps(config)),
            )
        return {"runner": runner.name, "config_digest": config_digest, "files": sorted(config)}

    def _run(
        self,
        runner: runners.Runner,
        tree_digest: str,
        config_digest: str,
        laid: dict[str, bytes | None],
        session: str | None,
        actor: str,
    ) -> tuple[dict[str, Any], str]:
        from ithaca.verification import run

        started = clock.now()
        outcome = run.in_sandbox(
            self.project.root,
            runner,
            timeout_s=float(self.config["verification"]["timeout_s"]),
            settings=self.config["validators"],
            overlay=laid,
        )
        after = turn.current_tree(self.project, self.config["verification"])
        if after.digest != tree_digest:
            outcome = replace(
                outcome,
                status="changed",
                reason="the project changed while the tests ran, so the run stands for"
                " neither version; run it again once the changes are done",
            )
        with self.store.write() as tx:
            recorded = records.record(
                tx,
                self.blobs,
                runner=runner,
                outcome=outcome,
                tree_digest=tree_digest,
                config_digest=config_digest,
                started_at=started,
                finished_at=clock.now(),
                session_id=session,
                actor=actor,
            )
        tail = "" if outcome.status == "passed" else outcome.tail
        return recorded, tail

    def _turn_state(self, conn: Any, session: str | None) -> dict[str, Any] | None:
        """The critic's state of ``session``'s current turn, when it changed something."""
        if session is None:
            return None
        text = gates.state_text(conn, CRITIC, session)
        state = lightjson.loads(text) if text else None
        return state if isinstance(state, dict) and state.get("changed") else None


def _view(run: dict[str, Any], *, reused: bool = False) -> dict[str, Any]:
    """A run as the CLI and the tool show it."""
    return {
        "id": run["id"],
        "status": run["status"],
        "exit_code": run["exit_code"],
        "runner": run["runner"],
        "command": run["command"],
        "counts": run["counts"],
        "duration_s": round(run["duration_ms"] / 1000, 3),
        "tree_digest": run["tree_digest"],
        "finished_at": run["finished_at"],
        "reused": reused,
        "reason": run["reason"],
    }
