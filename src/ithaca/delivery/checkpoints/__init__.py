"""ithaca.delivery.checkpoints.tool."""
