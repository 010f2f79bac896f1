"""The delivery part's tables (reference §4)."""

DELIVERY_V1 = ""
