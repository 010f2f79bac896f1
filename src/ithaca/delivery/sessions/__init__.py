"""Execution sessions: admission, acquire, leases, close, worktrees and Worker Packets
(docs/delivery.md, "Execution: session and Worker Packets")."""
