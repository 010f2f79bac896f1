"""One install or uninstall of a host, from the manifest it starts with to the swap.

Every host takes the same steps around its own merging: read the manifest an earlier
install left, stage the host's files, stage the manifest last (a crash before it leaves
the earlier manifest, which still lists every entry a later install replaces), then
preflight and swap everything in together (``hosts.install.staged``). An install's preflight
checks the staged files against the provenance it records and runs its hook; an
uninstall's checks that what it leaves still parses.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ithaca.hosts.install.files import state_root
from ithaca.hosts.install.manifest import manifest_relpath
from ithaca.hosts.install.preflight import install_checks, parse_problems
from ithaca.hosts.install.report import InstallReport
from ithaca.hosts.install.staged import Staged, staging
from ithaca.kernel import canonical, digest_excluding


def roots(project_root: Path) -> tuple[Path, Path]:
    """The project root as an absolute path, and its state root."""
    root = Path(os.path.abspath(project_root))
    return root, state_root(root)


def commit_install(
    staged: Staged,
    host: str,
    root: Path,
    previous: dict[str, Any] | None,
    manifest: dict[str, Any],
    report: InstallReport,
) -> None:
    """Stage ``manifest`` after the host's files (unless the one on disk says the same,
    its time aside), then preflight and swap them all in."""
    if previous is None or digest_excluding(previous, "installedAt") != digest_excluding(
        manifest, "installedAt"
    ):
        staged.write(state_root(root), manifest_relpath(host), canonical(manifest) + b"\n")
    staged.commit(report, install_checks(host, root, manifest))


def uninstall(
    project_root: Path,
    host: str,
    read_manifest: Callable[[Path], dict[str, Any] | None],
    take_back: Callable[[Staged, Path, dict[str, Any], InstallReport], None],
) -> InstallReport:
    """Stage what ``take_back`` removes of the entries the manifest lists, and the
    manifest's removal, then swap them in; nothing without a manifest."""
    root, state = roots(project_root)
    manifest = read_manifest(state)
    report = InstallReport()
    if manifest is None:
        return report
    with staging(host) as staged:
        take_back(staged, root, manifest, report)
        staged.remove(state, manifest_relpath(host), prune=True)
        staged.commit(report, parse_problems)
    return report
