"""``ithaca run-plan``: the resumable wave dispatcher over a change's accepted plan (§9.6)."""
