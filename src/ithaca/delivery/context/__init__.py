"""The ``context`` tool: the Canonical Context Envelope and its sections
(docs/delivery.md, "context")."""
