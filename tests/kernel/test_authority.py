"""The user-only check (the pseudo-terminal proof is in tests/cli/test_user_only_pty.py)."""

from __future__ import annotations

import io

import pytest

from ithaca.kernel.authority import require_user, user_only_command
from ithaca.kernel.errors import Refused


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _refusal(**kwargs):
    with pytest.raises(Refused) as raised:
        require_user("approve apr_X", "apr_X", **kwargs)
    assert raised.value.code == "USER_ONLY"
    return raised.value.details["reason"]


def test_without_a_terminal_the_user_only_check_refuses(monkeypatch):
    monkeypatch.delenv("CLAUDECODE", raising=False)
    assert _refusal(stdin=io.StringIO("apr_X\n"), stdout=io.StringIO()) == "no_terminal"


def test_an_agent_environment_is_refused_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("CLAUDECODE", "1")
    reason = _refusal(stdin=FakeTerminal("apr_X\n"), stdout=FakeTerminal())
    assert reason == "agent_environment"


def test_a_wrong_confirmation_is_refused(monkeypatch):
    for name in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CODEX_THREAD_ID", "CODEX_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    reason = _refusal(stdin=FakeTerminal("apr_Y\n"), stdout=FakeTerminal())
    assert reason == "confirmation_mismatch"


def test_the_typed_token_on_a_terminal_passes(monkeypatch):
    for name in ("CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CODEX_THREAD_ID", "CODEX_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    out = FakeTerminal()
    require_user("approve apr_X", "apr_X", stdin=FakeTerminal("apr_X\n"), stdout=out)
    assert "type apr_X" in out.getvalue()


@pytest.mark.parametrize(
    "argv",
    [
        ("protocols", "approve", "apr_X"),
        ("--project", "/x", "protocols", "approve", "apr_X"),
        ("protocols", "--json", "remove", "team.x"),
        ("ulysses", "rollback", "checkpoint_1"),
        ("ulysses", "bind-final-validator", "nb_1", "cell_1", "--replace"),
        ("doctor", "restore", "state-x.db"),
        ("doctor", "--rebuild"),
        ("doctor", "--json", "--rebuild"),
        ("--project", ".", "doctor", "--rebuild=yes"),
        ("ultragoal", "--session", "s-1", "resume-pursuit"),
        ("sync", "import", "--resolve", "task:T1=ours", "--rehash"),
        ("session", "reset-circuit", "T1"),
        ("session", "acquire", "T-1", "--strategy", "takeover", "--force"),
    ],
)
def test_user_only_commands_are_recognised_wherever_options_stand(argv):
    assert user_only_command(argv) is not None


def test_read_commands_are_not_user_only():
    assert user_only_command(("protocols", "list", "--tag", "approve")) is None
    assert user_only_command(("doctor", "--json")) is None
    assert user_only_command(("doctor", "--repair")) is None
    assert user_only_command(("sync", "import", "--resolve", "task:T1=ours")) is None
    assert user_only_command(("session", "acquire", "T-1")) is None
    assert user_only_command(("ulysses", "bind-final-validator", "nb_1", "cell_1")) is None
    assert user_only_command(("ultragoal", "set-blocked", "--reason", "resume-pursuit")) is None
