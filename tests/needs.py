"""What some tests need from the machine, checked so that the test fails when it is
missing: a test that skips on a machine without node, tsx, namespaces or bubblewrap would
let CI go green without ever running it (``.ci/run`` sets all of them up)."""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from typing import Any

import pytest

from ithaca.validators import confine, sandbox

_CHECKS: dict[str, tuple[Callable[[], bool], str]] = {
    "node": (lambda: shutil.which("node") is not None, "node is not on PATH"),
    "tsx": (lambda: shutil.which("tsx") is not None, "tsx is not on PATH"),
    "network_namespace": (
        lambda: sandbox.isolation().network,
        "unshare cannot make a network namespace here",
    ),
    "pid_namespace": (
        lambda: sandbox.isolation().pid_namespace,
        "unshare cannot make a PID namespace here",
    ),
    "bubblewrap": (
        lambda: confine.bubblewrap() is not None,
        "bubblewrap cannot make a validator's view here (bwrap missing or not permitted)",
    ),
}


def require(what: str) -> None:
    """Fail the running test unless the machine has ``what``."""
    available, missing = _CHECKS[what]
    if not available():
        pytest.fail(f"{missing} (`.ci/run` sets this machine up)", pytrace=False)


def _needing(what: str) -> Callable[[Any], Any]:
    def decorate(test: Any) -> Any:
        @functools.wraps(test)
        def checked(*args: Any, **kwargs: Any) -> Any:
            require(what)
            return test(*args, **kwargs)

        return checked

    return decorate


node = _needing("node")
tsx = _needing("tsx")
network_namespace = _needing("network_namespace")
pid_namespace = _needing("pid_namespace")
bubblewrap = _needing("bubblewrap")
