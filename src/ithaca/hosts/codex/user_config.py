"""The trust Ithaca's install records in the user's own Codex config, and takes back.

Codex runs a project's hooks only once ``$CODEX_HOME/config.toml`` trusts the project and
each hook's hash (``hosts.codex.trust``). The install, run by the user in a terminal, records
that trust there by checked text additions that the manifest lists and uninstall takes
back, and prints what it wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ithaca.hosts.codex.checked_toml import CheckedToml
from ithaca.hosts.codex.trust import codex_home, missing_trust
from ithaca.hosts.install.report import InstallReport
from ithaca.hosts.install.staged import Staged

USER_CONFIG = "config.toml"


def record_trust(
    user: CheckedToml,
    root: Path,
    expected: dict[str, str],
    earlier: list[dict[str, Any]],
    report: InstallReport,
) -> str:
    """Add the project's and each hook's trust to the user's Codex config, where it is not
    there yet, keeping what an earlier install recorded that is still wanted and taking back
    the rest (a hook whose hash changed); returns a degraded surface when some trust could
    not be added, else ""."""
    wanted: list[tuple[str, list[str], dict[str, str], str]] = [
        (
            "codex trust: project",
            ["projects", str(root)],
            {"trust_level": "trusted"},
            f'[projects.{json.dumps(str(root))}]\ntrust_level = "trusted"\n',
        )
    ]
    for hook_key, digest in expected.items():
        event = hook_key.rsplit(":", 3)[1]
        wanted.append(
            (
                f"codex trust: hook {event}",
                ["hooks", "state", hook_key],
                {"trusted_hash": digest},
                f"[hooks.state.{json.dumps(hook_key)}]\ntrusted_hash = {json.dumps(digest)}\n",
            )
        )
    values = {json.dumps(key): value for _, key, value, _ in wanted}
    kept = {}
    for addition in reversed(earlier):
        where = json.dumps(addition["key"])
        if values.get(where) == addition["value"]:
            kept[where] = addition
        else:
            user.take_back(addition, InstallReport())
    written = []
    for label, key, value, block in wanted:
        current = user.get(key)
        if isinstance(current, dict) and all(current.get(k) == v for k, v in value.items()):
            user.keep(kept.get(json.dumps(key)))
            report.unchanged.append(label)
        elif current is None and user.append(label, key, value, block):
            report.added.append(label)
            written.append(block)
    if written:
        report.notes.append(
            f"Recorded in {user.path}, with your consent as the user running this install,"
            " so that Codex runs Ithaca's hooks:\n" + "\n".join(written).rstrip()
        )
    problems = missing_trust(user.meaning, root, expected)
    if not problems:
        return ""
    return (
        f"Codex will not run Ithaca's hooks: {problems[0]} and the entry in {user.path} could"
        " not be added (set it there, or trust the hooks in Codex's hook review)"
    )


def take_back_trust(staged: Staged, manifest: dict[str, Any], report: InstallReport) -> None:
    """Stage the user's Codex config without the trust the manifest lists, where it is still
    as the install wrote it."""
    user_path = Path(manifest.get("userConfig") or codex_home() / USER_CONFIG)
    if user_path.is_file():
        user_before = user_path.read_text(encoding="utf-8")
        user = CheckedToml(user_path, user_before)
        for addition in reversed(manifest.get("userConfigAdditions", [])):
            user.take_back(addition, report)
        if user.text != user_before:
            created = manifest.get("userConfigCreated") is True
            staged.settle(
                user_path.parent,
                USER_CONFIG,
                user.text,
                remove=created and not user.text.strip(),
            )
