"""Which worker ``ithaca run-plan`` launches, and the environment it gets
(docs/delivery.md, "ithaca run-plan").

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

from ithaca.delivery.sessions.env import RESERVED_PREFIX
from ithaca.kernel.errors import InvalidInput, Refused

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
    """The configured worker (types and ranges were checked when the configuration was
    loaded); refused when none is set or its ``env`` claims Ithaca's own variables."""
    section = config["run_plan"]
    if not section["worker"]:
        raise Refused(
            "WORKER_NOT_CONFIGURED",
            'run-plan needs a worker command: set `[run_plan] worker = ["program", "arg"]`'
            " in .ithaca/.runtime/config.toml (the user's own file; agents cannot write it)",
            {"section": "run_plan", "key": "worker"},
        )
    for name in sorted(section["env"]):
        if name.startswith(RESERVED_PREFIX):
            raise InvalidInput(
                "WORKER_ENV_RESERVED",
                f"[run_plan] env sets {name}; ITHACA_* variables are Ithaca's to set",
                {"name": name},
            )
    return Worker(
        tuple(section["worker"]),
        dict(section["env"]),
        float(section["timeout_s"]),
        int(section["max_parallel"]),
    )


def environment(settings: Worker, reserved: dict[str, str]) -> dict[str, str]:
    """A worker's whole environment: inherited allow-list, configured ``env``, reserved."""
    inherited = {name: os.environ[name] for name in INHERITED if name in os.environ}
    return {**inherited, **settings.env, **reserved}
