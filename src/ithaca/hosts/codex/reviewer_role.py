"""The Ultragoal reviewer as a Codex agent role.

Codex 0.169 starts a subagent of a named type (``spawn_agent`` with ``agent_type``) from a
role file, ``.codex/agents/<name>.toml``, with ``name``, ``description`` and
``developer_instructions``. Ithaca ships the reviewer once, as Claude Code's agent file
(``ithaca.skills/agents/code-reviewer.md``: front matter, then the instructions); the
role is made from that same text, so both hosts' reviewers follow one set of rules. The
role runs the reviewer's shell read-only (``sandbox_mode``): it reads and runs checks,
and submits through Ithaca's MCP tool, whose server runs outside that sandbox.
"""

from __future__ import annotations

import tomlkit


def codex_role(agent_markdown: bytes) -> bytes:
    """The role file for the agent an Ithaca agent file describes."""
    _, head, body = agent_markdown.decode("utf-8").split("---\n", 2)
    fields = dict(line.split(": ", 1) for line in head.splitlines() if ": " in line)
    role = tomlkit.document()
    role["name"] = fields["name"]
    role["description"] = fields["description"]
    role["sandbox_mode"] = "read-only"
    role["developer_instructions"] = tomlkit.string(body.strip() + "\n", multiline=True)
    return tomlkit.dumps(role).encode("utf-8")
