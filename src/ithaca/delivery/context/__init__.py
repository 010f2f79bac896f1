"""ithaca.delivery.context.tool."""
