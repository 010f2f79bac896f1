"""Which worker ``ithaca run-plan`` launches, and the environment it gets (§9.6).

The worker is an explicit argument list in the ``[run_plan]`` section of a file only the
user writes (``.ithaca/.runtime/config.toml`` or ``$ITHACA_HOME/config.toml``; the
kernel's loader refuses executable keys from the tracked team file), so an agent cannot
choose what Ithaca runs. Without one, run-plan refuses (``WORKER_NOT_CONFIGURED``)
instead of creating sessions no real worker would consume.

A worker runs without a shell, with an environment built from scratch: an allow-list of
the caller's variables (locale, ``PATH``, ``HOME`` …), then the configured ``env``, then
the session's reserved ``ITHACA_*`` variables. Configured names starting with
``ITHACA_`` are refused (``WORKER_ENV_RESERVED``), so configuration can never point a
worker at another session or store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ithaca.delivery.sessions_env import RESERVED_PREFIX
from ithaca.kernel.errors import InvalidInput, Refused

DEFAULT_TIMEOUT_S = 3600
DEFAULT_MAX_PARALLEL = 4
# Variables a worker inherits from the runner's environment.
INHERITED = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TERM",
    "TMPDIR",
    "TZ",
    "ITHACA_HOME",
)


@dataclass(frozen=True)
class Worker:
    argv: tuple[str, ...]
    env: dict[str, str]
    timeout_s: float
    max_parallel: int


def worker(config: dict[str, Any]) -> Worker:
    """The configured worker, checked."""
    section = config.get("run_plan") or {}
    argv = section.get("worker") or []
    if not argv or not all(isinstance(word, str) and word for word in argv):
        raise Refused(
            "WORKER_NOT_CONFIGURED",
            'run-plan needs a worker command: set `[run_plan] worker = ["program", "arg"]`'
            " in .ithaca/.runtime/config.toml (the user's own file; agents cannot write it)",
            {"section": "run_plan", "key": "worker"},
        )
    env = section.get("env") or {}
    for name, value in sorted(env.items()):
        if name.startswith(RESERVED_PREFIX):
            raise InvalidInput(
                "WORKER_ENV_RESERVED",
                f"[run_plan] env sets {name}; ITHACA_* variables are Ithaca's to set",
                {"name": name},
            )
        if not isinstance(value, str):
            raise InvalidInput(
                "INVALID_CONFIG",
                f"[run_plan] env {name} must be a string",
                {"key": f"run_plan.env.{name}"},
            )
    timeout_s = section.get("timeout_s", DEFAULT_TIMEOUT_S)
    max_parallel = section.get("max_parallel", DEFAULT_MAX_PARALLEL)
    if not timeout_s > 0 or not max_parallel >= 1:
        raise InvalidInput(
            "INVALID_CONFIG",
            "[run_plan] timeout_s must be positive and max_parallel at least 1",
            {"key": "run_plan"},
        )
    return Worker(tuple(argv), dict(env), float(timeout_s), int(max_parallel))


def environment(settings: Worker, reserved: dict[str, str]) -> dict[str, str]:
    """A worker's whole environment: inherited allow-list, configured ``env``, reserved."""
    inherited = {name: os.environ[name] for name in INHERITED if name in os.environ}
    return {**inherited, **settings.env, **reserved}
