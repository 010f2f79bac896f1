"""Durable delivery state: records, checkpoints, context, archive (reference: delivery)."""
