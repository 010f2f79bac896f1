"""Checkpoints and rollback against real Git repositories."""

from __future__ import annotations

import errno
import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, IthacaError, Refused
from ithaca.ulysses import checkpoints
from ithaca.ulysses.checkpoints import observe, rollback, status_entries, worktree_digest

SETTINGS = {"checkpoint_snapshots": True, "checkpoint_max_file_mb": 50}
SESSION = "uly_01TEST"


@pytest.fixture(autouse=True)
def git_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No user or system Git configuration, a commit identity, no repository above tmp_path."""
    empty = tmp_path / "gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Tester")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tester@example.com")


def git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


def entry(path: str, content: str | None) -> dict[str, str | None]:
    sha = None if content is None else hashlib.sha256(content.encode()).hexdigest()
    return {"path": path, "sha256": sha}


def tree_files(root: Path, ref: str) -> set[str]:
    return set(git(root, "ls-tree", "-r", "--name-only", ref).splitlines())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository with one commit: two files, a folder, an ignore rule and a state file."""
    root = tmp_path / "repo"
    write(
        root,
        {
            "a.txt": "alpha\n",
            "b.txt": "beta\n",
            "keep/c.txt": "gamma\n",
            ".gitignore": "*.log\n",
            ".ithaca/lesson.md": "lesson\n",
        },
    )
    git(tmp_path, "init", "-q", str(root))
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    return root


def test_clean_tree_hashes_the_empty_list_and_names_head(repo: Path) -> None:
    checkpoint, diagnostics = observe(
        str(repo), session_id=SESSION, label="initial", settings=SETTINGS, snapshot=False
    )
    assert checkpoint["worktree_digest"] == canon.digest([])
    assert checkpoint["git_head"] == git(repo, "rev-parse", "HEAD")
    assert (checkpoint["snapshot_ref"], checkpoint["restorable"], diagnostics) == (None, False, [])


def test_digest_lists_modified_deleted_untracked_and_staged_paths(repo: Path) -> None:
    write(repo, {"a.txt": "changed\n", "new dir/odd name.txt": "new\n"})
    (repo / "b.txt").unlink()
    git(repo, "mv", "keep/c.txt", "moved.txt")
    expected = [
        entry("a.txt", "changed\n"),
        entry("b.txt", None),
        entry("keep/c.txt", None),
        entry("moved.txt", "gamma\n"),
        entry("new dir/odd name.txt", "new\n"),
    ]
    assert worktree_digest(str(repo)) == canon.digest(expected)
    assert worktree_digest(str(repo / "keep" / "..")) == canon.digest(expected)


def test_changes_under_ithaca_leave_the_digest_alone(repo: Path) -> None:
    write(repo, {".ithaca/lesson.md": "edited\n", ".ithaca/scratch/notes.md": "new\n"})
    assert worktree_digest(str(repo)) == canon.digest([])


def test_status_entries_parses_every_porcelain_v2_record() -> None:
    output = b"\0".join(
        [
            b"# branch.oid 0123",
            b"1 .M N... 100644 100644 100644 aaa bbb with space.txt",
            b"2 R. N... 100644 100644 100644 aaa bbb R100 new name.txt",
            b"old name.txt",
            b"u UU N... 100644 100644 100644 100644 aaa bbb ccc conflict.txt",
            b"? untracked.txt",
            b"! ignored.log",
            b"",
        ]
    )
    assert list(status_entries(output)) == [
        b"with space.txt",
        b"new name.txt",
        b"old name.txt",
        b"conflict.txt",
        b"untracked.txt",
    ]


