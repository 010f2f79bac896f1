"""The content digest of a project (``verification.digest``) sees every change of content,
whatever Git says, and nothing else; its stat cache spares unchanged files without ever
standing in for their content."""

from __future__ import annotations

import json
import marshal
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from ithaca.verification import digest
from ithaca.verification.digest import changed, tree

# Root, meeting file permissions as every other user does (util-linux's setpriv).
WITHOUT_OVERRIDE = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def repository(root: Path, files: dict[str, str]) -> Path:
    """A Git repository at ``root`` with ``files`` committed."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "files")
    return root


def project(tmp_path: Path) -> Path:
    return repository(
        tmp_path / "project",
        {"app.py": "print('hello')\n", "src/lib.py": "VALUE = 1\n", "README": "read me\n"},
    )


class Reads:
    """Counts the files ``tree`` reads, by wrapping the one function that reads them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real = digest._hash_file

        def counted(full: str, new: type) -> object:
            self.paths.append(full)
            return real(full, new)

        monkeypatch.setattr(digest, "_hash_file", counted)

    def take(self) -> list[str]:
        taken, self.paths = self.paths, []
        return taken


@pytest.fixture
def no_racy_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust a cached entry for any file changed before the cache's walk began, so a test
    need not wait two seconds for its files to age."""
    monkeypatch.setattr(digest, "RACY_NS", 0)


# What must move the digest -------------------------------------------------------------


def test_entries_name_each_kind_of_file(tmp_path):
    root = tmp_path / "p"
    (root / "sub").mkdir(parents=True)
    (root / "plain.txt").write_bytes(b"abc")
    (root / "tool.sh").write_bytes(b"#!/bin/sh\n")
    (root / "tool.sh").chmod(0o755)
    (root / "link").symlink_to("plain.txt")
    (root / "sub" / "deep.txt").write_bytes(b"")
    got = tree(str(root))
    abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    tool = digest.sha256(b"#!/bin/sh\n").hexdigest()
    assert got.files == {
        "plain.txt": abc,
        "tool.sh": "x" + tool,
        "link": "lplain.txt",
        "sub/deep.txt": empty,
    }
    assert len(got.digest) == 64 and int(got.digest, 16) >= 0
    assert tree(str(root)) == got


def test_a_content_change_with_size_and_times_put_back_is_seen(tmp_path, no_racy_window):
    root = project(tmp_path)
    cache = str(tmp_path / "cache")
    before = tree(str(root), cache=cache)
    target = root / "src" / "lib.py"
    stat = target.stat()
    target.write_text("VALUE = 2\n")
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    after = tree(str(root), cache=cache)
    assert after.digest != before.digest
    assert changed(before.files, after.files) == ["src/lib.py"]
    assert after == tree(str(root))  # the cache gave what reading everything gives


def test_a_new_file_in_an_ignored_folder_is_seen(tmp_path):
    root = project(tmp_path)
    (root / ".gitignore").write_text("build/\n*.log\n")
    before = tree(str(root))
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("hidden = True\n")
    (root / "debug.log").write_text("x\n")
    assert git(root, "status", "--porcelain", "--", "build", "debug.log") == ""
    after = tree(str(root))
    assert changed(before.files, after.files) == ["build/out.py", "debug.log"]
    assert after.digest != before.digest


def test_a_change_in_an_embedded_repository_is_seen_and_its_git_folder_is_not(tmp_path):
    root = project(tmp_path)
    inner = repository(root / "vendor" / "inner", {"inner.py": "A = 1\n"})
    first = tree(str(root))
    assert "vendor/inner/inner.py" in first.files
    assert not any("/.git/" in path or path.endswith("/.git") for path in first.files)

    (inner / "inner.py").write_text("A = 2\n")
    second = tree(str(root))
    assert changed(first.files, second.files) == ["vendor/inner/inner.py"]

    git(inner, "commit", "-qam", "inner change")  # only vendor/inner/.git moves
    assert tree(str(root)) == second


@pytest.mark.parametrize("flag", ["--assume-unchanged", "--skip-worktree"])
def test_a_file_hidden_from_git_status_is_seen(tmp_path, flag, no_racy_window):
    root = project(tmp_path)
    cache = str(tmp_path / "cache")
    before = tree(str(root), cache=cache)
    git(root, "update-index", flag, "app.py")
    (root / "app.py").write_text("print('changed')\n")
    assert git(root, "status", "--porcelain") == ""  # Git says nothing changed
    after = tree(str(root), cache=cache)
    assert changed(before.files, after.files) == ["app.py"]


def test_making_a_file_executable_is_seen(tmp_path):
    root = project(tmp_path)
    before = tree(str(root))
    (root / "app.py").chmod(0o755)
    after = tree(str(root))
    assert after.files["app.py"] == "x" + before.files["app.py"]
    assert after.digest != before.digest


def test_a_symbolic_link_is_its_text_never_followed(tmp_path):
    root = project(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("S = 1\n")
    (root / "to_outside").symlink_to(outside)
    (root / "current").symlink_to("app.py")
    before = tree(str(root))
    assert before.files["to_outside"] == "l" + str(outside)
    assert not any(path.startswith("to_outside/") for path in before.files)

    (outside / "secret.py").write_text("S = 2\n")  # outside the project: not its content
    assert tree(str(root)) == before

    (root / "current").unlink()
    (root / "current").symlink_to("README")
    after = tree(str(root))
    assert changed(before.files, after.files) == ["current"]
    assert after.files["current"] == "lREADME"


def test_a_rename_is_seen(tmp_path):
    root = project(tmp_path)
    before = tree(str(root))
    (root / "src" / "lib.py").rename(root / "src" / "library.py")
    after = tree(str(root))
    assert after.digest != before.digest
    assert changed(before.files, after.files) == ["src/lib.py", "src/library.py"]
    assert after.files["src/library.py"] == before.files["src/lib.py"]


# What must not move it -----------------------------------------------------------------


def test_caches_and_git_internals_do_not_count(tmp_path):
    root = project(tmp_path)
    before = tree(str(root))
    for folder in sorted(digest.SKIPPED):
        (root / "src" / folder).mkdir(exist_ok=True)
        (root / "src" / folder / "noise.pyc").write_bytes(b"\0noise")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "app.cpython-311.pyc").write_bytes(b"\0compiled")
    (root / ".ithaca").mkdir()
    (root / ".ithaca" / "state.db").write_bytes(b"state")
    git(root, "commit", "-q", "--allow-empty", "-m", "only .git moves")
    git(root, "tag", "v1")
    (root / "empty" / "folders").mkdir(parents=True)  # empty folders hold no content
    assert tree(str(root)) == before


def test_a_file_named_git_is_a_link_to_a_repository_and_is_skipped(tmp_path):
    root = project(tmp_path)
    before = tree(str(root))
    (root / "worktree").mkdir()
    (root / "worktree" / ".git").write_text("gitdir: /elsewhere/.git/worktrees/w\n")
    assert tree(str(root)) == before


def test_reading_files_changes_nothing_and_reads_nothing_again(
    tmp_path, monkeypatch, no_racy_window
):
    root = project(tmp_path)
    cache = str(tmp_path / "cache")
    before = tree(str(root), cache=cache)
    reads = Reads(monkeypatch)
    for path in root.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            path.read_bytes()
    assert tree(str(root), cache=cache) == before
    assert reads.take() == []


def test_sockets_and_fifos_hold_no_content(tmp_path):
    root = project(tmp_path)
    before = tree(str(root))
    os.mkfifo(root / "pipe")  # reading it would block: it is never opened
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(root / "sock"))
        assert tree(str(root)) == before
    finally:
        server.close()


def test_user_skips_are_folder_names_or_relative_folder_paths(tmp_path):
    root = project(tmp_path)
    for folder in ("node_modules", "web/node_modules", "data/big", "other/data/big"):
        (root / folder).mkdir(parents=True)
        (root / folder / "blob.bin").write_bytes(b"blob")
    (root / "data" / "small.csv").write_text("a,b\n")
    got = tree(str(root), skip=["node_modules", "./data/big/"])
    assert sorted(path for path in got.files if path not in {"app.py", "README"}) == [
        "data/small.csv",
        "other/data/big/blob.bin",  # a path is taken from the root, not at any depth
        "src/lib.py",
    ]
    assert tree(str(root), skip=["node_modules", "data/big"]).digest == got.digest
    assert tree(str(root)).digest != got.digest


# The stat cache ------------------------------------------------------------------------


def test_the_cache_spares_unchanged_files_and_reads_changed_ones(
    tmp_path, monkeypatch, no_racy_window
):
    root = project(tmp_path)
    cache = str(tmp_path / "cache")
    reads = Reads(monkeypatch)
    first = tree(str(root), cache=cache)
    assert len(reads.take()) == 3
    assert Path(cache).is_file()

    assert tree(str(root), cache=cache) == first
    assert reads.take() == []  # nothing read again

    (root / "README").write_text("read me again\n")
    (root / "new.py").write_text("NEW = 1\n")
    third = tree(str(root), cache=cache)
    assert sorted(os.path.relpath(path, root) for path in reads.take()) == ["README", "new.py"]
    assert changed(first.files, third.files) == ["README", "new.py"]
    assert third == tree(str(root))  # the cache gave what reading everything gives
    reads.take()

    (root / "src" / "lib.py").unlink()
    fourth = tree(str(root), cache=cache)
    assert reads.take() == []
    assert changed(third.files, fourth.files) == ["src/lib.py"]
    assert fourth == tree(str(root))


def test_a_digest_past_its_deadline_keeps_what_it_read_for_the_next_try(
    tmp_path, monkeypatch, no_racy_window
):
    """A hook's first digest of a large project stops at its deadline; the files it read
    are cached, so the next digest reads only the rest and gives the whole tree."""
    root = tmp_path / "big"
    root.mkdir()
    for number in range(200):
        (root / f"f{number:03d}.txt").write_text(f"file {number}\n")
    cache = str(tmp_path / "cache")
    clock = iter([0.0, 0.0, 10.0])  # the deadline (5) passes at the third look
    monkeypatch.setattr(digest, "monotonic", lambda: next(clock))
    reads = Reads(monkeypatch)

    with pytest.raises(digest.Unfinished):
        tree(str(root), cache=cache, until=5.0)

    assert len(reads.take()) == 128  # two rounds of 64 before the deadline was seen
    finished = tree(str(root), cache=cache)
    assert len(reads.take()) == 72
    assert finished == tree(str(root))


def test_files_changed_within_the_racy_window_are_read_again(tmp_path, monkeypatch):
    root = project(tmp_path)
    cache = str(tmp_path / "cache")
    reads = Reads(monkeypatch)
    tree(str(root), cache=cache)
    assert len(reads.take()) == 3
    # Just written, the files are in the window of the cache's own time: read again.
    tree(str(root), cache=cache)
    assert len(reads.take()) == 3


def test_the_racy_rule_catches_a_change_its_stat_key_missed(tmp_path, monkeypatch):
    """A file changed in the same clock tick as it was hashed keeps its key; only the
    racy rule makes the next run read it again. Played by giving the cache the key of
    the file as it is now, with the hash of what it held before."""
    root = project(tmp_path)
    cache = str(tmp_path / "cache")
    before = tree(str(root), cache=cache)
    target = root / "app.py"
    target.write_text("print('same tick')\n")
    now = target.stat()
    key = (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns, now.st_ctime_ns, now.st_mode)
    loaded = digest._load(cache)
    assert loaded is not None
    began, old_digest, files, keys = loaded
    keys["app.py"] = key

    def forge(walk_began: int) -> None:
        value = (digest.CACHE_FORMAT, walk_began, old_digest, files, keys)
        Path(cache).write_bytes(marshal.dumps(value))

    reads = Reads(monkeypatch)
    forge(now.st_ctime_ns)  # the cache's walk began in the tick the file changed
    after = tree(str(root), cache=cache)
    assert "app.py" in [os.path.relpath(path, root) for path in reads.take()]
    assert changed(before.files, after.files) == ["app.py"]

    # The same forged cache, dated well after the change: trusted (which is why the rule
    # must date it by when its walk began, not by when it was written).
    forge(now.st_ctime_ns + digest.RACY_NS + 1)
    stale = tree(str(root), cache=cache)
    assert reads.take() == []
    assert stale.files["app.py"] == before.files["app.py"]


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"not marshal at all \xff\x00",
        marshal.dumps(("ithaca.verification.digest/0", 0, "", {}, {})),
        marshal.dumps(("ithaca.verification.digest/1", "x", 1, [], ())),
        marshal.dumps([1, 2, 3]),
    ],
)
def test_a_corrupt_or_foreign_cache_is_ignored_and_rebuilt(tmp_path, content, no_racy_window):
    root = project(tmp_path)
    cache = tmp_path / "cache"
    cache.write_bytes(content)
    got = tree(str(root), cache=str(cache))
    assert got == tree(str(root))
    assert digest._load(str(cache)) is not None  # rewritten in this version's format


def test_a_cache_with_wrong_entries_is_not_trusted(tmp_path, no_racy_window):
    root = project(tmp_path)
    cache = tmp_path / "cache"
    honest = tree(str(root), cache=str(cache))
    loaded = digest._load(str(cache))
    assert loaded is not None
    began, old_digest, files, keys = loaded
    keys = {path: [*key] for path, key in keys.items()}  # lists never match a stat key
    files = {path: 7 for path in files}
    cache.write_bytes(marshal.dumps((digest.CACHE_FORMAT, began, "0" * 64, files, keys)))
    assert tree(str(root), cache=str(cache)) == honest


def test_a_cache_that_cannot_be_written_is_no_error(tmp_path):
    root = project(tmp_path)
    got = tree(str(root), cache=str(tmp_path / "missing" / "cache"))
    assert got == tree(str(root))
    assert not (tmp_path / "missing").exists()
    leftovers = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_a_root_that_cannot_be_listed_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        tree(str(tmp_path / "nowhere"))


def test_unreadable_files_and_folders_are_marked_not_raised(tmp_path):
    root = project(tmp_path)
    (root / "locked.py").write_text("L = 1\n")
    (root / "locked.py").chmod(0)
    (root / "closed").mkdir()
    (root / "closed" / "inside.py").write_text("I = 1\n")
    (root / "closed").chmod(0)
    probe = (
        "import json, sys\n"
        "from ithaca.verification.digest import tree\n"
        "print(json.dumps(tree(sys.argv[1]).files))\n"
    )
    try:
        done = subprocess.run(
            [*WITHOUT_OVERRIDE, sys.executable, "-c", probe, str(root)],
            capture_output=True,
            text=True,
            check=True,
        )
    finally:
        (root / "closed").chmod(0o755)
    files = json.loads(done.stdout)
    assert files["locked.py"] == "?"
    assert files["closed"] == "?"
    assert "closed/inside.py" not in files
    assert files["app.py"] == tree(str(root)).files["app.py"]


# The interface ---------------------------------------------------------------------


def test_changed_lists_added_removed_and_differing_paths_sorted():
    before = {"a": "1", "b": "2", "c": "3", "z": "9"}
    after = {"b": "2", "c": "4", "d": "5", "z": "9"}
    assert changed(before, after) == ["a", "c", "d"]
    assert changed(after, before) == ["a", "c", "d"]
    assert changed(before, dict(before)) == []


def test_a_tree_cannot_be_changed(tmp_path):
    got = tree(str(project(tmp_path)))
    with pytest.raises(AttributeError):
        got.digest = "0" * 64
    assert repr(got) == f"Tree(digest={got.digest!r}, files=<3 entries>)"
    assert {got} == {tree(str(tmp_path / "project"))}


def test_the_module_stays_light_for_a_hook(tmp_path):
    probe = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "from ithaca.verification import digest\n"
        "print(' '.join(sorted(set(sys.modules) - before)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = set(done.stdout.split())
    heavy = {"hashlib", "dataclasses", "typing", "json", "re", "threading", "collections"}
    assert loaded & heavy == set()
