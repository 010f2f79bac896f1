"""``ithaca install --doctor``: whether a host's install is still what it recorded.

Read-only. It compares the project with the provenance the host's manifest records (an
entry gone is ``INSTALL_MISSING``, one edited since ``INSTALL_DRIFT``), checks that the
hook interpreter and the MCP server command still resolve, and runs the installed
SessionStart hook on a scratch project (``HOOK_START_FAILED`` when it does not answer).
For Codex it also checks that the user's Codex config still trusts the project and each
installed hook's hash (``HOOKS_UNTRUSTED``): without that, Codex runs none of them.
A host with no manifest is ``INSTALL_MISSING``, unless the Ithaca plugin wires Claude Code
for the project: then its profile is ``plugin`` (no sandbox, no deny rules), and beside an
install the result names the plugin, whose hooks step aside there. Any finding makes the
CLI exit non-zero.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from ithaca.hosts.claude import enabled_plugin
from ithaca.hosts.install import sandbox as install_sandbox
from ithaca.hosts.install.files import file_bytes, read_json_object
from ithaca.hosts.install.hooks import listed_hooks_ok
from ithaca.hosts.install.manifest import (
    DRIFT,
    MISSING,
    drift,
    finding,
    manifest_relpath,
    well_formed,
)
from ithaca.hosts.install.preflight import hook_answers, unresolved
from ithaca.hosts.install.transaction import roots
from ithaca.hosts.profile_gate import profile_in
from ithaca.kernel import IthacaError

UNTRUSTED = "HOOKS_UNTRUSTED"


PLUGIN_PROFILE = "plugin"


def check(project_root: Path, host: str, *, run_hook: bool = True) -> dict[str, Any]:
    """``{"host", "installed", "checked", "findings"}`` for ``host`` in the project, with
    ``profile`` and the enabled Ithaca ``plugin`` where there is one. Without
    ``run_hook`` (a glance), the installed hook is not started on a scratch project."""
    root, _ = roots(project_root)
    result = _checked(root, host, run_hook)
    plugin = enabled_plugin.enabling(root) if host == "claude" else None
    if plugin is None:
        return result
    result["plugin"] = plugin[0]
    if not result["installed"]:
        result.update(installed=True, findings=[], profile=PLUGIN_PROFILE)
    return result


def _checked(project_root: Path, host: str, run_hook: bool) -> dict[str, Any]:
    root, state = roots(project_root)
    relpath = manifest_relpath(host)
    try:
        manifest = read_json_object(state, relpath)
    except IthacaError as exc:
        unreadable = finding(DRIFT, "install manifest", str(state / relpath), exc.message)
        return _result(host, True, 0, [unreadable])
    if manifest is None:
        message = f"Ithaca is not installed for {host}; run `ithaca install {host}`"
        return _result(host, False, 0, [finding(MISSING, host, str(state / relpath), message)])
    record = manifest.get("provenance")
    if not (
        well_formed(record)
        and listed_hooks_ok(manifest.get("hooks"))
        and isinstance(manifest.get("mcpEntry"), dict)
    ):
        message = (
            "the manifest records no provenance (an older Ithaca installed it) or was "
            f"edited; run `ithaca install {host}`"
        )
        return _result(host, True, 0, [finding(DRIFT, "install manifest", relpath, message)])
    findings = drift(record, lambda path: file_bytes(root / path)) + unresolved(manifest)
    if host == "codex":
        findings += codex_trust(root, manifest)
    profile = profile_in(manifest)
    if profile == "sandboxed" and host == "claude":  # Codex brings its own bubblewrap
        findings += _sandbox_runs(relpath)
    if not findings and run_hook:
        with tempfile.TemporaryDirectory(prefix="ithaca-doctor-") as folder:
            findings = hook_answers(host, manifest, Path(folder))
    result = _result(host, True, len(record["entries"]), findings)
    result["profile"] = profile
    return result


def _sandbox_runs(relpath: str) -> list[dict[str, str]]:
    """``SANDBOX_UNAVAILABLE`` when the sandboxed profile's sandbox cannot start here
    (Claude Code then refuses every shell command: it fails closed)."""
    try:
        install_sandbox.require_sandbox()
    except IthacaError as exc:
        return [finding(exc.code, "sandbox profile", relpath, exc.message)]
    return []


def codex_trust(root: Path, manifest: dict[str, Any]) -> list[dict[str, str]]:
    """``HOOKS_UNTRUSTED`` for each trust Codex needs to run Ithaca's hooks and lacks."""
    import tomllib

    from ithaca.hosts.codex.trust import codex_home, missing_trust, trust_entries

    path = codex_home() / "config.toml"
    try:
        user = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return [finding(UNTRUSTED, "codex trust", str(path), f"unreadable ({exc})")]
    hooks_path = root / manifest["hooksPath"]
    settings = read_json_object(root, manifest["hooksPath"]) or {}
    commands = {item["command"] for item in manifest["hooks"]}
    expected = trust_entries(hooks_path, settings, commands)
    fix = "; Codex runs none of Ithaca's hooks until then: run `ithaca install codex`"
    return [
        finding(UNTRUSTED, "codex trust", str(path), problem + fix)
        for problem in missing_trust(user, root, expected)
    ]


def _result(
    host: str, installed: bool, checked: int, findings: list[dict[str, str]]
) -> dict[str, Any]:
    return {"host": host, "installed": installed, "checked": checked, "findings": findings}
