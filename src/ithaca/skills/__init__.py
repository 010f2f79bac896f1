"""Agent skills and subagents Ithaca installs into Claude Code: ``<name>/SKILL.md`` as
``.claude/skills/<name>/SKILL.md``, and ``agents/<name>.md`` as ``.claude/agents/<name>.md``."""
