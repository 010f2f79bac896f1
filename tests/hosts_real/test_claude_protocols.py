"""A protocols turn through the real Claude Code: admission, the load gate, team rules,
the kernel guard and user-only commands, as the model was shown them."""

from __future__ import annotations

from tests.hosts_real.claude_host import ClaudeHost, bash, load_ithaca_tools, load_protocols
from tests.hosts_real.scripted import Script


def test_mutation_is_denied_before_load_protocols_and_allowed_after(claude: ClaudeHost):
    run = claude.run(
        "Write hello into notes.txt",
        Script(
            main=[
                bash("echo hello > notes.txt"),
                load_ithaca_tools(),
                load_protocols,
                bash("echo hello > notes.txt"),
            ]
        ),
    )
    assert run.exit_code == 0, run.stderr
    first = run.model.lane("main")[0]
    assert "Ithaca admitted this prompt as event" in first.shown
    denied, reason = run.result_of("Bash", 0)
    assert denied and "load_protocols" in reason
    assert not run.result_of("ToolSearch")[0]
    loaded_error, bundle = run.result_of("mcp__ithaca__load_protocols")
    assert not loaded_error, bundle
    assert '"digest"' in bundle
    assert not run.result_of("Bash", 1)[0]
    assert (claude.repo / "notes.txt").read_text() == "hello\n"
