"""Reading a protected file: its bytes, and only where a singly linked regular file stands."""

from __future__ import annotations

import hashlib
import os
import socket
import threading
from pathlib import Path

import pytest

from ithaca.kernel import regular


def test_a_regular_file_is_its_bytes_and_their_digest(tmp_path):
    path = tmp_path / "team.json"
    path.write_bytes(b'{"id": "team.rule"}')
    token, data = regular.read(str(path))
    assert data == b'{"id": "team.rule"}'
    assert token == hashlib.sha256(data).hexdigest()
    assert regular.load(str(path)) == (regular.REGULAR, data)


def test_nothing_there_is_none(tmp_path):
    assert regular.read(str(tmp_path / "missing.json")) == (None, None)
    assert regular.read(str(tmp_path / "missing" / "team.json")) == (None, None)


def test_a_link_to_an_identical_copy_is_not_read_through(tmp_path):
    copy = tmp_path / "copy.json"
    copy.write_text("{}")
    (tmp_path / "team.json").symlink_to(copy)
    assert regular.read(str(tmp_path / "team.json")) == (regular.SYMLINK, None)


def test_a_second_hard_link_is_not_a_regular_file_with_one_name(tmp_path):
    path = tmp_path / "team.json"
    path.write_text("{}")
    os.link(path, tmp_path / "elsewhere.json")
    assert regular.read(str(path)) == (regular.HARD_LINK, None)


def test_a_fifo_is_seen_and_never_waited_on(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    os.mkfifo(path)
    answers: list[tuple[str | None, bytes | None]] = []
    reader = threading.Thread(target=lambda: answers.append(regular.read(str(path))))
    reader.start()
    reader.join(timeout=10)
    if reader.is_alive():  # free the reader before failing
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail("reading a FIFO waited for a writer")
    assert answers == [(regular.FIFO, None)]


def test_a_socket_and_a_folder_are_what_they_are(tmp_path):
    path = tmp_path / "s.json"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        assert regular.read(str(path)) == (regular.SOCKET, None)
    finally:
        server.close()
    (tmp_path / "folder.json").mkdir()
    assert regular.read(str(tmp_path / "folder.json")) == (regular.FOLDER, None)
    assert all(regular.odd(kind) for kind in regular.KINDS)
    assert not regular.odd(None) and not regular.odd(hashlib.sha256(b"").hexdigest())


def test_the_users_own_file_is_read_through_a_link_and_the_token_names_it(tmp_path):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "config.toml"
    target.write_text("[protocols]\n")
    link = tmp_path / "config.toml"
    link.symlink_to(target)
    token, data = regular.read_through(str(link))
    assert data == b"[protocols]\n"
    assert token is not None and str(target) in token
    assert token.endswith(hashlib.sha256(data).hexdigest())
    target.write_text("[protocols]\nstrict = false\n")
    assert regular.read_through(str(link))[0] != token  # an edit through the link shows
    os.mkfifo(dotfiles / "fifo")
    link.unlink()
    link.symlink_to(dotfiles / "fifo")
    assert regular.read_through(str(link)) == (regular.FIFO, None)
    link.unlink()
    link.symlink_to(dotfiles / "gone")
    assert regular.read_through(str(link)) == (None, None)


def test_rule_files_are_the_json_entries_whatever_they_are_but_not_hidden_ones(tmp_path):
    folder = tmp_path / "protocols"
    folder.mkdir()
    (folder / "team.b.json").write_text("{}")
    (folder / "team.a.json").symlink_to(folder / "team.b.json")
    (folder / "notes.md").write_text("")
    (folder / ".#team.b.json").symlink_to("someone@host.1234")  # an editor's lock
    assert regular.rule_files(str(folder)) == (None, ["team.a.json", "team.b.json"])
    assert regular.rule_files(str(tmp_path / "missing")) == (None, [])
    linked = tmp_path / "linked"
    linked.symlink_to(folder)
    assert regular.rule_files(str(linked)) == (regular.SYMLINK, [])
