"""The validator engine's tables: notebooks, cell versions, bindings and runs."""

VALIDATORS_V1 = ""
