from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ithaca.kernel import files
from ithaca.kernel.errors import Refused


def _tree(root: Path) -> list[str]:
    """Every entry below ``root`` (symlinks not followed), relative and sorted."""
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def _assert_refused(excinfo: pytest.ExceptionInfo[Refused], path: str, problem: str) -> None:
    assert excinfo.value.code == "UNSAFE_PATH"
    assert excinfo.value.details == {"path": path, "problem": problem}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    return project


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    elsewhere = tmp_path / "outside"
    elsewhere.mkdir()
    return elsewhere


def test_write_creates_missing_folders_and_returns_the_target(root: Path) -> None:
    target = files.write_atomic(root, "a/b/c.json", b'{"x":1}')

    assert target == root.resolve() / "a" / "b" / "c.json"
    assert target.read_bytes() == b'{"x":1}'


def test_write_encodes_text_as_utf8(root: Path) -> None:
    files.write_atomic(root, "note.md", "Ithaca — home\n")

    assert (root / "note.md").read_bytes() == "Ithaca — home\n".encode()


def test_overwrite_replaces_the_whole_content_and_leaves_no_temp_file(root: Path) -> None:
    files.write_atomic(root, "ledger.json", b"a much longer first version")
    files.write_atomic(root, "ledger.json", b"short")

    assert (root / "ledger.json").read_bytes() == b"short"
    assert _tree(root) == ["ledger.json"]


def test_write_fsyncs_the_data_and_the_folder_before_returning(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", recording_fsync)
    files.write_atomic(root, "f", b"x")

    assert synced == ["file", "folder"]


def test_write_applies_the_requested_mode(root: Path) -> None:
    target = files.write_atomic(root, "private", b"x", mode=0o600)

    assert target.stat().st_mode & 0o777 == 0o600


def test_write_creates_a_missing_root(tmp_path: Path) -> None:
    target = files.write_atomic(tmp_path / "new" / "root", "f", b"x")

    assert target.read_bytes() == b"x"


def test_failed_rename_keeps_the_old_content_and_leaves_no_temp_file(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files.write_atomic(root, "state.json", b"old")

    def failing_replace(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        files.write_atomic(root, "state.json", b"new")

    assert (root / "state.json").read_bytes() == b"old"
    assert _tree(root) == ["state.json"]


def test_data_of_the_wrong_type_writes_nothing_and_leaves_no_temp_file(root: Path) -> None:
    with pytest.raises(TypeError):
        files.write_atomic(root, "state.json", 42)  # type: ignore[arg-type]

    assert _tree(root) == []


def test_dotdot_inside_the_root_is_allowed(root: Path) -> None:
    target = files.write_atomic(root, "a/../b.txt", b"x")

    assert target == root.resolve() / "b.txt"
    assert target.read_bytes() == b"x"


@pytest.mark.parametrize("relpath", ["../x", "a/../../x", "./../project/x"])
def test_traversal_above_the_root_is_refused_and_writes_nothing(
    root: Path, outside: Path, relpath: str
) -> None:
    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, relpath, b"x")

    _assert_refused(excinfo, relpath, "TRAVERSAL")
    assert _tree(root.parent) == ["outside", "project"]


def test_absolute_path_outside_the_root_is_refused(root: Path, outside: Path) -> None:
    target = str(outside / "x")

    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, target, b"x")

    _assert_refused(excinfo, target, "OUTSIDE_ROOT")
    assert _tree(outside) == []


def test_absolute_path_inside_the_root_is_written(root: Path) -> None:
    target = files.write_atomic(root, root / "sub" / "f", b"x")

    assert target == root.resolve() / "sub" / "f"
    assert target.read_bytes() == b"x"


def test_absolute_path_through_a_symlinked_root_is_accepted(tmp_path: Path, root: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(root)

    target = files.write_atomic(alias, root / "f", b"x")

    assert (root / "f").read_bytes() == b"x"
    assert target == root.resolve() / "f"


def test_nul_byte_is_refused(root: Path) -> None:
    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, "a\0b", b"x")

    _assert_refused(excinfo, "a\0b", "NUL_BYTE")
    assert _tree(root) == []


@pytest.mark.parametrize("relpath", ["", ".", "a/.."])
def test_a_path_naming_the_root_itself_is_refused(root: Path, relpath: str) -> None:
    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, relpath, b"x")

    _assert_refused(excinfo, relpath, "EMPTY_PATH")


