"""ithaca.hosts.claude.adapter."""
