"""Run one validator snapshot against observed data and say what it proved.

The runner lays out a fresh run folder (observed data, the cell as its entrypoint, the
language's helpers, the notebook's manifests, an empty home and temp), starts the
runtime in the sandbox, confined to a read-only view where only that folder is writable,
reads the one verdict file that folder can hold and classifies the run. The folder is
removed whatever happens. The result carries two digests: of the observed data, and of
the evidence itself (snapshot, observed data, verdict, cause and exit code), under which
a bound run is stored.

Errors that mean "nothing could be judged" (no runtime, isolation required but missing,
the system refused to start the process) are raised, never returned as a verdict, so the
caller's state stays unchanged.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import stat
import time
from pathlib import Path
from typing import Any

from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, invalid_field
from ithaca.validators import confine, runtimes, sandbox, verdict
from ithaca.validators.snapshot import encode as encode_snapshot

HELPERS = Path(__file__).with_name("helpers")
# The fields the evidence digest covers, in the ValidationResult's names.
EVIDENCE_FIELDS = (
    "snapshotHash",
    "observedDigest",
    "pass",
    "reason",
    "cause",
    "evidence",
    "exitCode",
)
_JS_LANGUAGES = ("javascript", "typescript")


def run_snapshot(
    snapshot: dict[str, Any],
    observed: Any,
    settings: dict[str, Any],
    *,
    project_root: str | None,
    snapshot_hash: str | None = None,
    diagnostics: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Run a snapshot on ``observed`` and return its ValidationResult.

    ``settings`` is ``config["validators"]``. ``project_root`` is the working folder of
    probe cells, whose state and host wiring no cell sees. ``snapshot_hash`` defaults to
    the snapshot's own digest; ``diagnostics`` come first in the result's list. Raises
    ``VALIDATOR_RUNTIME_MISSING``, ``VALIDATOR_ISOLATION_UNAVAILABLE`` and
    ``VALIDATOR_SPAWN_FAILED``."""
    encoded = encode_snapshot(snapshot)
    observed_bytes = canonical_observed(observed)
    language, mode = snapshot["language"], snapshot["mode"]
    if mode == "probe" and not project_root:
        raise invalid_field("/project_root", "REQUIRED", "a probe cell needs the project root")
    timeout_s = min(snapshot["timeout_s"], settings["timeout_s"])
    run_folder = sandbox.make_run_folder()
    try:
        entrypoint = _lay_out(run_folder, snapshot, observed_bytes)
        command = runtimes.command(language, entrypoint, settings)
        probe_root = project_root if mode == "probe" else None
        confinement, unconfined = confine.confinement(run_folder, project_root, settings)
        outcome = sandbox.execute(
            command,
            env=sandbox.environment(
                run_folder, language=language, settings=settings, project_root=probe_root
            ),
            cwd=probe_root or run_folder,
            limits=sandbox.resource_limits(language, timeout_s, settings),
            timeout_s=timeout_s,
            grace_s=settings["grace_s"],
            max_output_bytes=settings["max_output_bytes"],
            require_network_isolation=settings["require_network_isolation"],
            confinement=confinement,
        )
        found = verdict.read(
            os.path.join(run_folder, "verdict.json"), settings["max_verdict_bytes"]
        )
    finally:
        sandbox.remove_run_folder(run_folder)
    judged = verdict.classify(
        found,
        exit_code=outcome.exit_code,
        signal_number=outcome.signal,
        timed_out=outcome.timed_out,
        cpu_exhausted=outcome.cpu_exhausted,
        stderr=outcome.stderr + outcome.stderr_tail,
    )
    return _result(
        snapshot_hash=snapshot_hash or canon.digest_bytes(encoded),
        observed_digest=canon.digest_bytes(observed_bytes),
        judged=judged,
        exit_code=outcome.exit_code,
        signal_name=_signal_name(outcome.signal),
        duration_ms=outcome.duration_ms,
        stdout=outcome.stdout,
        stderr=outcome.stderr,
        network_isolated=outcome.network_isolated,
        diagnostics=[*(diagnostics or []), *unconfined, *outcome.diagnostics],
    )


