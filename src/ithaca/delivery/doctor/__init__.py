"""ithaca.delivery.doctor.checks."""
