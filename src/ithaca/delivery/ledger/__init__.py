"""ithaca.delivery.ledger."""
