"""``ithaca status``: the project at a glance, a line per area with the command that moves
it on (``ithaca.cli.glance``), and everything else a script wants with ``--json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ithaca.cli.glance import area_lines, next_step, validator_confinement
from ithaca.cli.opening import opened
from ithaca.cli.output import json_option, show
from ithaca.kernel import IthacaError


@click.command("status")
@json_option
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """The project at a glance: hosts, the turn, approvals, Ulysses, Ultragoal, delivery."""
    from ithaca.kernel import journal, lockdown, mcp_calls

    project = opened(ctx, as_json)
    conn = project.store.connection()
    protocols = project.protocols.summary()
    info: dict[str, Any] = {
        "root": str(project.project.root),
        "stateRoot": str(project.project.state_root),
        "database": str(project.project.db_path),
        "schemaVersion": project.store.version(),
        "journalEvents": journal.count(conn),
        "protocols": protocols["counts"],
        "strict": project.config["protocols"]["strict"],
        "strictApproval": project.config["ultragoal"]["strict_approval"],
        "verificationCritic": project.config["verification"]["require"],
        "recentSessions": protocols["recentSessions"],
        "ulysses": _ulysses_summary(project.ulysses.status({})),
        "hooksNotRunning": mcp_calls.unhooked_calls(conn),
        "installProfiles": _install_profiles(project.project.state_root),
        "lockdowns": lockdown.all_active(conn),
        "validators": validator_confinement(project.config),
    }

    lines = area_lines(project)
    info["glance"] = lines
    info["next"] = next_step(lines)

    def render(value: dict[str, Any]) -> None:
        click.echo(
            f"Ithaca at {value['root']}  (schema {value['schemaVersion']},"
            f" {value['journalEvents']} journal events)"
        )
        for found in value["glance"]:
            then = (
                f"\n             -> {found['next']}" if found["next"] and found["waiting"] else ""
            )
            click.echo(f"  {found['area']:10} {found['state']}{then}")
        step = value["next"]
        click.echo(f"\nnext: {step['next'] or step['state']}")

    show(info, as_json, render)


def _install_profiles(state_root: Any) -> dict[str, str]:
    """Per installed host, the install profile in force (docs/hooks.md, threat model)."""
    from ithaca.hosts import HOSTS
    from ithaca.hosts.install.files import read_json_object
    from ithaca.hosts.install.manifest import manifest_relpath
    from ithaca.hosts.profile_gate import profile_in

    found = {}
    for host in HOSTS:
        try:
            profile = profile_in(read_json_object(Path(state_root), manifest_relpath(host)))
        except IthacaError:
            profile = None
        if profile:
            found[host] = profile
    return found


def _ulysses_summary(status: dict[str, Any]) -> dict[str, Any] | None:
    """The active Ulysses session in a line, or None."""
    if not status.get("active"):
        return None
    return {
        "sessionId": status["session_id"],
        "phase": status["phase"],
        "S": status["S"],
        "requiredAction": status["required_action"],
    }
