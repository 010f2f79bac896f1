"""The MCP Inspector's CLI in strict mode finds nothing to report in Ithaca's tools/list.

``--strict`` lints every tool's input and output schema for portability (an untyped
property, a bare ``true``, a type list, a remote ``$ref``…) and prints each finding on
standard error as ``Warning: tool "<name>"`` or ``Error: …``; only errors change its exit
code, so the test reads the report. The Inspector is pinned in ``tools/package.json``
(``npm ci --prefix tools``); a missing binary fails the test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / "tools"
INSPECTOR = TOOLS / "node_modules" / ".bin" / "mcp-inspector"
PACKAGE = "@modelcontextprotocol/inspector"
CONSOLE_SCRIPT = Path(sys.executable).parent / "ithaca"


def inspector() -> Path:
    """The pinned Inspector, or a failed test saying how to install it."""
    version = json.loads((TOOLS / "package.json").read_text())["devDependencies"][PACKAGE]
    if not INSPECTOR.exists():
        pytest.fail(
            f"the MCP Inspector is missing: install the pinned tools with `npm ci --prefix"
            f" tools` ({PACKAGE} {version})",
            pytrace=False,
        )
    shown = subprocess.run(
        [str(INSPECTOR), "--cli", "--version"], capture_output=True, text=True, timeout=120
    ).stdout
    assert version in shown, (shown, version)
    return INSPECTOR


def strict_listing(project: Path) -> subprocess.CompletedProcess[str]:
    """``mcp-inspector --cli --strict --method tools/list ithaca --project P mcp``, with the
    test's Ithaca home (the Inspector hands its server only a few of its own variables)."""
    return subprocess.run(
        [
            str(inspector()),
            "--cli",
            "--strict",
            "--method",
            "tools/list",
            "-e",
            f"ITHACA_HOME={os.environ['ITHACA_HOME']}",
            str(CONSOLE_SCRIPT),
            "--project",
            str(project),
            "mcp",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


@pytest.fixture
def bare_repo(tmp_path: Path) -> Path:
    root = tmp_path / "bare"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.mark.parametrize("folder", ["project_dir", "bare_repo"])
def test_the_inspector_in_strict_mode_reports_no_warning_about_any_tool(
    folder: str, request: pytest.FixtureRequest
):
    done = strict_listing(request.getfixturevalue(folder))

    assert done.returncode == 0, done.stderr
    listed = json.loads(done.stdout)["tools"]
    assert len(listed) == 14
    assert all("outputSchema" in tool for tool in listed)
    report = done.stderr.lower()
    assert "warning" not in report and "error" not in report, done.stderr
    assert "schema portability" not in report, done.stderr
