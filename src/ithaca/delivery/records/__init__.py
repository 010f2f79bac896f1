"""The ``record`` tool and the kinds it records: baseline, changes, decisions, tasks, artifacts,
events (docs/delivery.md, "The record tool")."""
