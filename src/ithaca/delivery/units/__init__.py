"""Recoverable units: tracked files and their rows land together or not at all (§3.5)."""
