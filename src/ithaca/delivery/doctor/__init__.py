"""Delivery's doctor: its checks, repairs and rebuild, and the ``doctor`` tool (§11)."""