def mismatch_result(snapshot_hash: str, cause: str) -> dict[str, Any]:
    """The result of a failed snapshot check: nothing ran, nothing was observed."""
    return _result(
        snapshot_hash=snapshot_hash,
        observed_digest=None,
        judged=verdict.Classification(False, "snapshot_hash_mismatch", cause, None),
        exit_code=None,
        signal_name=None,
        duration_ms=0,
        stdout="",
        stderr="",
        network_isolated=False,
        diagnostics=[],
        hash_matched=False,
    )


def remove_stale_run_folders(max_age_s: float = 3600) -> int:
    """Remove this user's run folders older than ``max_age_s`` (left by a crashed server);
    returns how many were removed."""
    root = sandbox.run_root()
    cutoff = time.time() - max_age_s
    removed = 0
    try:
        names = os.listdir(root)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(sandbox.RUN_PREFIX):
            continue
        path = os.path.join(root, name)
        try:
            info = os.lstat(path)
        except OSError:
            continue
        if info.st_uid == os.getuid() and stat.S_ISDIR(info.st_mode) and info.st_mtime < cutoff:
            sandbox.remove_run_folder(path)
            removed += not os.path.lexists(path)
    return removed


def _result(
    *,
    snapshot_hash: str,
    observed_digest: str | None,
    judged: verdict.Classification,
    exit_code: int | None,
    signal_name: str | None,
    duration_ms: int,
    stdout: str,
    stderr: str,
    network_isolated: bool,
    diagnostics: list[dict[str, Any]],
    hash_matched: bool = True,
) -> dict[str, Any]:
    result = {
        "pass": judged.passed,
        "reason": judged.reason,
        "cause": judged.cause,
        "evidence": judged.evidence,
        "snapshotHash": snapshot_hash,
        "hashMatched": hash_matched,
        "exitCode": exit_code,
        "signal": signal_name,
        "durationMs": duration_ms,
        "stdout": stdout,
        "stderr": stderr,
        "network_isolated": network_isolated,
        "diagnostics": diagnostics,
        "observedDigest": observed_digest,
    }
    result["evidenceDigest"] = canon.digest({name: result[name] for name in EVIDENCE_FIELDS})
    return result


def canonical_observed(observed: Any) -> bytes:
    """The bytes of ``observed.json``; a value without a canonical JSON form is refused
    with its pointer under ``/observed``."""
    try:
        return canon.canonical(observed)
    except InvalidInput as exc:
        raise invalid_field("/observed" + exc.details["pointer"], exc.details["problem"]) from exc


def _lay_out(folder: str, value: dict[str, Any], observed_bytes: bytes) -> str:
    """Write the run folder's files; returns the entrypoint's path."""
    language = value["language"]
    for name in ("home", "temp"):
        os.mkdir(os.path.join(folder, name), 0o700)
    observed_path = os.path.join(folder, "observed.json")
    _write(observed_path, observed_bytes)
    os.chmod(observed_path, 0o400)
    for helper in runtimes.LANGUAGES[language].helpers:
        _write(os.path.join(folder, helper), _helper(helper))
    manifests = {item["filename"]: item["source"] for item in value["manifests"]}
    if language in _JS_LANGUAGES:
        manifests["package.json"] = _module_package(manifests.get("package.json"))
    for filename, source in manifests.items():
        _write(os.path.join(folder, filename), source.encode("utf-8"))
    entrypoint = os.path.join(folder, value["entrypoint"])
    _write(entrypoint, value["source"].encode("utf-8"))
    return entrypoint


def _module_package(source: str | None) -> str:
    """The run folder's package.json: the notebook's, made an ES module package unless it
    names a type; a manifest that is not a JSON object is kept as written."""
    if source is None:
        return '{"type": "module"}\n'
    try:
        package = json.loads(source)
    except ValueError:
        return source
    if not isinstance(package, dict) or "type" in package:
        return source
    return json.dumps({**package, "type": "module"}, indent=2) + "\n"


@functools.cache
def _helper(name: str) -> bytes:
    return (HELPERS / name).read_bytes()


def _write(path: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(path, flags, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _signal_name(number: int | None) -> str | None:
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)
