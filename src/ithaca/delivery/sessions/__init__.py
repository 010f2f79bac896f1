"""ithaca.delivery.sessions.tool."""
