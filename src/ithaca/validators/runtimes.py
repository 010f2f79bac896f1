"""Validator languages and the runtimes that run them.

A snapshot records which runtime a validator was bound against, so a later run on a
different interpreter is reported as drift instead of passing silently. Measuring means
starting the runtime once (``node --version`` and the like), which costs more than a
whole validator run, so each answer is kept for the life of the process, keyed by the
executable's path and modification time: reinstalling a runtime is noticed, asking twice
is not paid twice.

Executables are resolved against the validator's own ``PATH`` (``validators.path`` or the
inherited one) and the command names them by absolute path. That ``PATH`` may reach into
the project (an activated ``.venv/bin``, ``node_modules/.bin``), where the agent writes, so
asking a runtime its version runs it in the validators' confinement (``confine``): the
same read-only view, with Ithaca's state and the user's settings out of sight, as a
validator run. TypeScript runs through
``tsx`` when it is installed, else through a Node that strips types by default; it is
never fetched with ``npx``, which would download code at run time.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from ithaca.kernel.errors import InvalidInput, Refused
from ithaca.validators import confine

# How long a runtime may take to say its version before it counts as missing.
PROBE_TIMEOUT_S = 15


@dataclass(frozen=True)
class Language:
    """One validator language: the files its cells may be and what the runner adds."""

    name: str
    extensions: tuple[str, ...]
    entrypoint: str
    helpers: tuple[str, ...]


LANGUAGES: dict[str, Language] = {
    "python": Language("python", (".py",), "validate.py", ("tb_validate.py",)),
    "javascript": Language(
        "javascript", (".js", ".mjs", ".cjs"), "validate.js", ("tb-validate.js", "tb-validate.cjs")
    ),
    "typescript": Language(
        "typescript", (".ts", ".mts", ".cts"), "validate.ts", ("tb-validate.js", "tb-validate.cjs")
    ),
    "shell": Language("shell", (".sh",), "validate.sh", ("tb-validate.sh",)),
}

# The first Node releases of each line that strip TypeScript types without a flag.
_NODE_TYPE_STRIPPING = {22: (22, 18), 23: (23, 6)}

# (program, mtime_ns, PATH, arguments) -> the program's answer, or None when it gave none.
_answers: dict[tuple[str, int, str, tuple[str, ...]], str | None] = {}


def search_path(settings: dict[str, Any]) -> str:
    """The ``PATH`` a validator sees and its runtime is looked up in."""
    return settings.get("path") or os.environ.get("PATH") or os.defpath


def measure(language: str, settings: dict[str, Any]) -> dict[str, str]:
    """``{name, version}`` of the runtime that would run ``language`` now.

    Raises ``VALIDATOR_RUNTIME_MISSING`` when it is absent or does not answer."""
    if language == "python":
        python = _python(settings)
        answer = _ask(python, ("-E", "-s", "-S", "-c", _PYTHON_VERSION), settings)
        if answer is None or "\n" not in answer:
            raise _missing(language, f"{python} did not report its version")
        name, version = answer.split("\n", 1)
        return {"name": name, "version": version.strip()}
    if language == "javascript":
        return {"name": "node", "version": _node_version(_node(settings), settings)}
    if language == "typescript":
        runner, kind = _typescript(settings)
        if kind == "node":
            return {"name": "node", "version": _node_version(runner, settings)}
        answer = _ask(runner, ("--version",), settings)
        if not answer:
            raise _missing(language, f"{runner} did not report its version")
        # tsx names its own version and the Node version under it ("tsx v4.19.2",
        # "node v20.18.0"), one per line.
        versions = [line.strip() for line in answer.splitlines() if line.strip()]
        return {"name": "tsx", "version": ", ".join(versions)}
    if language == "shell":
        shell = os.path.realpath(_shell(settings))
        answer = _ask(shell, ("--version",), settings)
        first = answer.splitlines()[0].strip() if answer else ""
        return {"name": os.path.basename(shell), "version": f"{shell} {first}".strip()}
    raise _unknown(language)


def command(language: str, entrypoint: str, settings: dict[str, Any]) -> list[str]:
    """The command line that runs ``entrypoint`` (an absolute path) as ``language``."""
    if language == "python":
        flags = ["-E", "-s", "-B"] if settings.get("python_site") else ["-E", "-s", "-S", "-B"]
        return [_python(settings), *flags, entrypoint]
    if language == "javascript":
        return [_node(settings), entrypoint]
    if language == "typescript":
        return [_typescript(settings)[0], entrypoint]
    if language == "shell":
        return [_shell(settings), entrypoint]
    raise _unknown(language)


_PYTHON_VERSION = "import sys; sys.stdout.write(sys.implementation.name + '\\n' + sys.version)"


def _python(settings: dict[str, Any]) -> str:
    return _resolve("python", settings.get("python") or sys.executable, settings)


def _node(settings: dict[str, Any]) -> str:
    return _resolve("javascript", settings.get("node") or "node", settings)


def _shell(settings: dict[str, Any]) -> str:
    return _resolve("shell", settings.get("shell") or "/bin/sh", settings)


def _typescript(settings: dict[str, Any]) -> tuple[str, str]:
    """``(executable, "tsx" | "node")`` for TypeScript, or ``VALIDATOR_RUNTIME_MISSING``."""
    tsx = shutil.which("tsx", path=search_path(settings))
    if tsx is not None:
        return os.path.abspath(tsx), "tsx"
    node = shutil.which(settings.get("node") or "node", path=search_path(settings))
    if node is not None and _strips_types(_node_version(os.path.abspath(node), settings)):
        return os.path.abspath(node), "node"
    raise _missing(
        "typescript",
        "TypeScript needs tsx on the validator PATH or Node 22.18+ / 23.6+ (which strips types)",
    )


def _strips_types(version: str) -> bool:
    try:
        major, minor = (int(part) for part in version.lstrip("v").split(".")[:2])
    except ValueError:
        return False
    first = _NODE_TYPE_STRIPPING.get(major)
    return (major, minor) >= first if first else major > max(_NODE_TYPE_STRIPPING)


def _node_version(node: str, settings: dict[str, Any]) -> str:
    answer = _ask(node, ("--version",), settings)
    if not answer or not answer.strip().startswith("v"):
        raise _missing("javascript", f"{node} did not report a Node version")
    return answer.strip()


def _resolve(language: str, program: str, settings: dict[str, Any]) -> str:
    found = shutil.which(program, path=search_path(settings))
    if found is None:
        raise _missing(language, f"{program} is not an executable on the validator PATH")
    return os.path.abspath(found)


def _ask(program: str, arguments: tuple[str, ...], settings: dict[str, Any]) -> str | None:
    """What ``program arguments`` prints when it exits 0, else None; cached by path and
    mtime, except when the program could not be started or did not end in time (a busy
    machine must not make a runtime missing for the rest of the process)."""
    path = search_path(settings)
    try:
        key = (program, os.stat(program).st_mtime_ns, path, arguments)
    except OSError:
        return None
    if key not in _answers:
        if program == sys.executable and arguments[-1] == _PYTHON_VERSION:
            _answers[key] = f"{sys.implementation.name}\n{sys.version}"
        else:
            with tempfile.TemporaryDirectory(prefix="ithaca-probe-") as folder:
                confined = _confined(folder, settings)
                try:
                    done = subprocess.run(
                        [*confined, program, *arguments],
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        timeout=PROBE_TIMEOUT_S,
                        env={"PATH": path},
                    )
                except (OSError, subprocess.TimeoutExpired):
                    return None
            ok = done.returncode == 0
            _answers[key] = done.stdout.decode("utf-8", "replace") if ok else None
    return _answers[key]


def _confined(folder: str, settings: dict[str, Any]) -> tuple[str, ...]:
    """The prefix that runs a probe in the validators' confinement (none where the user
    let validators run unconfined); refuses as a validator run would without it."""
    confinement, _ = confine.confinement(folder, None, settings)
    return confinement.prefix if confinement is not None else ()


def _missing(language: str, message: str) -> Refused:
    return Refused("VALIDATOR_RUNTIME_MISSING", message, {"language": language})


def _unknown(language: str) -> InvalidInput:
    return InvalidInput(
        "LANGUAGE_UNSUPPORTED",
        f"no validator language {language!r}; one of {', '.join(LANGUAGES)}",
        {"language": language},
    )
