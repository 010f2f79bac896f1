"""The actor id falls back to the login name as ``getpass`` would find it."""

from __future__ import annotations

import getpass

import pytest

from ithaca.protocols.events import actor_id, login_name


def test_the_configured_user_id_wins():
    assert actor_id({"user_id": "ada"}) == "ada"


@pytest.mark.parametrize("variable", ["LOGNAME", "USER", "LNAME", "USERNAME"])
def test_the_login_name_matches_getpass(monkeypatch, variable):
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, "grace")
    assert login_name() == getpass.getuser() == "grace"


def test_without_login_variables_the_password_entry_answers(monkeypatch):
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    assert actor_id({}) == getpass.getuser()
