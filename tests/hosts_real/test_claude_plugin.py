"""Ithaca as a Claude Code plugin, added from this repository's marketplace the way a user
adds it: Claude Code accepts the marketplace and the plugin, and a protocols turn is
governed through the plugin's hooks and MCP server as through an install."""

from __future__ import annotations

import json
import subprocess

import pytest
from tests.hosts_real.binaries import REPO, host_binary
from tests.hosts_real.claude_host import ClaudePluginHost
from tests.hosts_real.scripted import Script
from tests.hosts_real.test_protocols import play_the_protocols_turn
from tests.hosts_real.test_review_brief import play_the_review


@pytest.mark.parametrize("path", [".", "plugins/ithaca"])
def test_claude_code_validates_the_marketplace_and_the_plugin_strictly(path: str):
    done = subprocess.run(
        [str(host_binary("claude")), "plugin", "validate", "--strict", "--json", str(REPO / path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_protocols_turn_is_governed_through_the_plugin(plugin_host: ClaudePluginHost):
    assert not (plugin_host.repo / ".claude").exists()  # nothing of an install's
    assert not (plugin_host.repo / ".mcp.json").exists()
    play_the_protocols_turn(plugin_host)


def test_the_reviewer_starts_as_the_plugins_agent_and_only_it_submits(
    plugin_host: ClaudePluginHost,
):
    play_the_review(plugin_host)


def test_the_plugin_steps_aside_where_the_project_has_its_own_install(
    plugin_host: ClaudePluginHost,
):
    refused = plugin_host.ithaca_cli("install", "claude", "--json", check=False)
    assert refused.returncode != 0
    assert json.loads(refused.stderr)["error"]["code"] == "CLAUDE_PLUGIN_ENABLED"
    # An install made before the plugin was enabled: each event then runs one Ithaca hook.
    plugin_host.plugin("disable", "ithaca@ithaca")
    plugin_host.ithaca_cli("install", "claude")
    plugin_host.plugin("enable", "ithaca@ithaca")
    plugin_host.namespace = "mcp__ithaca"  # the install's server; the plugin's offers none
    run = plugin_host.run(
        "Load the protocols",
        Script(main=[*plugin_host.protocols_loaded()]),
    )
    assert run.exit_code == 0, run.stderr
    admitted = [e for e in plugin_host.log() if e["kind"] == "protocols.event_admitted"]
    assert len(admitted) == 1, admitted  # one admission, not one per wiring
    assert not run.call("ithaca:load_protocols").is_error
