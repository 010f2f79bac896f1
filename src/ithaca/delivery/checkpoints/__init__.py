"""The ``checkpoint`` tool: a stage of work declared done, pinned to its evidence
(docs/delivery.md, "checkpoint")."""
