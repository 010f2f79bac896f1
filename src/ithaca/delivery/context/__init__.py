"""The ``context`` tool: the Canonical Context Envelope and its sections (§5)."""
