"""Recoverable units: tracked files and their rows land together or not at all
(docs/delivery.md, "Recoverable units")."""
