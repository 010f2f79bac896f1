"""Delivery's doctor: its checks, repairs and rebuild, and the ``doctor`` tool
(docs/delivery.md, "doctor")."""

# The command every doctor finding that ``--repair`` settles names as its fix.
REPAIR_COMMAND = "ithaca doctor --repair"
