"""``ithaca run-plan``: the resumable wave dispatcher over a change's accepted plan
(docs/delivery.md, "ithaca run-plan")."""
