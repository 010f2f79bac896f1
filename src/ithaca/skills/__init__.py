"""Agent skills Ithaca installs into a host (Claude Code: ``.claude/skills/<name>/``)."""
