"""``ithaca doctor``: check, repair, restore or rebuild the state database."""

from __future__ import annotations

import os
from typing import Any

import click

from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel import NotFound

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel import Project, Store


@click.group("doctor", invoke_without_command=True)
@click.option(
    "--repair",
    is_flag=True,
    help="Back up (verified) first, then migrate, settle interrupted writes, free orphaned"
    " tasks, remove stale worktrees and branches (each backed up first) and rewrite lost"
    " lesson files.",
)
@click.option(
    "--rebuild",
    is_flag=True,
    help="User only: quarantine the database and load a new one from the tracked files.",
)
@click.option(
    "--full",
    is_flag=True,
    help="Re-derive every journal row's hash and check the whole file with SQLite (a"
    " routine check reads every row too, by the pages it sealed).",
)
@json_option
@click.pass_context
def group(ctx: click.Context, repair: bool, rebuild: bool, full: bool, as_json: bool) -> None:
    """Check the store's integrity, the journal chain and each part's state."""
    if ctx.invoked_subcommand is not None:
        return
    if repair and rebuild:
        raise click.UsageError("--repair and --rebuild are separate operations; choose one")
    if rebuild:
        _rebuild(ctx, as_json)
        return
    from ithaca.app import lost_database_named
    from ithaca.kernel import doctor as kernel_doctor

    with errors_to_exit(as_json):
        found = _doctor_project(ctx)
        store = _raw_store(ctx, found)
        with lost_database_named(found):  # a database that would not open: say what to do
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


@group.command("restore")
@click.argument("backup")
@json_option
@click.pass_context
def doctor_restore(ctx: click.Context, backup: str, as_json: bool) -> None:
    """User only: replace the database with BACKUP (a file in .runtime/backups/)."""
    from ithaca.kernel import doctor as kernel_doctor
    from ithaca.kernel import require_user

    with errors_to_exit(as_json):
        found = _doctor_project(ctx, database=False)  # the one it replaces may be lost
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


@group.command("lift-lockdown")
@json_option
@click.pass_context
def doctor_lift_lockdown(ctx: click.Context, as_json: bool) -> None:
    """User only: accept what changed and end every lockdown (review it with `ithaca doctor`)."""
    from ithaca.hosts.effects import check
    from ithaca.kernel import Store, clock, lockdown, require_user

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
    from ithaca.kernel import require_user

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
    unless ``database`` is false: a restore or a rebuild needs none), and the code of
    ``kernel.lost_state`` where Ithaca was set up but its state is gone, as the hooks and
    ``ithaca status`` say it. An emptied database is left to the check's own report."""
    from ithaca.app import lost_state_at
    from ithaca.kernel import find_project, lost_state

    found = find_project(ctx.obj["project_path"])
    lost = lost_state_at(ctx.obj["project_path"], found, database=database)
    if lost is not None and lost.code != lost_state.EMPTIED:
        raise lost.error()
    if found is None or (database and not os.path.exists(found.db_path)):
        raise NotFound("NOT_INITIALISED", "no Ithaca project here; run `ithaca init`")
    return found


def _raw_store(ctx: click.Context, found: Project) -> Store:
    """The store as it is: the doctor migrates only when asked to repair."""
    from ithaca.kernel import Store

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
        _render_unit_files(out, finding.get("files"))
    verdict = {"healthy": "[green]OK[/green]", "degraded": "[yellow]Warnings[/yellow]"}
    out.print(verdict.get(value["status"], "[red]Problems found[/red]"))


# How many of a pending unit's files the text report lists (``--json`` has them all).
SHOWN_FILES = 20


def _render_unit_files(out: Any, files: Any) -> None:
    """The files a pending recoverable unit moved or wrote, one a line, under its finding."""
    if not isinstance(files, list):
        return
    for entry in files[:SHOWN_FILES]:
        where = f" → {entry['now_at']}" if entry.get("now_at") else ""
        out.print(f"            {entry['state']:<8} {entry['path']}{where}", markup=False)
    if len(files) > SHOWN_FILES:
        out.print(f"            … and {len(files) - SHOWN_FILES} more (--json lists them)")
