"""The ``sync`` tool: inspect, import, publish, migrate and rehash the team ledger (§8.2)."""
