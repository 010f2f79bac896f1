"""ithaca.hosts.codex.adapter."""
