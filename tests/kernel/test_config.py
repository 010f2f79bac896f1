"""Configuration: precedence of the three files and strict keys."""

from __future__ import annotations

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
