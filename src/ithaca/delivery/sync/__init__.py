"""ithaca.delivery.sync.tool."""
