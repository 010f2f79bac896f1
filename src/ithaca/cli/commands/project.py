"""Project commands: ``init``, ``status``, ``log`` and ``doctor``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, emit_json, errors_to_exit, json_option, show
from ithaca.kernel.errors import IthacaError, NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.project import Project
    from ithaca.kernel.store import Store


@click.command()
@json_option
@click.pass_context
def init(ctx: click.Context, as_json: bool) -> None:
    """Create .ithaca/ in this repository (safe to run again)."""
    from ithaca.app import init_project

    with errors_to_exit(as_json):
        project, made = init_project(ctx.obj["project_path"])
    ctx.call_on_close(project.close)
    result = {"root": str(project.project.root), "created": made}
    if as_json:
        emit_json(result)
    elif made:
        click.echo(f"Initialised Ithaca in {project.project.root}:")
        for item in made:
            click.echo(f"  + {item}")
    else:
        click.echo(f"Ithaca is already set up in {project.project.root}.")


@click.command()
@json_option
@click.pass_context
def status(ctx: click.Context, as_json: bool) -> None:
    """Where the project's state lives and what it holds."""
    from ithaca.kernel import lockdown

    project = opened(ctx, as_json)
    conn = project.store.connection()
    counts = dict(
        conn.execute("SELECT scope || ':' || enabled, count(*) FROM protocols GROUP BY 1")
    )
    sessions = conn.execute(
        "SELECT host_session_id, current_event_id, loaded_digest IS NOT NULL"
        " FROM protocol_sessions ORDER BY updated_at DESC LIMIT 5"
    ).fetchall()
    info: dict[str, Any] = {
        "root": str(project.project.root),
        "stateRoot": str(project.project.state_root),
        "database": str(project.project.db_path),
        "schemaVersion": project.store.version(),
        "journalEvents": conn.execute("SELECT count(*) FROM journal").fetchone()[0],
        "protocols": {
            "base": counts.get("base:1", 0),
            "userEnabled": counts.get("user:1", 0),
            "userDisabled": counts.get("user:0", 0),
        },
        "strict": project.config["protocols"]["strict"],
        "strictApproval": project.config["ultragoal"]["strict_approval"],
        "verificationCritic": project.config["verification"]["require"],
        "recentSessions": [
            {"hostSessionId": sid, "currentEventId": eid, "bundleLoaded": bool(loaded)}
            for sid, eid, loaded in sessions
        ],
        "ulysses": _ulysses_summary(project.ulysses.status({})),
        "hooksNotRunning": _unhooked_calls(conn),
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
    from ithaca.validators.confine import bubblewrap

    if bubblewrap() is not None:
        return "confined"
    if settings["validators"]["require_filesystem_isolation"]:
        return "refused: no bubblewrap here, so every validator run is refused"
    return "UNCONFINED: no bubblewrap, and validators.require_filesystem_isolation = false"


def _install_profiles(state_root: Any) -> dict[str, str]:
    """Per installed host, the install profile in force (docs/hooks.md, threat model)."""
    from ithaca.hosts.install.files import read_json_object
    from ithaca.hosts.install.manifest import manifest_relpath
    from ithaca.hosts.main import HOSTS
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


def _unhooked_calls(conn: Any) -> list[dict[str, str]]:
    """Per host, the latest MCP call no hook saw, if none of that host's hooks has run since
    (the server refuses such calls with HOOKS_NOT_RUNNING)."""
    from ithaca.mcp.caller import UNHOOKED_EVENT

    latest = conn.execute(
        "SELECT json_extract(payload, '$.host'), max(at) FROM journal WHERE kind = ? GROUP BY 1",
        (UNHOOKED_EVENT,),
    ).fetchall()
    found = []
    for host, at in latest:
        seen = conn.execute(
            "SELECT max(last_seen_at) FROM host_sessions WHERE host = ?", (host,)
        ).fetchone()[0]
        if seen is None or seen < at:
            found.append({"host": str(host), "at": str(at)})
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


@click.command()
@click.option("--kind", help="Event kind, or a prefix ending in '.' or '*' (protocols.*).")
@click.option("--subject", help="Only events about this id.")
@click.option("--limit", type=click.IntRange(1, 100000), default=200, show_default=True)
@json_option
@click.pass_context
def log(
    ctx: click.Context, kind: str | None, subject: str | None, limit: int, as_json: bool
) -> None:
    """The journal: every state change and decision, oldest first."""
    from ithaca.kernel import journal

    project = opened(ctx, as_json)
    entries = journal.query(
        project.store.connection(), kind=kind, subject=subject, limit=limit, newest=True
    )

    def render(rows: list[dict[str, Any]]) -> None:
        out = console()
        for row in rows:
            out.print(
                f"[dim]{row['seq']:>5} {row['at']}[/dim] {row['actor']:<6} "
                f"[bold]{row['kind']}[/bold] {row['subject'] or ''}"
            )
            summary = describe(row)
            if summary:
                out.print(f"        {summary}", markup=False)

    show(entries, as_json, render)


def describe(entry: dict[str, Any]) -> str:
    """One line that says what a journal event decided or changed."""
    unusual = "(payload not in its usual shape; `ithaca doctor` checks the journal)"
    payload = entry["payload"]
    if not isinstance(payload, dict) or "unreadablePayload" in payload:
        return unusual
    try:
        return _describe(entry)
    except (KeyError, TypeError, AttributeError):
        return unusual


def _describe(entry: dict[str, Any]) -> str:
    payload = entry["payload"]
    kind = entry["kind"]
    if kind == "protocols.decision":
        final = payload.get("final") or {}
        effect = final.get("effect") or payload["effect"]
        code = final.get("code") or payload.get("reasonCode") or ""
        gate = final.get("gate") or "protocols"
        verb = {"deny": "DENIED", "block": "BLOCKED", "ask": "ASKED"}.get(effect, "allowed")
        line = f"{payload['tool']} ({payload['toolClass']}): {verb}"
        if effect in ("deny", "block", "ask"):
            line += f" {code} ({gate})"
            if gate == "protocols" and payload.get("reason"):
                line += " — " + payload["reason"].splitlines()[0]
        return line
    if kind == "protocols.event_admitted":
        context = payload["context"]
        return f"{payload['connector']} {payload['kind']} workflow={context['workflow']}"
    if kind == "protocols.bundle_loaded":
        return f"{len(payload['protocolIds'])} protocols, digest {payload['digest'][:12]}"
    if kind.startswith("protocols.") and "afterHash" in payload:
        return f"{payload['id']}"
    if kind == "protocols.approval_granted":
        return f"until {payload['expiresAt']}"
    if kind.startswith("critic."):
        return _critic_line(kind, payload)
    return ""


def _critic_line(kind: str, payload: dict[str, Any]) -> str:
    """Why the end-of-turn critic let a turn end or held it."""
    if kind == "critic.changed":
        return f"{payload['tool']} changed the project" + (" (first)" if payload["first"] else "")
    if kind == "critic.verified":
        return f"a verification passed (reported by the {payload['measured']})"
    verdict = payload["verdict"]
    line = {
        "blocked": f"BLOCKED the end: run `{payload.get('command')}` ({payload.get('block')})",
        "verified": f"may end: `{payload.get('command')}` passed after the last change",
        "unchanged": "may end: the turn left the project as it was",
        "unverified": f"ended UNVERIFIED: {payload.get('why')}",
    }.get(verdict, verdict)
    if payload.get("measured") == "ithaca":
        line += " (run by Ithaca)"
    return line


@click.group(invoke_without_command=True)
@click.option(
    "--repair",
    is_flag=True,
    help="Back up (verified) first, then migrate, settle interrupted writes, free orphaned"
    " tasks and rewrite lost lesson files.",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="User only: quarantine the database and load a new one from the tracked files.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Verify the whole journal chain, not only what was appended since the last check.",
)
@json_option
@click.pass_context
def doctor(ctx: click.Context, repair: bool, rebuild: bool, full: bool, as_json: bool) -> None:
    """Check the store's integrity, the journal chain and each part's state."""
    if ctx.invoked_subcommand is not None:
        return
    if repair and rebuild:
        raise click.UsageError("--repair and --rebuild are separate operations; choose one")
    if rebuild:
        _rebuild(ctx, as_json)
        return
    from ithaca.kernel import doctor as kernel_doctor

    with errors_to_exit(as_json):
        found = _doctor_project(ctx)
        store = _raw_store(ctx, found)
        repaired = kernel_doctor.repair(found, store) if repair else {}
        report = kernel_doctor.check(found, store, full=full)
    report["repaired"] = repaired.get("repaired", [])
    if repair:
        report["backup"] = repaired["backup"]

    def render(value: dict[str, Any]) -> None:
        out = console()
        if repair:
            out.print(f"Backup: {value['backup']['path']} (verified)", markup=False)
        if value["repaired"]:
            out.print(f"Repaired: {', '.join(value['repaired'])}", markup=False)
        _render_check(out, value)

    show(report, as_json, render)
    if not report["ok"]:
        ctx.exit(1)


@doctor.command("restore")
@click.argument("backup")
@json_option
@click.pass_context
def doctor_restore(ctx: click.Context, backup: str, as_json: bool) -> None:
    """User only: replace the database with BACKUP (a file in .runtime/backups/)."""
    from ithaca.kernel import doctor as kernel_doctor
    from ithaca.kernel.authority import require_user

    with errors_to_exit(as_json):
        found = _doctor_project(ctx)
        path, manifest = kernel_doctor.verified_backup(found, backup)
        token = os.path.basename(path)[: -len(".db")]
        click.echo(
            f"Backup {token}: schema {manifest['user_version']}, journal up to seq"
            f" {manifest['journal_head_seq']}. The current database is quarantined, not deleted."
        )
        require_user(f"restore backup {token}", token)
        restored = kernel_doctor.restore(found, _raw_store(ctx, found), path)
        report = kernel_doctor.check(found, _raw_store(ctx, found))
    result = {**restored, "doctor": report}

    def render(value: dict[str, Any]) -> None:
        out = console()
        out.print(f"Restored {value['backup']}", markup=False)
        out.print(f"The previous database is in {value['quarantine']}", markup=False)
        _render_check(out, value["doctor"])

    show(result, as_json, render)


@doctor.command("lift-lockdown")
@json_option
@click.pass_context
def doctor_lift_lockdown(ctx: click.Context, as_json: bool) -> None:
    """User only: accept what changed and end every lockdown (review it with `ithaca doctor`)."""
    from ithaca.hosts.effects import check
    from ithaca.kernel import clock, lockdown
    from ithaca.kernel.authority import require_user
    from ithaca.kernel.store import Store

    with errors_to_exit(as_json):
        found = _doctor_project(ctx)
        store = Store(found.db_path, backups_dir=found.backups_dir)
        ctx.call_on_close(store.close)
        for finding in check(found, store.connection()):
            click.echo(f"  {finding['message']}")
        click.echo("Lifting accepts every protected file as it is now.")
        require_user("lift the lockdown", "lift")
        with store.write() as conn:
            lifted = lockdown.lift(conn, found, at=clock.now())
    result = {"lifted": lifted}

    def render(value: dict[str, Any]) -> None:
        console().print(f"Lifted {len(value['lifted'])} lockdown(s).", markup=False)

    show(result, as_json, render)


def _rebuild(ctx: click.Context, as_json: bool) -> None:
    from ithaca.app import open_project
    from ithaca.kernel import doctor as kernel_doctor
    from ithaca.kernel.authority import require_user

    with errors_to_exit(as_json):
        found = _doctor_project(ctx, database=False)
        click.echo(
            "Rebuild quarantines the database and loads a new one from the tracked files;"
            " sessions, idempotency keys and the old journal are not recovered."
        )
        require_user("rebuild the state database from tracked files", "rebuild")
        report = kernel_doctor.rebuild(found, _raw_store(ctx, found))
        project = open_project(ctx.obj["project_path"])
        ctx.call_on_close(project.close)
        report["lost"] = kernel_doctor.losses(report["quarantine"], project.store.connection())

    def render(value: dict[str, Any]) -> None:
        out = console()
        out.print(f"Rebuilt; the old database is in {value['quarantine']}", markup=False)
        for part in value["parts"]:
            loaded = ", ".join(f"{n} {name}" for name, n in part["loaded"].items())
            out.print(f"  {part['part']}: loaded {loaded}", markup=False)
            for line in part["warnings"] + part["notes"]:
                out.print(f"    {line}", markup=False)
        lost = ", ".join(f"{table} {n}" for table, n in value["lost"].items()) or "nothing"
        out.print(f"  lost rows: {lost}", markup=False)

    show(report, as_json, render)


def _doctor_project(ctx: click.Context, *, database: bool = True) -> Project:
    """The project the doctor works on; ``NOT_INITIALISED`` without one (or its database,
    unless ``database`` is false: a rebuild needs none)."""
    from ithaca.kernel.project import find_project

    found = find_project(ctx.obj["project_path"])
    if found is None or (database and not os.path.exists(found.db_path)):
        raise NotFound("NOT_INITIALISED", "no Ithaca project here; run `ithaca init`")
    return found


def _raw_store(ctx: click.Context, found: Project) -> Store:
    """The store as it is: the doctor migrates only when asked to repair."""
    from ithaca.kernel.store import Store

    store = Store(found.db_path, backups_dir=found.backups_dir, migrate=False)
    ctx.call_on_close(store.close)
    return store


def _render_check(out: Any, value: dict[str, Any]) -> None:
    out.print(
        f"Schema {value['schemaVersion']}/{value['latestVersion']}, "
        f"{value['journalEvents']} journal events."
    )
    for finding in value["findings"]:
        out.print(
            f"  {finding['severity']:<7} {finding['code']}: {finding['message']}", markup=False
        )
    verdict = {"healthy": "[green]OK[/green]", "degraded": "[yellow]Warnings[/yellow]"}
    out.print(verdict.get(value["status"], "[red]Problems found[/red]"))
