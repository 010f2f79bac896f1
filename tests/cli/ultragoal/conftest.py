"""The ultragoal fixtures, shared with these adapter tests."""

from tests.ultragoal.conftest import *  # noqa: F403  (fixtures are found by name)
