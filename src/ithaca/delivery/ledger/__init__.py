"""The team ledger file (``.ithaca/tasks/tasks.json``): its format, merge, base and Git driver
(docs/delivery.md, "The team ledger: sync")."""