def test_outside_git_every_git_field_is_null(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    checkpoint, diagnostics = observe(
        str(plain), session_id=SESSION, label="initial", settings=SETTINGS
    )
    assert {k: checkpoint[k] for k in ("git_head", "worktree_digest", "snapshot_ref")} == {
        "git_head": None,
        "worktree_digest": None,
        "snapshot_ref": None,
    }
    assert checkpoint["restorable"] is False
    assert [d["code"] for d in diagnostics] == ["no_git"]
    assert worktree_digest(str(plain)) is None


def test_snapshot_holds_the_worktree_and_leaves_the_index_alone(repo: Path) -> None:
    write(repo, {"a.txt": "changed\n", "untracked.txt": "u\n", "debug.log": "ignored\n"})
    write(repo, {".ithaca/lesson.md": "edited\n", ".ithaca/scratch.md": "state\n"})
    (repo / "b.txt").unlink()
    git(repo, "add", "a.txt")
    index_before = (repo / ".git" / "index").read_bytes()

    checkpoint, diagnostics = observe(
        str(repo), session_id=SESSION, label="initial", settings=SETTINGS
    )

    ref = f"refs/ithaca/checkpoints/{SESSION}/initial"
    assert (checkpoint["snapshot_ref"], checkpoint["restorable"], diagnostics) == (ref, True, [])
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert git(repo, "diff", "--cached", "--name-only") == "a.txt"
    assert tree_files(repo, ref) == {".gitignore", ".ithaca/lesson.md", "a.txt", "keep/c.txt"} | {
        "untracked.txt"
    }
    assert git(repo, "show", f"{ref}:a.txt") == "changed"
    assert git(repo, "show", f"{ref}:.ithaca/lesson.md") == "lesson"
    assert git(repo, "rev-parse", f"{ref}^") == checkpoint["git_head"]


def test_a_snapshot_runs_nothing_an_embedded_repository_names(repo: Path, tmp_path: Path) -> None:
    """An agent-made repository inside the project, linked as a submodule, with a filter of
    its own: taking the snapshot (the Ulysses tool does at session start) runs none of it,
    and the snapshot keeps the submodule's recorded commit."""
    marker = tmp_path / "RAN"
    inner = repo / "vendor" / "inner"
    inner.mkdir(parents=True)
    git(inner, "init", "-q")
    write(inner, {"x.txt": "x\n", ".gitattributes": "* filter=inner\n"})
    git(inner, "add", "-A")
    git(inner, "commit", "-qm", "inner")
    git(inner, "config", "filter.inner.clean", f"touch {marker}; cat")
    git(inner, "config", "core.fsmonitor", f"touch {marker}; echo")
    git(repo, "-c", "advice.addEmbeddedRepo=false", "add", "vendor/inner")
    later = time.time() + 5
    os.utime(inner / "x.txt", (later, later))

    checkpoint, _ = observe(str(repo), session_id=SESSION, label="initial", settings=SETTINGS)

    assert checkpoint["restorable"] and not marker.exists()
    recorded = git(repo, "rev-parse", ":vendor/inner")
    assert git(repo, "rev-parse", f"{checkpoint['snapshot_ref']}:vendor/inner") == recorded


def test_unborn_branch_has_no_head_and_a_parentless_snapshot(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    write(root, {"first.txt": "one\n"})
    git(tmp_path, "init", "-q", str(root))
    checkpoint, _ = observe(str(root), session_id=SESSION, label="initial", settings=SETTINGS)
    assert checkpoint["git_head"] is None
    assert checkpoint["worktree_digest"] == canon.digest([entry("first.txt", "one\n")])
    assert git(root, "rev-list", "--parents", checkpoint["snapshot_ref"]).count(" ") == 0
    assert tree_files(root, checkpoint["snapshot_ref"]) == {"first.txt"}


def test_linked_worktree_snapshots_without_touching_the_main_index(repo: Path) -> None:
    linked = repo.parent / "linked"
    git(repo, "worktree", "add", "-q", str(linked))
    index_before = (repo / ".git" / "index").read_bytes()
    write(linked, {"a.txt": "in the worktree\n"})
    checkpoint, _ = observe(str(linked), session_id=SESSION, label="initial", settings=SETTINGS)
    assert checkpoint["worktree_digest"] == canon.digest([entry("a.txt", "in the worktree\n")])
    assert git(repo, "show", f"{checkpoint['snapshot_ref']}:a.txt") == "in the worktree"
    assert (repo / ".git" / "index").read_bytes() == index_before


def test_files_over_the_size_limit_make_a_partial_snapshot(repo: Path) -> None:
    write(repo, {"big.bin": b"x" * 4096, "small.txt": "s\n"})
    small_limit = {**SETTINGS, "checkpoint_max_file_mb": 0.001}
    checkpoint, _ = observe(str(repo), session_id=SESSION, label="initial", settings=small_limit)
    assert checkpoint["restorable"] == "partial"
    files = tree_files(repo, checkpoint["snapshot_ref"])
    assert "small.txt" in files and "big.bin" not in files


def test_rollback_restores_the_checkpoint_and_saves_the_present(repo: Path) -> None:
    write(repo, {"a.txt": "at checkpoint\n", "untracked.txt": "u\n"})
    (repo / "b.txt").unlink()
    checkpoint, _ = observe(str(repo), session_id=SESSION, label="checkpoint_1", settings=SETTINGS)

    write(repo, {"a.txt": "later\n", "b.txt": "back again\n", "new/deep/file.txt": "n\n"})
    write(repo, {".ithaca/lesson.md": "committed later\n"})
    (repo / "untracked.txt").unlink()
    (repo / "keep" / "c.txt").unlink()
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "later")
    write(repo, {"uncommitted.txt": "x\n", "debug.log": "ignored\n", ".ithaca/state.md": "s\n"})

    result = rollback(
        str(repo),
        session_id=SESSION,
        checkpoint=checkpoint,
        pre_label="pre_rollback_1",
        settings=SETTINGS,
    )

    assert (repo / "a.txt").read_text() == "at checkpoint\n"
    assert (repo / "untracked.txt").read_text() == "u\n"
    assert (repo / "keep" / "c.txt").read_text() == "gamma\n"
    assert not (repo / "b.txt").exists()
    assert not (repo / "uncommitted.txt").exists() and not (repo / "new").exists()
    assert (repo / "debug.log").exists() and (repo / ".ithaca" / "state.md").exists()
    assert (repo / ".ithaca" / "lesson.md").read_text() == "committed later\n"
    assert git(repo, "rev-parse", "HEAD") == checkpoint["git_head"]
    assert git(repo, "diff", "--cached", "--name-only") == ""
    assert worktree_digest(str(repo)) == checkpoint["worktree_digest"]
    assert result["restored"] == ["a.txt", "keep/c.txt", "untracked.txt"]
    assert result["deleted"] == ["b.txt", "new/deep/file.txt", "uncommitted.txt"]
    assert (result["kept"], result["warnings"]) == ([], [])
    pre = result["pre_rollback"]
    assert pre["label"] == "pre_rollback_1" and pre["restorable"] is True
    assert "uncommitted.txt" in tree_files(repo, pre["snapshot_ref"])


def test_rollback_of_a_partial_snapshot_leaves_big_files_alone(repo: Path) -> None:
    small_limit = {**SETTINGS, "checkpoint_max_file_mb": 0.001}
    write(repo, {"big.bin": b"x" * 4096})
    checkpoint, _ = observe(str(repo), session_id=SESSION, label="initial", settings=small_limit)
    write(repo, {"big.bin": b"y" * 4096, "a.txt": "later\n"})
    result = rollback(
        str(repo), session_id=SESSION, checkpoint=checkpoint, pre_label="pre", settings=small_limit
    )
    assert (repo / "big.bin").read_bytes() == b"y" * 4096
    assert (repo / "a.txt").read_text() == "alpha\n"
    assert result["kept"] == ["big.bin"] and "big.bin" in result["warnings"][0]


def test_rollback_to_an_unborn_branch_empties_it_again(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    write(root, {"first.txt": "one\n"})
    git(tmp_path, "init", "-q", str(root))
    checkpoint, _ = observe(str(root), session_id=SESSION, label="initial", settings=SETTINGS)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "first")
    write(root, {"first.txt": "two\n"})
    rollback(
        str(root), session_id=SESSION, checkpoint=checkpoint, pre_label="pre", settings=SETTINGS
    )
    assert subprocess.run(
        ["git", "-C", str(root), "rev-parse", "-q", "--verify", "HEAD"]
    ).returncode
    assert (root / "first.txt").read_text() == "one\n"
    assert git(root, "status", "--porcelain") == "?? first.txt"


def test_rollback_is_refused_during_a_merge_conflict(repo: Path) -> None:
    checkpoint, _ = observe(str(repo), session_id=SESSION, label="initial", settings=SETTINGS)
    base = git(repo, "branch", "--show-current")
    git(repo, "checkout", "-q", "-b", "other")
    write(repo, {"a.txt": "other side\n"})
    git(repo, "commit", "-q", "-am", "other")
    git(repo, "checkout", "-q", base)
    write(repo, {"a.txt": "this side\n"})
    git(repo, "commit", "-q", "-am", "this")
    merge = subprocess.run(["git", "-C", str(repo), "merge", "-q", "other"], capture_output=True)
    assert merge.returncode != 0
    head = git(repo, "rev-parse", "HEAD")

    with pytest.raises(Refused) as refused:
        rollback(
            str(repo), session_id=SESSION, checkpoint=checkpoint, pre_label="pre", settings=SETTINGS
        )

    assert refused.value.code == "ROLLBACK_UNSAFE"
    assert refused.value.details["in_progress"] == ["a merge"]
    assert git(repo, "rev-parse", "HEAD") == head
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/ithaca") == (
        f"refs/ithaca/checkpoints/{SESSION}/initial"
    )


