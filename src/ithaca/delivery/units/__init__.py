"""ithaca.delivery.units.recoverable."""
