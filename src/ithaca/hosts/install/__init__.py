"""ithaca.hosts.install."""
