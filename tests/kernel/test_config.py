"""Configuration: precedence of the three files and strict keys."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from ithaca.kernel import config
from ithaca.kernel.errors import InvalidInput


@pytest.fixture
def layers(tmp_path, monkeypatch):
    home = tmp_path / "home"
    state = tmp_path / "repo" / ".ithaca"
    (state / ".runtime").mkdir(parents=True)
    home.mkdir()
    monkeypatch.setenv("ITHACA_HOME", str(home))
    return home / "config.toml", state / "config.toml", state / ".runtime" / "config.toml", state


def test_defaults_apply_without_any_file(layers):
    loaded = config.load(layers[3])
    assert loaded["protocols"]["strict"] is True
    assert loaded["protocols"]["default_workflow"] is None  # the coding fallback applies
    assert loaded["protocols"]["approval_ttl_seconds"] == 900


def test_local_beats_team_beats_user(layers):
    user, team, local, state = layers
    user.write_text('user_id = "dev-7"\n[protocols]\nproject_id = "u"\nclient_id = "u"\n')
    team.write_text('[protocols]\nproject_id = "team"\nstrict = false\n')
    local.write_text("[protocols]\nstrict = true\n")
    loaded = config.load(state)
    assert loaded["user_id"] == "dev-7"
    assert loaded["protocols"]["client_id"] == "u"
    assert loaded["protocols"]["project_id"] == "team"
    assert loaded["protocols"]["strict"] is True


@pytest.mark.parametrize(
    "text",
    [
        "[protocols]\nstrickt = true\n",
        "[protcols]\nstrict = true\n",
        "[protocols]\nstrict = 1\n",
        "[protocols]\napproval_ttl_seconds = true\n",
        "[protocols\n",
    ],
)
def test_a_typo_or_wrong_type_is_invalid_config(layers, text):
    layers[1].write_text(text)
    with pytest.raises(InvalidInput) as raised:
        config.load(layers[3])
    assert raised.value.code == "INVALID_CONFIG"


def test_user_id_is_only_accepted_in_the_users_own_file(layers):
    layers[1].write_text('user_id = "someone-else"\n')
    with pytest.raises(InvalidInput) as raised:
        config.load(layers[3])
    assert raised.value.code == "INVALID_CONFIG"


def test_a_changed_file_is_read_again_after_the_result_was_cached(layers):
    team, state = layers[1], layers[3]
    team.write_text("[protocols]\nstrict = false\n")
    assert config.load(state)["protocols"]["strict"] is False
    assert (state / ".runtime" / config.CACHE_NAME).is_file()
    team.write_text("[protocols]\nstrict = true\n\n")
    assert config.load(state)["protocols"]["strict"] is True


def test_a_cached_configuration_is_loaded_without_parsing_toml(layers):
    import subprocess
    import sys

    team, state = layers[1], layers[3]
    team.write_text('[protocols]\nproject_id = "portal"\n')
    config.load(state)
    probe = (
        "import sys\nfrom ithaca.kernel import config\n"
        f"loaded = config.load({str(state)!r})\n"
        "print(loaded['protocols']['project_id'], 'tomllib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.split() == ["portal", "False"]


def test_a_broken_file_is_refused_even_when_an_older_result_was_cached(layers):
    team, state = layers[1], layers[3]
    team.write_text("[protocols]\nstrict = false\n")
    config.load(state)
    team.write_text("[protocols]\nstrict = nope\n")
    with pytest.raises(InvalidInput):
        config.load(state)


@pytest.mark.parametrize(
    "text",
    [
        "[protocols]\napproval_ttl_seconds = -5\n",
        "[protocols]\napproval_ttl_seconds = 99999999999\n",
        '[protocols]\nworkflows = ["Bad Name"]\n',
        '[protocols]\nmcp_server_name = "my server"\n',
        '[protocols]\nproject_id = ""\n',
    ],
)
def test_values_outside_their_range_are_invalid_config(layers, text):
    layers[1].write_text(text)
    with pytest.raises(InvalidInput) as raised:
        config.load(layers[3])
    assert raised.value.code == "INVALID_CONFIG"


def test_an_edit_that_keeps_size_and_modification_time_is_read_again(layers):
    team, state = layers[1], layers[3]
    team.write_text('[protocols]\nproject_id = "aaaa"\n')
    assert config.load(state)["protocols"]["project_id"] == "aaaa"
    before = team.stat()
    with open(team, "r+b") as handle:  # in place: the same inode
        handle.write(b'[protocols]\nproject_id = "bbbb"\n')
    os.utime(team, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = team.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (
        before.st_ino,
        before.st_size,
        before.st_mtime_ns,
    )
    assert config.load(state)["protocols"]["project_id"] == "bbbb"


@pytest.mark.parametrize("make", ["symlink", "hard link", "fifo", "folder"])
def test_a_team_layer_that_is_no_regular_file_is_invalid_config(layers, tmp_path, make):
    team, state = layers[1], layers[3]
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text("[protocols]\nstrict = false\n")
    if make == "symlink":
        team.symlink_to(elsewhere)
    elif make == "hard link":
        os.link(elsewhere, team)
    elif make == "fifo":
        os.mkfifo(team)  # a reader that opened it would wait for a writer for ever
    else:
        team.mkdir()
    with pytest.raises(InvalidInput) as raised:
        config.load(state)
    assert raised.value.code == "INVALID_CONFIG"
    assert "not a regular file" in raised.value.message and str(team) in raised.value.message


def test_the_users_own_file_may_be_a_link_and_is_read_through_it(layers, tmp_path):
    user, state = layers[0], layers[3]
    dotfiles = tmp_path / "dotfiles.toml"
    dotfiles.write_text('[protocols]\nclient_id = "mine"\n')
    user.symlink_to(dotfiles)
    assert config.load(state)["protocols"]["client_id"] == "mine"
    dotfiles.write_text('[protocols]\nclient_id = "edited"\n')
    assert config.load(state)["protocols"]["client_id"] == "edited"


def forge(state, **protocols):
    """Rewrite the cached result under its own key, as a process other than Ithaca could."""
    cache = state / ".runtime" / config.CACHE_NAME
    stored = json.loads(cache.read_text())
    stored["config"]["protocols"].update(protocols)
    cache.write_text(json.dumps(stored))


def test_a_forged_cache_is_found_and_rebuilt_from_the_files(layers):
    team, state = layers[1], layers[3]
    team.write_text("[protocols]\nstrict = true\n")
    config.load(state)
    forge(state, strict=False, read_only_tools=["*"])
    problem = config.audit(state)
    assert problem is not None and "do not give" in problem
    assert config.load(state)["protocols"]["strict"] is True
    assert config.load(state)["protocols"]["read_only_tools"] == []
    assert config.audit(state) is None  # rebuilt: nothing more to say


def test_a_cache_that_differs_only_in_a_type_is_forged_too(layers):
    team, state = layers[1], layers[3]
    team.write_text("[protocols]\nstrict = true\n")
    config.load(state)
    forge(state, strict=1)  # equal to True in Python, not in TOML
    assert config.audit(state) is not None


def test_a_stale_or_missing_cache_is_only_rebuilt(layers):
    team, state = layers[1], layers[3]
    team.write_text("[protocols]\nstrict = false\n")
    config.load(state)
    cache = state / ".runtime" / config.CACHE_NAME
    stored = json.loads(cache.read_text())
    stored["key"] = ["an older release"]
    stored["config"]["protocols"]["strict"] = True
    cache.write_text(json.dumps(stored))  # a key no load would take
    assert config.audit(state) is None
    assert json.loads(cache.read_text())["config"]["protocols"]["strict"] is False
    cache.unlink()
    assert config.audit(state) is None and cache.is_file()


def test_a_cache_for_files_that_are_refused_is_forged_and_removed(layers):
    team, state = layers[1], layers[3]
    team.write_text("[protocols]\nstrict = false\n")
    config.load(state)
    cache = state / ".runtime" / config.CACHE_NAME
    stored = json.loads(cache.read_text())
    team.write_text("[protocols]\nstrict = nope\n")
    digest = hashlib.sha256(team.read_bytes()).hexdigest()
    stored["key"] = [stored["key"][0], [str(team), digest]]
    cache.write_text(json.dumps(stored))
    assert config.load(state)["protocols"]["strict"] is False  # the forgery answers a load
    assert "refuses" in str(config.audit(state))
    assert not cache.exists()
    with pytest.raises(InvalidInput):
        config.load(state)
