"""The Ulysses protocol's tables."""

ULYSSES_V1 = ""
