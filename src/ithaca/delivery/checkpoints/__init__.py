"""The ``checkpoint`` tool: a stage of work declared done, pinned to its evidence (§7)."""
