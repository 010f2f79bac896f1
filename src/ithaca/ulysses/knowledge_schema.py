"""The knowledge index's tables."""

KNOWLEDGE_V1 = ""
