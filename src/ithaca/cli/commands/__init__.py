"""ithaca.cli.commands."""
