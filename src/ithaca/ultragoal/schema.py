"""The ultragoal part's tables (reference §3)."""

ULTRAGOAL_V1 = ""
