"""A validator's view of the filesystem: read-only, with Ithaca's state and the hosts'
wiring out of sight, and only its own run folder writable.

A validator is code the agent wrote, run by Ithaca itself outside every hook, so nothing
the hooks guard may be within its reach: not the repository (a probe reads it, never
writes it), not ``.ithaca/`` or the state database, not ``~/.ithaca``, not the files that
wire Ithaca into a host (the install profile's list, ``hosts.install.sandbox``). bubblewrap
gives it a mount namespace: the whole filesystem bound read-only, each protected folder
covered by an empty read-only tmpfs and each protected file by ``/dev/null`` (which a
bind mount makes unopenable), the run folder bound writable, a private ``/dev``, and a
``/proc`` of its own PID namespace. That last one matters: the host's ``/proc`` would
let the validator reach any of its user's processes' root (``/proc/PID/root``), which is
the host's writable filesystem. The process machinery of ``sandbox`` (network and PID
namespaces, limits, the process-group kill) runs inside it unchanged. bubblewrap reports
a child killed by signal n as exit code 128 + n, which the sandbox reads back.

Only bubblewrap is used. ``unshare -m`` alone gives a mount namespace, not the view: it
would take remounting every mount read-only, covering the protected paths and mounting a
private ``/proc`` by hand, a second and weaker implementation of what bubblewrap is
(and unprivileged, ``unshare -rm`` cannot mount ``/proc`` for a PID namespace made
beside it). Where bubblewrap cannot run, the run is refused
(``VALIDATOR_ISOLATION_UNAVAILABLE``, details ``{"isolation": "filesystem"}``) unless
the user opted out with ``validators.require_filesystem_isolation = false``, in which
case the result says the validator ran unconfined.
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Sequence
from typing import Any

from ithaca.hosts import HOME_PROTECTED, PROTECTED  # the install's list
from ithaca.kernel.errors import Refused
from ithaca.validators.sandbox import PROBE_TIMEOUT_S, Confinement, system_tool

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: sudo apt-get install bubblewrap)"
UNCONFINED = {
    "code": "filesystem_not_confined",
    "message": "validators.require_filesystem_isolation is false and bubblewrap is not"
    " available: the validator could read and write what Ithaca's user can",
}
# The view without its paths: what the probe runs, and what every run starts with.
_VIEW = ("--die-with-parent", "--unshare-pid", "--ro-bind", "/", "/", "--dev", "/dev",
         "--proc", "/proc")  # fmt: skip


def confinement(
    run_folder: str,
    project_root: str | None,
    settings: dict[str, Any],
    binds: Sequence[tuple[str, str]] = (),
) -> tuple[Confinement | None, list[dict[str, str]]]:
    """The run's confinement, or None and the diagnostic of a run the user let go
    unconfined; refuses when confinement is required and bubblewrap cannot run here.
    ``binds``: (source, destination) files laid read-only over the view (an existing
    destination; the verification run puts a turn's runner configuration back)."""
    found = bubblewrap()
    if found is not None:
        hidden = hidden_paths(project_root)
        return Confinement(prefix(found, run_folder, hidden, binds)), []
    if settings["require_filesystem_isolation"]:
        raise Refused(
            "VALIDATOR_ISOLATION_UNAVAILABLE",
            "a validator runs with the filesystem read-only and Ithaca's state out of sight,"
            " which needs a bubblewrap (bwrap) that can make a mount namespace here, and"
            f" there is none: {INSTALL_HINT}, or set"
            " validators.require_filesystem_isolation = false to run validators unconfined",
            {"isolation": "filesystem"},
        )
    return None, [dict(UNCONFINED)]


@functools.cache
def bubblewrap() -> str | None:
    """``bwrap``, if it can make the view here (probed once per process)."""
    found, env, true = system_tool("bwrap"), system_tool("env"), system_tool("true")
    if found is None or env is None or true is None:
        return None
    try:
        done = subprocess.run(
            [found, *_VIEW, "--", env, "-u", "PWD", true],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=PROBE_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if done.returncode == 0 else None


def hidden_paths(project_root: str | None) -> list[str]:
    """The protected folders and files that exist, resolved: the project's (its state
    root wherever ``ITHACA_DIR`` puts it) and the user's (``ITHACA_HOME``, ``CODEX_HOME``
    and the default folders)."""
    from ithaca.kernel.config import home

    candidates = [os.path.expanduser(path) for path in HOME_PROTECTED]
    candidates += [home(), *(os.environ.get(name, "") for name in ("CODEX_HOME", "ITHACA_DIR"))]
    if project_root:
        candidates += [os.path.join(project_root, name) for name in PROTECTED]
    found = sorted({os.path.realpath(path) for path in candidates if path})
    kept: list[str] = []
    for path in found:  # sorted: a folder comes before what it holds, which it hides
        if os.path.exists(path) and not any(path.startswith(f"{k}{os.sep}") for k in kept):
            kept.append(path)
    return kept


def prefix(
    bwrap: str, run_folder: str, hidden: list[str], binds: Sequence[tuple[str, str]] = ()
) -> tuple[str, ...]:
    """The command prefix that confines a run to ``run_folder``, with ``binds`` laid
    read-only over the view after the protected paths are hidden.

    bubblewrap sets ``PWD`` in the child's environment; ``env -u PWD`` takes it out again,
    so the environment stays the sandbox's allow-list."""
    args = [bwrap, *_VIEW]
    for path in hidden:
        if os.path.isdir(path):
            args += ["--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", "/dev/null", path]
    for source, destination in binds:
        args += ["--ro-bind", source, destination]
    args += ["--bind", run_folder, run_folder, "--", system_tool("env") or "env", "-u", "PWD"]
    return tuple(args)


def check(project: Any, conn: Any) -> list[dict[str, str]]:
    """The doctor's finding when validators cannot be confined here: every run refused,
    or, where the user opted out, run unconfined."""
    from ithaca.kernel.config import load

    if bubblewrap() is not None:
        return []
    if load(project.state_root)["validators"]["require_filesystem_isolation"]:
        message = f"no bubblewrap here, so every validator run is refused: {INSTALL_HINT}"
        return [
            {"code": "VALIDATOR_ISOLATION_UNAVAILABLE", "severity": "warning", "message": message}
        ]
    return [
        {"code": "VALIDATORS_UNCONFINED", "severity": "warning", "message": UNCONFINED["message"]}
    ]
