"""ithaca.delivery.run_plan.dispatcher."""