def test_symlinked_folder_pointing_outside_is_refused_and_writes_nothing(
    root: Path, outside: Path
) -> None:
    (root / "link").symlink_to(outside, target_is_directory=True)

    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, "link/escaped.txt", b"x")

    _assert_refused(excinfo, "link/escaped.txt", "SYMLINK")
    assert _tree(outside) == []


def test_symlinked_folder_deeper_on_the_way_is_refused(root: Path, outside: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "link").symlink_to(outside, target_is_directory=True)

    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, "a/link/new/f.txt", b"x")

    _assert_refused(excinfo, "a/link/new/f.txt", "SYMLINK")
    assert _tree(outside) == []


def test_symlink_at_the_target_is_refused_and_its_destination_untouched(
    root: Path, outside: Path
) -> None:
    victim = outside / "victim.txt"
    victim.write_bytes(b"original")
    (root / "f.txt").symlink_to(victim)

    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, "f.txt", b"overwritten")

    _assert_refused(excinfo, "f.txt", "SYMLINK")
    assert victim.read_bytes() == b"original"
    assert (root / "f.txt").is_symlink()
    assert _tree(root) == ["f.txt"]


def test_a_file_on_the_way_is_refused(root: Path) -> None:
    (root / "plain").write_bytes(b"")

    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, "plain/f.txt", b"x")

    _assert_refused(excinfo, "plain/f.txt", "NOT_A_DIRECTORY")


def test_a_folder_at_the_target_is_refused(root: Path) -> None:
    (root / "folder").mkdir()

    with pytest.raises(Refused) as excinfo:
        files.write_atomic(root, "folder", b"x")

    _assert_refused(excinfo, "folder", "IS_A_DIRECTORY")
    assert _tree(root) == ["folder"]


def test_resolve_returns_the_absolute_target_without_creating_anything(root: Path) -> None:
    assert files.resolve_confined(root, "x/y/z.json") == root.resolve() / "x" / "y" / "z.json"
    assert _tree(root) == []


def test_resolve_refuses_a_symlinked_folder_and_a_symlinked_target(
    root: Path, outside: Path
) -> None:
    (root / "dir").symlink_to(outside, target_is_directory=True)
    (root / "file").symlink_to(outside / "missing")

    with pytest.raises(Refused) as folder_refusal:
        files.resolve_confined(root, "dir/x")
    with pytest.raises(Refused) as target_refusal:
        files.resolve_confined(root, "file")

    _assert_refused(folder_refusal, "dir/x", "SYMLINK")
    _assert_refused(target_refusal, "file", "SYMLINK")


def test_resolve_refuses_traversal_and_outside_paths(root: Path, outside: Path) -> None:
    with pytest.raises(Refused) as traversal:
        files.resolve_confined(root, "../outside/x")
    with pytest.raises(Refused) as absolute:
        files.resolve_confined(root, outside / "x")

    _assert_refused(traversal, "../outside/x", "TRAVERSAL")
    _assert_refused(absolute, str(outside / "x"), "OUTSIDE_ROOT")


def test_remove_deletes_the_file_and_reports_it(root: Path) -> None:
    files.write_atomic(root, "a/f", b"x")

    assert files.remove_confined(root, "a/f") is True
    assert _tree(root) == ["a"]


def test_remove_of_a_missing_file_reports_nothing_removed(root: Path) -> None:
    assert files.remove_confined(root, "nope/f") is False
    assert files.remove_confined(root, "f") is False


def test_remove_refuses_a_symlink_and_keeps_its_destination(root: Path, outside: Path) -> None:
    victim = outside / "victim.txt"
    victim.write_bytes(b"original")
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "f").symlink_to(victim)

    with pytest.raises(Refused) as through_folder:
        files.remove_confined(root, "link/victim.txt")
    with pytest.raises(Refused) as at_target:
        files.remove_confined(root, "f")

    _assert_refused(through_folder, "link/victim.txt", "SYMLINK")
    _assert_refused(at_target, "f", "SYMLINK")
    assert victim.read_bytes() == b"original"
    assert os.path.islink(root / "f")


def test_remove_refuses_traversal(root: Path, outside: Path) -> None:
    (outside / "f").write_bytes(b"x")

    with pytest.raises(Refused) as excinfo:
        files.remove_confined(root, "../outside/f")

    _assert_refused(excinfo, "../outside/f", "TRAVERSAL")
    assert (outside / "f").exists()
