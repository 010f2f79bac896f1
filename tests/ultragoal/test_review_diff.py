"""A review shows that it looked: a COMPLETE artifact cites the files it read with their
digests, each matching the file as it stands, and at least one file of the change since the
pursuit began; any other artifact is refused at submission and changes nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from ithaca.kernel import canon
from ithaca.kernel.errors import IthacaError
from ithaca.ultragoal import review_diff


@pytest.fixture
def committed(ug: Any) -> Any:
    """A repository with a commit (``old.py``, ``gone.py``) before the pursuit begins; the
    pursuit then changes ``app.py``, deletes ``gone.py`` and adds evidence."""
    root = ug.root
    (root / ".gitignore").write_text("build/\n")
    (root / "old.py").write_text("old\n")
    (root / "gone.py").write_text("gone\n")
    (root / "app.py").write_text("v1\n")
    ug.git("add", "-A")
    ug.git("commit", "-qm", "before the pursuit")
    ug.pursue()
    (root / "app.py").write_text("v2\n")
    (root / "gone.py").unlink()
    (root / "build").mkdir()
    (root / "build" / "out.bin").write_text("ignored\n")
    ug.approve_stories()
    return ug


def cite(root: Path, *paths: str) -> list[dict[str, Any]]:
    return [
        {"path": p, "sha256": canon.digest_bytes((root / p).read_bytes())}
        if (root / p).exists()
        else {"path": p, "sha256": None}
        for p in paths
    ]


def refusal(ug: Any, artifact: dict[str, Any]) -> IthacaError:
    before = ug.row()
    nonce = ug.claim()["nonce"]
    ug.seen(artifact)  # the hook saw the reviewer submit it
    after_claim = ug.row()
    with pytest.raises(IthacaError) as caught:
        ug.call("submit_review", nonce=nonce, artifact=artifact)
    assert ug.row() == after_claim != before  # the claim stands, the submission wrote nothing
    ug.review(ug.artifact(), nonce=nonce)  # the dispatch is still open
    return caught.value


def test_the_change_is_what_differs_from_the_commit_the_pursuit_began_at(committed: Any):
    root = committed.root
    base = committed.row()["review_base"]
    assert base == committed.git("rev-parse", "HEAD")
    changed = review_diff.changed_files(str(root), base)
    assert {"app.py", "gone.py"} <= changed
    assert "evidence/final.txt" in changed  # new and not ignored
    assert "old.py" not in changed and "build/out.bin" not in changed
    assert not any(path.startswith(".ithaca/") for path in changed)


def test_a_review_citing_the_change_is_accepted_and_its_coverage_journaled(committed: Any):
    root = committed.root
    artifact = {**committed.artifact(), "files_read": cite(root, "app.py", "gone.py", "old.py")}
    assert committed.submit(artifact)["verdict"] == "APPROVE"
    event = (
        committed.service.store.connection()
        .execute("SELECT payload FROM journal WHERE kind = 'ultragoal.review_submitted'")
        .fetchone()[0]
    )
    # app.py counts; gone.py (deleted, cited as null) took no reading; old.py is unchanged.
    assert '"coverage":{"changed":' in event and '"covered":1' in event


def test_a_review_citing_only_deleted_files_covers_nothing(committed: Any):
    artifact = {**committed.artifact(), "files_read": cite(committed.root, "gone.py")}
    assert refusal(committed, artifact).code == "REVIEW_COVERS_NO_CHANGE"


def test_in_a_project_inside_a_larger_repository_the_change_is_the_projects(tmp_path: Path):
    def git(*args: str) -> None:
        identity = ("-c", "user.name=T", "-c", "user.email=t@example.com")
        subprocess.run(["git", *identity, "-C", str(top), *args], check=True)

    top, project = tmp_path / "mono", tmp_path / "mono" / "project"
    project.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    (project / "app.py").write_text("v1\n")
    (top / "elsewhere.txt").write_text("v1\n")
    git("add", "-A")
    git("commit", "-qm", "start")
    base = review_diff.base_of(str(project))
    (project / "app.py").write_text("v2\n")
    (project / "new.py").write_text("new\n")
    (top / "elsewhere.txt").write_text("v2\n")

    assert review_diff.changed_files(str(project), base) == {"app.py", "new.py"}
