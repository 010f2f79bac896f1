"""``ithaca status``: where the project's state lives and what it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, json_option, show
from ithaca.kernel import IthacaError


@click.command("status")
@json_option
@click.pass_context
def command(ctx: click.Context, as_json: bool) -> None:
    """Where the project's state lives and what it holds."""
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
        "validators": _validator_confinement(project.config),
    }

    def render(value: dict[str, Any]) -> None:
        out = console()
        out.print(f"[bold]Ithaca[/bold] at {value['root']}")
        out.print(f"  state      {value['stateRoot']} (schema {value['schemaVersion']})")
        out.print(f"  journal    {value['journalEvents']} events")
        p = value["protocols"]
        out.print(
            f"  protocols  {p['base']} base, {p['userEnabled']} user enabled,"
            f" {p['userDisabled']} disabled; strict mode {'on' if value['strict'] else 'off'}"
        )
        for session in value["recentSessions"]:
            state = "loaded" if session["bundleLoaded"] else "not loaded"
            out.print(
                f"  session    {session['hostSessionId']}: {session['currentEventId']} ({state})"
            )
        from ithaca.hosts.install.sandbox import UNSANDBOXED_NOTE

        for host, profile in value["installProfiles"].items():
            line = f"profile {profile}" if profile == "sandboxed" else UNSANDBOXED_NOTE
            out.print(f"  {host:10} {line}", markup=False)
        for held in value["lockdowns"]:
            out.print(
                f"  [bold red]LOCKDOWN[/bold red]   {held['host']} session {held['session']}"
                f" since {held['enteredAt']}: {held['changes'][0]['path']} changed. Review it"
                " with `ithaca doctor`, then run `ithaca doctor lift-lockdown`."
            )
        if not value["strictApproval"]:
            out.print(
                "  ultragoal  strict approval OFF: the agent may confirm its own stories while"
                " planning (ultragoal.strict_approval = false in the configuration)",
                markup=False,
            )
        if not value["verificationCritic"]:
            out.print(
                "  verification critic OFF: a coding turn may end without a passing"
                " verification after its last change (verification.require = false)",
                markup=False,
            )
        if value["validators"] != "confined":
            out.print(f"  validators {value['validators']}", markup=False)
        for unhooked in value["hooksNotRunning"]:
            out.print(
                f"  [bold red]hooks      NOT RUNNING for {unhooked['host']}[/bold red]: an MCP"
                f" call arrived at {unhooked['at']} that no hook saw; Ithaca refused it. Run"
                f" `ithaca install --doctor {unhooked['host']}`."
            )
        debugging = value["ulysses"]
        if debugging is None:
            out.print("  ulysses    no active debugging session")
        else:
            out.print(
                f"  ulysses    {debugging['sessionId']}: {debugging['phase']}"
                f" (S={debugging['S']}); next: {debugging['requiredAction']}"
            )

    show(info, as_json, render)


def _validator_confinement(settings: dict[str, Any]) -> str:
    """How validator cells run here: confined, refused or unconfined (docs/ulysses.md)."""
    from ithaca.validators import bubblewrap

    if bubblewrap() is not None:
        return "confined"
    if settings["validators"]["require_filesystem_isolation"]:
        return "refused: no bubblewrap here, so every validator run is refused"
    return "UNCONFINED: no bubblewrap, and validators.require_filesystem_isolation = false"


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
