"""Objective pursuit that never false-completes (reference: ultragoal)."""