@pytest.mark.parametrize(
    "marker", ["rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD", "BISECT_LOG"]
)
def test_rollback_is_refused_while_git_is_mid_operation(repo: Path, marker: str) -> None:
    checkpoint, _ = observe(str(repo), session_id=SESSION, label="initial", settings=SETTINGS)
    if marker.startswith("rebase"):
        (repo / ".git" / marker).mkdir()
    else:
        (repo / ".git" / marker).write_text("")
    with pytest.raises(Refused) as refused:
        rollback(
            str(repo), session_id=SESSION, checkpoint=checkpoint, pre_label="pre", settings=SETTINGS
        )
    assert refused.value.code == "ROLLBACK_UNSAFE"


@pytest.mark.parametrize("loss", ["no_snapshot", "ref_deleted", "ref_moved"])
def test_rollback_needs_the_checkpoint_snapshot(repo: Path, loss: str) -> None:
    checkpoint, _ = observe(
        str(repo),
        session_id=SESSION,
        label="initial",
        settings=SETTINGS,
        snapshot=loss != "no_snapshot",
    )
    if loss == "ref_deleted":
        git(repo, "update-ref", "-d", checkpoint["snapshot_ref"])
    elif loss == "ref_moved":
        checkpoint["git_head"] = "0" * 40  # the ref now holds a snapshot of another commit
    write(repo, {"a.txt": "later\n"})
    with pytest.raises(Refused) as refused:
        rollback(
            str(repo), session_id=SESSION, checkpoint=checkpoint, pre_label="pre", settings=SETTINGS
        )
    assert refused.value.code == "CHECKPOINT_NOT_RESTORABLE"
    assert (repo / "a.txt").read_text() == "later\n"


def test_a_rollback_stopped_half_way_is_a_coded_error_naming_the_saved_worktree(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checkpoint, _ = observe(str(repo), session_id=SESSION, label="initial", settings=SETTINGS)
    write(repo, {"a.txt": "later\n"})

    def fail(*_args: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(checkpoints, "_restore", fail)
    with pytest.raises(IthacaError) as failed:
        rollback(
            str(repo), session_id=SESSION, checkpoint=checkpoint, pre_label="pre", settings=SETTINGS
        )

    assert failed.value.code == "GIT_FAILED"
    saved = failed.value.details["pre_rollback"]["snapshot_ref"]
    assert git(repo, "show", f"{saved}:a.txt") == "later"


def test_labels_must_fit_in_a_ref_name(repo: Path) -> None:
    with pytest.raises(InvalidInput) as invalid:
        observe(str(repo), session_id=SESSION, label="../escape", settings=SETTINGS)
    assert invalid.value.details["pointer"] == "/label"
