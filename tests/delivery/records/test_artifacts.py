"""``record artifact bind``: copies into allowed folders, references by digest, rebinding,
and every unsafe path refused."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound


def bind(record: Any, **data: Any) -> dict[str, Any]:
    bound: dict[str, Any] = record("artifact", "bind", {"kind": "research", **data})
    return bound


def test_content_is_copied_into_the_change_folder(
    opened_change: dict[str, Any], record: Any, state_root: Path, project: IthacaProject
) -> None:
    result = bind(record, scope={"change_id": "add-login"}, path="research/notes.md", content="n\n")
    artifact = result["result"]["artifact"]
    assert artifact["path"] == "changes/active/add-login/research/notes.md"
    assert (artifact["mode"], artifact["bytes"]) == ("copy", 2)
    assert (state_root / artifact["path"]).read_text() == "n\n"
    registered = project.store.connection().execute(
        "SELECT digest, kind FROM delivery_files WHERE path = ?", (artifact["path"],)
    )
    assert registered.fetchone() == (canon.digest_bytes(b"n\n"), "artifact")


def test_a_source_file_is_copied_into_the_baseline_specs(
    record: Any, project_dir: Path, state_root: Path
) -> None:
    (project_dir / "docs").mkdir()
    (project_dir / "docs" / "api.md").write_text("# API\n")
    artifact = bind(
        record, kind="spec", scope={"baseline": True}, path="specs/api.md", source="docs/api.md"
    )
    assert artifact["result"]["artifact"]["path"] == "specs/api.md"
    assert (state_root / "specs/api.md").read_text() == "# API\n"


def test_a_checkout_file_is_bound_by_reference(record: Any, project_dir: Path) -> None:
    (project_dir / "report.txt").write_text("5 passed\n")
    digest = canon.digest_bytes(b"5 passed\n")
    artifact = bind(
        record, kind="test_report", scope={"baseline": True}, path="report.txt", digest=digest
    )
    found = artifact["result"]["artifact"]
    assert (found["mode"], found["path"], found["digest"]) == ("reference", "report.txt", digest)


def test_a_stated_digest_must_match(record: Any, project_dir: Path) -> None:
    (project_dir / "report.txt").write_text("5 passed\n")
    with pytest.raises(Corrupt) as caught:
        bind(record, scope={"baseline": True}, path="report.txt", digest="0" * 64)
    assert caught.value.code == "EVIDENCE_DIGEST_MISMATCH"


def test_rebinding_a_path_supersedes_and_the_same_bytes_are_a_no_op(
    record: Any, project_dir: Path, project: IthacaProject
) -> None:
    report = project_dir / "report.txt"
    report.write_text("1 failed\n")
    first = bind(record, scope={"baseline": True}, path="report.txt")["result"]["artifact"]
    assert bind(record, scope={"baseline": True}, path="report.txt")["result"]["unchanged"] is True
    report.write_text("1 passed\n")
    second = bind(record, scope={"baseline": True}, path="report.txt")["result"]["artifact"]
    assert second["supersedes"] == first["id"]
    statuses = dict(
        project.store.connection().execute("SELECT id, status FROM delivery_artifacts").fetchall()
    )
    assert statuses == {first["id"]: "superseded", second["id"]: "current"}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"path": "../escape.md", "content": "x"}, "TRAVERSAL"),
        ({"path": "/etc/passwd"}, "ABSOLUTE"),
        ({"path": "notes.md", "content": "x"}, "OUTSIDE_ALLOWED_FOLDERS"),
        ({"path": "research/", "content": "x"}, "OUTSIDE_ALLOWED_FOLDERS"),
        ({"path": ".ithaca/tasks/tasks.json"}, "STATE_ROOT"),
        ({"path": "research/a.md", "source": ".ithaca/.runtime/config.toml"}, "STATE_ROOT"),
    ],
)
def test_unsafe_paths_are_refused(
    opened_change: dict[str, Any], record: Any, data: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        bind(record, scope={"change_id": "add-login"}, **data)
    assert caught.value.code == "PATH_UNSAFE"
    assert caught.value.details["problem"] == problem


def test_symlinks_are_never_followed(record: Any, project_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    os.symlink(outside, project_dir / "link.txt")
    with pytest.raises(InvalidInput) as caught:
        bind(record, scope={"baseline": True}, path="link.txt")
    assert caught.value.details["problem"] == "SYMLINK"


def test_a_missing_file_is_not_found(record: Any) -> None:
    with pytest.raises(NotFound) as caught:
        bind(record, scope={"baseline": True}, path="nowhere.txt")
    assert caught.value.code == "EVIDENCE_FILE_MISSING"


def test_content_and_source_are_exclusive_and_content_is_capped(
    opened_change: dict[str, Any], record: Any
) -> None:
    scope = {"change_id": "add-login"}
    with pytest.raises(InvalidInput) as both:
        bind(record, scope=scope, path="research/a.md", content="x", source="a.md")
    assert both.value.details["problem"] == "CONFLICTING_FIELDS"
    with pytest.raises(InvalidInput) as big:
        bind(record, scope=scope, path="research/a.md", content="x" * (256 * 1024 + 1))
    assert big.value.details == {
        "pointer": "/entries/0/data/content",
        "problem": "TOO_LARGE",
        "index": 0,
        "committed": [],
    }


def test_a_task_scoped_copy_goes_to_its_change_folder(
    opened_change: dict[str, Any], record: Any
) -> None:
    record(
        "task_contract",
        "define",
        {"id": "T-1", "title": "t", "change_id": "add-login", "verification": {"argv": ["x"]}},
    )
    result = bind(
        record, kind="test_report", scope={"task_id": "T-1"}, path="test/t1.txt", content="ok"
    )
    artifact = result["result"]["artifact"]
    assert artifact["path"] == "changes/active/add-login/test/t1.txt"
    assert (artifact["scope_type"], artifact["scope_id"]) == ("task", "T-1")
