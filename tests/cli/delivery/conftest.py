"""The delivery fixtures, shared with these adapter tests."""

from tests.delivery.conftest import *  # noqa: F403  (fixtures are found by name)
