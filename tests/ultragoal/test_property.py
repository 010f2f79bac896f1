"""A Hypothesis state machine over the agent's own operations (reference §10, *Property*).

The agent may do anything it is allowed to try — forge artifacts, reuse stale scope
hashes, edit evidence after recording it, invent nonces, pull the user's levers — and the
system (a Stop gate's LIMIT) may pause it. Whenever the pursuit turns ``complete``, an
oracle that shares no code with ``completion.py`` or the reducer re-checks all nine gates
from the raw rows and the files on disk. No agent-only sequence may confirm a story under
strict approval or while pursuing, leave a paused phase other than by completing, or
raise a budget once the pursuit has been pursued.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from tests.ultragoal.conftest import reviewer_pass

from ithaca.app import IthacaProject, init_project
from ithaca.kernel import clock, journal
from ithaca.kernel.errors import IthacaError
from ithaca.ultragoal import lifecycle, marker, records
from ithaca.ultragoal.service import UltragoalService

SESSION = "sess-prop"
SLOTS = ("outcome", "verification_surface", "constraints", "boundaries", "non_goals")
PAUSED = ("budget_limited", "blocked")
FILES = ("e1.txt", "e2.txt", "e3.txt")
HONEST = "honest.txt"  # evidence no rule edits, so that honest runs can complete
EVIDENCE = st.sampled_from((HONEST, *FILES))
# Rules that end a run's progress (re-plan, pause) act on one draw in four, so that runs
# still reach completion often enough for the oracle to judge it.
RARELY = st.integers(0, 3)
SOMETIMES = st.sampled_from([False, False, False, True])
STEPS = st.integers(1, 9)
# The review the honest path submits: a kind, "+stale" for an old scope hash, "?" for
# an inconclusive one.
REVIEWS = st.sampled_from(
    [
        "clean",
        "clean",
        "medium",
        "medium",
        "high",
        "plausible",
        "unknown",
        "bad_ref",
        "out_of_scope",
        "clean+stale",
        "clean?",
    ]
)
OBJECTIVE = "ship it"


def sha_file(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    except OSError:
        return None


def jcs_sha(value: Any) -> str:
    return hashlib.sha256(rfc8785.dumps(value)).hexdigest()


class Pursuit(RuleBasedStateMachine):
    shared: IthacaProject | None = None  # one project for every example (set by the fixture)

    def __init__(self) -> None:
        super().__init__()
        assert self.shared is not None
        self.project = self.shared
        self.root = Path(self.project.project.root)
        self.service = UltragoalService(
            self.project.project, self.project.store, self.project.config
        )
        self.reset()
        self.strict = False
        self.completions_checked = 0
        self.budget = 0
        self.pursued_once = False

    def reset(self) -> None:
        """A clean slate for this example: no pursuit, fresh evidence files."""
        with self.service.store.write() as tx:
            tx.execute("DELETE FROM ultragoal_pursuit")
            tx.execute("DELETE FROM gate_state WHERE part = 'ultragoal'")
            self.first_seq = records.next_seq(tx)
        for name in marker.listed(self.project.project.runtime):
            marker.sync(self.project.project.runtime, name, False)
        for name in (*FILES, HONEST):
            (self.root / "evidence" / name).write_text(f"{name} v0\n")

    # --- plumbing ---------------------------------------------------------------------

    def call(self, operation: str, **fields: Any) -> dict[str, Any] | None:
        try:
            return self.service.dispatch({"operation": operation, "session": SESSION, **fields})
        except IthacaError:
            return None

    def row(self) -> dict[str, Any] | None:
        return records.load(self.service.store.connection(), SESSION)

    def artifact(
        self, findings: list[dict[str, Any]], *, stale: bool, status: str
    ) -> dict[str, Any]:
        conn = self.service.store.connection()
        row = self.row()
        contract = "0" * 64
        if row is not None and not stale:
            contract = self.oracle_scope(row, records.stories(conn, SESSION))
        return {
            "status": status,
            "scope_contract_sha256": contract,
            "findings": findings,
            "reviewer": "r",
            "at": "t",
        }

    # --- rules ------------------------------------------------------------------------

    @initialize(strict=st.booleans())
    def configure(self, strict: bool) -> None:
        self.strict = strict
        self.service.config["ultragoal"]["strict_approval"] = strict

    @rule(steps=STEPS, evidence=EVIDENCE, review=REVIEWS, resolve=st.booleans())
    def advance(self, steps: int, evidence: str, review: str, resolve: bool) -> None:
        """The next steps of the seed's sequence, so that runs reach completion: the
        review it submits is drawn (possibly stale, blocking or needing a resolution it
        may not record), and ``request-complete`` decides."""
        for _ in range(steps):
            self.honest_step(f"evidence/{evidence}", review, resolve)

    @rule(steps=STEPS, evidence=EVIDENCE, review=REVIEWS, resolve=st.booleans())
    def keep_advancing(self, steps: int, evidence: str, review: str, resolve: bool) -> None:
        """The same again: progress is drawn about as often as what undoes it."""
        self.advance(steps, evidence, review, resolve)

    def honest_step(self, evidence: str, review: str, resolve: bool) -> None:
        status = self.call("status") or {}
        phase, state = status.get("status"), status.get("state") or {}
        if phase in PAUSED:
            self.request_complete({"goal": {"objective": OBJECTIVE, "status": "complete"}})
        elif phase in (None, "absent", "complete") or not state.get("stories"):
            self.plan(2, True, "")
        elif phase == "planning":
            if any(s["status"] == "unconfirmed" for s in state["stories"]):
                self.call("confirm_all_stories")
            else:
                self.call("set", phase="pursuing", completion_evidence=[evidence])
        elif status.get("current_story"):
            story = status["current_story"]["id"]
            self.call(
                "record_story_verdict",
                id=story,
                verdict="APPROVE",
                evidence_refs=[evidence],
                verifier="v",
            )
        elif status.get("codereview_artifact") is None:
            kind, stale, inconclusive = review.partition("+")[0], "stale" in review, "?" in review
            self.review(
                kind.rstrip("?"),
                stale,
                "INCONCLUSIVE" if inconclusive else "COMPLETE",
                False,
                False,
            )
        elif resolve and self.needs_resolution(status["review_result"]):
            self.resolve([evidence.removeprefix("evidence/")], False)
        elif state.get("objective_verdict") != "APPROVE":
            self.call("set_verdict", verdict="APPROVE")
        else:
            self.request_complete({"goal": {"objective": OBJECTIVE, "status": "complete"}})

    @staticmethod
    def needs_resolution(result: dict[str, Any]) -> bool:
        repairs = result["findings"]["repair"]
        return result["verdict"] == "COMMENT" and bool(repairs) and "resolution" not in result

    @rule(
        count=st.integers(1, 3),
        surface=st.booleans(),
        constraints=st.sampled_from(["", "c"]),
        draw=RARELY,
    )
    def replan(self, count: int, surface: bool, constraints: str, draw: int) -> None:
        if draw == 0:
            self.plan(count, surface, constraints)

    def plan(self, count: int, surface: bool, constraints: str) -> None:
        self.call(
            "set",
            phase="planning",
            outcome="o",
            constraints=constraints,
            verification_surface="v" if surface else "",
        )
        stories = [
            {
                "id": f"S{i}",
                "story": f"s{i}",
                "acceptance_criteria": ["a"],
                "verification_surface": "t",
            }
            for i in range(count)
        ]
        self.call("set_stories", stories=stories)

    @rule()
    def confirm_all(self) -> None:
        self.call("confirm_all_stories")

    @rule(story=st.integers(0, 3))
    def confirm_one(self, story: int) -> None:
        self.call("confirm_story", id=f"S{story}")

    @rule(
        files=st.lists(st.sampled_from(FILES + ("missing.txt", "../x.txt")), max_size=2),
        raise_budget=st.booleans(),
    )
    def pursue(self, files: list[str], raise_budget: bool) -> None:
        fields: dict[str, Any] = {"phase": "pursuing"}
        if files:
            fields["completion_evidence"] = [f"evidence/{name}" for name in files]
        if raise_budget:
            fields["max_iterations"] = self.budget + 5
        self.call("set", **fields)

    @rule(
        story=st.integers(0, 3),
        approve=st.booleans(),
        files=st.lists(st.sampled_from(FILES), max_size=2),
    )
    def verdict(self, story: int, approve: bool, files: list[str]) -> None:
        self.call(
            "record_story_verdict",
            id=f"S{story}",
            verdict="APPROVE" if approve else "REQUEST_CHANGES",
            evidence_refs=[f"evidence/{name}" for name in files],
            verifier="v",
        )

    @rule(name=st.sampled_from(FILES), delete=st.booleans())
    def edit_evidence(self, name: str, delete: bool) -> None:
        path = self.root / "evidence" / name
        if delete:
            path.unlink(missing_ok=True)
        else:
            path.write_text(f"{name} edited {clock.now()}\n")

    @rule(
        kind=st.sampled_from(
            ["clean", "high", "medium", "plausible", "unknown", "bad_ref", "out_of_scope"]
        ),
        stale=SOMETIMES,
        status=st.sampled_from(["COMPLETE", "COMPLETE", "COMPLETE", "INCONCLUSIVE"]),
        forged_nonce=SOMETIMES,
        invalid=SOMETIMES,
    )
    def review(
        self, kind: str, stale: bool, status: str, forged_nonce: bool, invalid: bool
    ) -> None:
        findings = [] if kind == "clean" else [self.make_finding(kind)]
        artifact = self.artifact(findings, stale=stale, status=status)
        if invalid:
            artifact["extra"] = True
        with self.service.store.write() as tx:
            claim = lifecycle.claim_review_dispatch(
                tx, SESSION, now=clock.now(), nonce_in_prompt=False
            )
            reviewer_pass(tx, SESSION, artifact)  # the hook saw the reviewer submit it
        nonce = "f" * 32 if forged_nonce or not claim["allowed"] else claim["nonce"]
        self.call("submit_review", nonce=nonce, artifact=artifact)

    @staticmethod
    def make_finding(kind: str) -> dict[str, Any]:
        scope, verdict, priority, basis, reference = {
            "high": ("IN_SCOPE", "CONFIRMED", "HIGH", "requirement", "outcome"),
            "medium": ("IN_SCOPE", "CONFIRMED", "MEDIUM", "requirement", "outcome"),
            "plausible": ("IN_SCOPE", "PLAUSIBLE", "LOW", "regression", "S0"),
            "unknown": ("UNKNOWN", "CONFIRMED", "LOW", "uncertain", "outcome"),
            "bad_ref": ("IN_SCOPE", "CONFIRMED", "LOW", "requirement", "boundaries"),
            "out_of_scope": ("OUT_OF_SCOPE", "CONFIRMED", "HIGH", "unrelated", "outcome"),
        }[kind]
        return {
            "class": "correctness",
            "verdict": verdict,
            "impact": priority,
            "priority": priority,
            "assessment": {
                k: "x" for k in ("unfixed_cost", "exposure", "remedy", "added_cost", "rationale")
            },
            "scope": scope,
            "scope_evidence": {"basis": basis, "reference": reference, "rationale": "r"},
            "ref": "a.py:1",
        }

    @rule(
        files=st.lists(st.sampled_from((HONEST, *FILES)), min_size=1, max_size=2),
        stale=st.booleans(),
    )
    def resolve(self, files: list[str], stale: bool) -> None:
        review = records.review(self.service.store.connection(), SESSION)
        sha = "e" * 64 if review is None or stale else review["artifact_sha256"]
        self.call(
            "record_comment_resolution",
            artifact_sha256=sha,
            evidence=[f"evidence/{name}" for name in files],
        )

    @rule(verdict=st.sampled_from(["APPROVE", "APPROVE", "COMMENT", "absent"]))
    def set_verdict(self, verdict: str) -> None:
        self.call("set_verdict", verdict=verdict)

    @rule()
    def arm_codex_goal(self) -> None:
        self.call("set", phase="pursuing", codex_goal_objective=OBJECTIVE)

    @rule(
        snapshot=st.sampled_from(
            [
                None,
                {"goal": {"objective": OBJECTIVE, "status": "complete"}},
                {"goal": {"objective": OBJECTIVE, "status": "active"}},
                {"goal": {"objective": "other", "status": "complete"}},
                "garbage",
            ]
        )
    )
    def request_complete(self, snapshot: Any) -> None:
        fields = {} if snapshot is None else {"codex_goal_json": snapshot}
        was_complete = (self.row() or {}).get("phase") == "complete"
        if self.call("request_complete", **fields) is not None and not was_complete:
            row = self.row()
            assert row is not None and row["phase"] == "complete"
            event("completed")
            self.oracle(row, snapshot)
            self.completions_checked += 1

    @rule(draw=RARELY)
    def add_story(self, draw: int) -> None:
        if draw != 0:
            return
        self.call(
            "add_story",
            story={
                "id": "X",
                "story": "x",
                "acceptance_criteria": ["a"],
                "verification_surface": "t",
            },
            evidence="e",
            rationale="r",
        )

    @rule(story=st.integers(0, 3))
    def retire_story(self, story: int) -> None:
        self.call("retire_story", id=f"S{story}", evidence="e", rationale="r")

    @rule(reason=st.sampled_from(["", "stuck"]), draw=RARELY)
    def set_blocked(self, reason: str, draw: int) -> None:
        if draw != 0:
            return
        self.call("set_blocked", reason=reason)

    @rule(draw=RARELY)
    def stop_gate_limits(self, draw: int) -> None:
        """The system's LIMIT, as the Stop gate applies it."""
        if draw != 0:
            return
        with self.service.store.write() as tx:
            row = records.load(tx, SESSION)
            if row is not None and row["phase"] == "pursuing":
                lifecycle.limit_budget(tx, row, kind="iterations", actor="system", now=clock.now())

    @rule(
        operation=st.sampled_from(
            [
                "resume_pursuit",
                "approve_review_dispatch_renewal",
                "set_budget_limited",
                "claim_review_dispatch",
            ]
        )
    )
    def pull_a_users_lever(self, operation: str) -> None:
        assert self.call(operation) is None

    @rule()
    def dismiss(self) -> None:
        assert (
            self.call(
                "dismiss_review_finding", ref="a.py:1", **{"class": "correctness"}, rationale="r"
            )
            is None
        )

    # --- invariants -------------------------------------------------------------------

    @invariant()
    def agent_sequences_respect_the_users_levers(self) -> None:
        row = self.row()
        if row is not None:
            if self.pursued_once and row["pursued_once"]:
                assert row["max_iterations"] <= self.budget, "budget raised after pursuit"
            self.pursued_once = row["pursued_once"]
            self.budget = row["max_iterations"]
        phase = "absent"
        for entry in self.events():
            after = entry["payload"]["phase"]
            if phase in PAUSED:
                assert after in (phase, "complete"), f"{entry['kind']} left {phase} for {after}"
            if entry["kind"] == "ultragoal.stories_confirmed":
                assert entry["actor"] == "agent" and after == "planning" and not self.strict
            phase = after

    @invariant()
    def every_completion_passed_the_oracle(self) -> None:
        completed = [e for e in self.events() if e["kind"] == "ultragoal.completed"]
        assert len(completed) == self.completions_checked

    def events(self) -> list[dict[str, Any]]:
        conn = self.service.store.connection()
        return journal.query(conn, kind="ultragoal.", subject=SESSION, after_seq=self.first_seq - 1)

    # --- the oracle -------------------------------------------------------------------

    def unchanged(self, path: str, sha: str) -> bool:
        return sha_file(self.root / path) == sha

    @staticmethod
    def oracle_scope(row: dict[str, Any], stories: list[dict[str, Any]]) -> str:
        confirmed = sorted(
            (s for s in stories if s["status"] == "confirmed"), key=lambda s: s["id"]
        )
        return jcs_sha(
            {
                **{slot: row[slot] for slot in SLOTS},
                "stories": [
                    {
                        key: s[key]
                        for key in (
                            "id",
                            "story",
                            "acceptance_criteria",
                            "verification_surface",
                            "status",
                        )
                    }
                    for s in confirmed
                ],
            }
        )

    def oracle(self, row: dict[str, Any], snapshot: Any) -> None:
        conn = self.service.store.connection()
        stories = [
            dict(
                zip(
                    ("id", "status", "story", "acceptance_criteria", "verification_surface"),
                    r,
                    strict=True,
                )
            )
            for r in conn.execute(
                "SELECT id, status, story, acceptance_criteria, verification_surface"
                " FROM ultragoal_story WHERE session_id = ?",
                (SESSION,),
            )
        ]
        for s in stories:
            s["acceptance_criteria"] = json.loads(s["acceptance_criteria"])
        verdicts = {
            r[0]: (r[1], json.loads(r[2]))
            for r in conn.execute(
                "SELECT story_id, verdict, evidence FROM ultragoal_story_verdict"
                " WHERE session_id = ?",
                (SESSION,),
            )
        }
        # Gate 1
        evidence = row["completion_evidence"]
        assert evidence and all(self.unchanged(p["path"], p["sha256"]) for p in evidence)
        assert row["objective_verdict"] == "APPROVE"
        # Gate 2
        live = [s for s in stories if s["status"] != "retired"]
        assert live
        # Gates 3-6
        assert verdicts and set(verdicts) <= {s["id"] for s in stories}
        for s in live:
            assert s["status"] == "confirmed"
            verdict, pairs = verdicts[s["id"]]
            assert verdict == "APPROVE" and pairs
            assert all(self.unchanged(p["path"], p["sha256"]) for p in pairs)
        # Gates 7-8
        stored = conn.execute(
            "SELECT artifact, artifact_sha256 FROM ultragoal_review WHERE session_id = ?",
            (SESSION,),
        ).fetchone()
        assert stored is not None
        artifact = json.loads(stored[0])
        assert jcs_sha(artifact) == stored[1]
        assert artifact["status"] == "COMPLETE"
        assert artifact["scope_contract_sha256"] == self.oracle_scope(row, stories)
        medium = False
        for f in artifact["findings"]:
            assert f["scope"] != "UNKNOWN"
            if f["scope"] == "IN_SCOPE":
                assert f["verdict"] == "CONFIRMED" and f["priority"] != "HIGH"
                assert f["scope_evidence"]["reference"] in ("outcome", "verification_surface") or (
                    f["scope_evidence"]["basis"] == "regression"
                )
                medium = medium or f["priority"] == "MEDIUM"
        if medium:
            resolution = row["review_resolution"]
            assert resolution and resolution["artifact_sha256"] == stored[1]
            assert all(self.unchanged(p, s) for p, s in resolution["evidence_sha256"].items())
        # Gate 9
        if row["codex_goal_objective"].strip():
            assert isinstance(snapshot, dict)
            assert snapshot["goal"]["objective"] == row["codex_goal_objective"]
            assert snapshot["goal"]["status"] == "complete"


@pytest.fixture(autouse=True, scope="module")
def shared_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    root = tmp_path_factory.mktemp("ug-prop") / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "evidence").mkdir()
    project, _ = init_project(root)
    Pursuit.shared = project
    yield
    Pursuit.shared = None
    project.close()


Pursuit.TestCase.settings = settings(
    max_examples=50,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_pursuit_never_completes_without_its_gates = Pursuit.TestCase
