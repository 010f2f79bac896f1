"""Execution sessions: admission, acquire, leases, close, worktrees and Worker Packets (§9)."""
