"""The ``sync`` tool: inspect, import, publish, migrate and rehash the team ledger
(docs/delivery.md, "The team ledger: sync")."""
