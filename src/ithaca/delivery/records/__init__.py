"""ithaca.delivery.records."""
