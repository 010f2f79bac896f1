"""Fixtures for the ultragoal tests: a project, its service, and a driver that moves a
pursuit to a given point through the agent's own operations.

Test modules run in importlib mode and cannot import this file, so the helpers live on
the ``Driver`` the ``ug`` fixture returns.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject, init_project
from ithaca.kernel import canon
from ithaca.ultragoal import records
from ithaca.ultragoal.contract import scope_digest
from ithaca.ultragoal.service import UltragoalService


class Driver:
    """One session's pursuit, driven as the agent (``call``) or the user (``as_user``)."""

    SESSION = "sess-a"
    OUTCOME = "The parser accepts trailing commas"
    SURFACE = "pytest tests/test_parser.py passes"
    STORY_A = {
        "id": "A",
        "story": "Accept trailing commas in arrays",
        "acceptance_criteria": ["[1,2,] parses"],
        "verification_surface": "test_arrays passes",
    }
    STORY_B = {
        "id": "B",
        "story": "Accept trailing commas in objects",
        "acceptance_criteria": ['{"a":1,} parses'],
        "verification_surface": "test_objects passes",
    }

    JUDGE = (
        "from tb_validate import observed, pass_, fail\n"
        "pass_('ok') if observed().get('ok') else fail('not ok')\n"
    )

    def __init__(self, service: UltragoalService, root: Path):
        self.service = service
        self.root = root
        self.session = self.SESSION
        self._validator: dict[str, str] | None = None

    def validator(self) -> dict[str, str]:
        """A judge cell that passes on ``{"ok": true}``: what the driver's stories are
        measured by (an APPROVE needs a passing run of the story's validator)."""
        if self._validator is None:
            from ithaca.validators.notebooks import NotebookService

            service = self.service
            notebooks = NotebookService(service.project, service.store, service.config)
            notebook = notebooks.create({"title": "story checks"})["notebookId"]
            made = notebooks.add_cell(
                {"notebookId": notebook, "source": self.JUDGE, "filename": "story_check.py"}
            )
            self._validator = {"notebookId": notebook, "cellId": made["cellId"]}
        return self._validator

    def measured(self, *stories: dict[str, Any]) -> list[dict[str, Any]]:
        """The stories, each with the driver's validator unless it names its own."""
        return [
            story if "validator" in story else {**story, "validator": self.validator()}
            for story in stories
        ]

    def call(self, operation: str, **fields: Any) -> dict[str, Any]:
        return self.service.dispatch({"operation": operation, "session": self.session, **fields})

    def as_user(self, operation: str, **fields: Any) -> dict[str, Any]:
        """The operation as the user at a terminal (the CLI's check already passed)."""
        return self.service.perform(
            {"operation": operation, "session": self.session, **fields}, actor="user"
        )

    def git(self, *args: str) -> str:
        """``git ARGS`` in the project, as a committer; its output, stripped."""
        done = subprocess.run(
            ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args],
            cwd=self.root,
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip()

    def write(self, name: str, text: str = "ok\n") -> str:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return name

    def plan(self, *stories: dict[str, Any]) -> None:
        """Planning with both slots and the stories, all confirmed by the user (strict
        approval, the default)."""
        self.call("set", phase="planning", outcome=self.OUTCOME, verification_surface=self.SURFACE)
        self.call("set_stories", stories=self.measured(*(stories or (self.STORY_A,))))
        self.as_user("confirm_all_stories")

    def pursue(self, *stories: dict[str, Any]) -> None:
        self.plan(*stories)
        self.call("set", phase="pursuing", completion_evidence=[self.write("evidence/final.txt")])

    def approve_stories(self) -> None:
        """APPROVE every story in order, each with its own evidence file."""
        while True:
            current = self.call("status")["current_story"]
            if current is None:
                return
            ref = self.write(f"evidence/{current['id']}.txt", f"story {current['id']} done\n")
            if current.get("validator"):
                self.call("run_story_validator", id=current["id"], observed={"ok": True})
            self.call(
                "record_story_verdict",
                id=current["id"],
                verdict="APPROVE",
                evidence_refs=[ref],
                verifier="self-check",
            )

    def scope(self) -> str:
        conn = self.service.store.connection()
        row = records.load(conn, self.session)
        assert row is not None
        return scope_digest(row, records.stories(conn, self.session))

    def artifact(
        self, findings: list[dict[str, Any]] | None = None, status: str = "COMPLETE"
    ) -> dict[str, Any]:
        """A review artifact bound to the current scope contract, from a reviewer that
        read every file of the change."""
        return {
            "status": status,
            "scope_contract_sha256": self.scope(),
            "findings": findings or [],
            "reviewer": "code-reviewer",
            "at": "2025-01-01T00:00:00.000Z",
            "files_read": self.files_read(),
        }

    def files_read(self) -> list[dict[str, Any]]:
        """Each file of the change under review with its SHA-256 now (null: deleted)."""
        from ithaca.ultragoal import review_diff

        row = records.load(self.service.store.connection(), self.session)
        assert row is not None
        read = []
        for path in sorted(review_diff.changed_files(str(self.root), row["review_base"])):
            file = self.root / path
            digest = canon.digest_bytes(file.read_bytes()) if file.is_file() else None
            read.append({"path": path, "sha256": digest})
        return read

    @staticmethod
    def finding(
        *,
        scope: str = "IN_SCOPE",
        verdict: str = "CONFIRMED",
        priority: str = "HIGH",
        basis: str = "requirement",
        reference: str = "outcome",
        ref: str | None = "src/parser.py:10",
        finding_class: str = "correctness",
    ) -> dict[str, Any]:
        made: dict[str, Any] = {
            "class": finding_class,
            "verdict": verdict,
            "impact": priority,
            "priority": priority,
            "assessment": {
                "unfixed_cost": "wrong results",
                "exposure": "every caller",
                "remedy": "fix the branch",
                "added_cost": "small",
                "rationale": "required by the outcome",
            },
            "scope": scope,
            "scope_evidence": {"basis": basis, "reference": reference, "rationale": "because"},
        }
        if ref is not None:
            made["ref"] = ref
        return made

    def claim(self) -> dict[str, Any]:
        return self.service.claim_review_dispatch(self.session)

    def seen(self, artifact: Any, *, agent_id: str = "agent-reviewer") -> dict[str, Any] | None:
        """The hook's pass: the reviewer subagent seen submitting ``artifact``
        (``lifecycle.mint_review_pass``, as the PreToolUse hook runs it)."""
        with self.service.store.write() as tx:
            return reviewer_pass(tx, self.session, artifact, agent_id=agent_id)

    def review(self, artifact: Any, **fields: Any) -> dict[str, Any]:
        """The reviewer's own submission, as the hook sees it: a pass, then submit_review."""
        self.seen(artifact)
        return self.call("submit_review", artifact=artifact, **fields)

    def submit(self, review: dict[str, Any]) -> dict[str, Any]:
        claim = self.claim()
        assert claim["allowed"], claim
        return self.review(review, nonce=claim["nonce"])

    def complete(self) -> dict[str, Any]:
        """The seed's whole sequence, from nothing to ``complete``."""
        self.pursue()
        self.approve_stories()
        self.submit(self.artifact())
        self.call("set_verdict", verdict="APPROVE")
        return self.call("request_complete")

    def digest(self) -> str:
        """Every ultragoal row, the gate records and the journal length."""
        conn = self.service.store.connection()
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'"
                " AND name LIKE 'ultragoal_%' ORDER BY name"
            )
        ]
        value: dict[str, Any] = {
            table: [list(row) for row in conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2")]
            for table in tables
        }
        value["journal"] = conn.execute("SELECT count(*) FROM journal").fetchone()[0]
        value["gate_state"] = [
            list(row) for row in conn.execute("SELECT * FROM gate_state ORDER BY 1, 2")
        ]
        return canon.digest(json.loads(json.dumps(value)))

    def row(self) -> dict[str, Any]:
        found = records.load(self.service.store.connection(), self.session)
        assert found is not None
        return found


@pytest.fixture
def project_dir(tmp_path: Path) -> Path:
    """A fresh Git repository with no commit yet (the review is checked against the change
    in Git, here every file not ignored)."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def opened(project_dir: Path) -> Iterator[IthacaProject]:
    project, _ = init_project(project_dir)
    yield project
    project.close()


@pytest.fixture
def service(opened: IthacaProject) -> UltragoalService:
    return UltragoalService(opened.project, opened.store, opened.config)


@pytest.fixture
def ug(service: UltragoalService, project_dir: Path) -> Driver:
    return Driver(service, project_dir)


def reviewer_pass(
    tx: Any, session: str, artifact: Any, *, agent_id: str = "agent-reviewer"
) -> dict[str, Any] | None:
    """The pass the PreToolUse hook mints, in ``tx``, when the reviewer subagent submits
    ``artifact`` (``lifecycle.mint_review_pass``)."""
    from ithaca.kernel import clock
    from ithaca.ultragoal import lifecycle

    return lifecycle.mint_review_pass(
        tx,
        session,
        artifact_sha256=canon.digest(artifact),
        host="claude",
        agent_id=agent_id,
        agent_type="code-reviewer",
        now=clock.now(),
    )
