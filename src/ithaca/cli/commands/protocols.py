"""``ithaca protocols``: read, test and change the project's protocols.

Reads take ``--json``. The commands that change rules, admit events or grant approvals
are the user's alone (★ in the reference): each checks for a person at a terminal and
asks them to type the id of the thing it changes *before* it changes anything, then
calls the service with ``actor="user"``. Input is parsed and, for ``create``, validated
first, so a typo fails with exit 2 before anyone is asked to confirm.

``admit`` has no existing object to name, so the CLI draws the new event's id up front,
shows it, and admits the event under that id once it is typed back.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import errors_to_exit, json_option, show
from ithaca.cli.protocol_input import read_text, record_from, record_options, since_days
from ithaca.cli.protocol_render import (
    render_approvals,
    render_bundle,
    render_decisions,
    render_explanation,
    render_findings,
    render_fixture_results,
    render_protocols,
    render_record,
    render_seeds,
    show_approval,
)
from ithaca.kernel import ids, invalid_field, require_user
from ithaca.protocols import (
    ADMIT_CONNECTORS,
    MESSAGE_KINDS,
    ProtocolsService,
)


@click.group("protocols")
def group() -> None:
    """Mandatory rules per admitted prompt, enforced before each tool call."""


def _service(ctx: click.Context, as_json: bool = False) -> ProtocolsService:
    return opened(ctx, as_json).protocols


# --- reads -----------------------------------------------------------------------------


@group.command("list")
@click.option("--scope", type=click.Choice(["base", "user"]))
@click.option("--source", type=click.Choice(["seed", "sqlite", "file"]))
@click.option("--enabled/--disabled", default=None, help="Only enabled, or only disabled.")
@click.option("--tag")
@json_option
@click.pass_context
def list_command(
    ctx: click.Context,
    scope: str | None,
    source: str | None,
    enabled: bool | None,
    tag: str | None,
    as_json: bool,
) -> None:
    """Stored protocols in bundle order (priority, then id)."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        found = service.list_protocols(scope=scope, source=source, enabled=enabled, tag=tag)
    show(found, as_json, render_protocols)


@group.command("get")
@click.argument("protocol_id")
@json_option
@click.pass_context
def get_command(ctx: click.Context, protocol_id: str, as_json: bool) -> None:
    """One protocol with its effective constraints."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        record = service.get_protocol(protocol_id)
    show(record, as_json, render_record)


@group.command("bundle")
@click.argument("event_id")
@json_option
@click.pass_context
def bundle_command(ctx: click.Context, event_id: str, as_json: bool) -> None:
    """The bundle an event gets (computed; no load is recorded)."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        computed = service.compute_bundle(event_id)
    show(computed, as_json, render_bundle)


@group.command("explain")
@click.argument("event_id")
@json_option
@click.pass_context
def explain_command(ctx: click.Context, event_id: str, as_json: bool) -> None:
    """Why an event gets its bundle, record by record."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        explained = service.explain(event_id)
    show(explained, as_json, render_explanation)


@group.command("test")
@click.argument("fixtures_file", type=click.File("r", encoding="utf-8"))
@json_option
@click.pass_context
def test_command(ctx: click.Context, fixtures_file: IO[str], as_json: bool) -> None:
    """Run protocol fixtures in memory; exit 0 if all pass, 1 if any fails, 2 if invalid."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        result = service.run_fixtures(read_text(fixtures_file))
    show(result, as_json, render_fixture_results)
    if not result["passed"]:
        ctx.exit(1)


@group.command("lint")
@click.option("--since", default="30d", show_default=True, help="Window, in days (30d).")
@json_option
@click.pass_context
def lint_command(ctx: click.Context, since: str, as_json: bool) -> None:
    """Find duplicated, shadowed, tied, unused and advisory-only rules; exit 1 on warnings."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        days = since_days(since)
        findings = service.lint(since_days=days)
    show(findings, as_json, render_findings)
    if any(finding["level"] in ("warning", "error") for finding in findings):
        ctx.exit(1)


@group.command("seeds")
@json_option
@click.pass_context
def seeds_command(ctx: click.Context, as_json: bool) -> None:
    """The shipped base protocols and what the store holds for each."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        report = service.seed_status()
    show(report, as_json, render_seeds)


@group.command("decisions")
@click.option("--event", "event_id", help="Only decisions under this event.")
@click.option("--session", help="Only decisions in this host session.")
@click.option("--effect", type=click.Choice(["allow", "ask", "deny"]))
@click.option("--limit", type=click.IntRange(1, 100000), default=50, show_default=True)
@json_option
@click.pass_context
def decisions_command(
    ctx: click.Context,
    event_id: str | None,
    session: str | None,
    effect: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Recent enforcement decisions, newest first."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        found = service.list_decisions(
            event_id=event_id, session=session, effect=effect, limit=limit
        )
    show(found, as_json, render_decisions)


@group.command("approvals")
@click.option("--all", "include_all", is_flag=True, help="Include used and expired ones.")
@json_option
@click.pass_context
def approvals_command(ctx: click.Context, include_all: bool, as_json: bool) -> None:
    """Approval requests: pending and granted ones, or --all."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        found = service.list_approvals(include_all=include_all)
    show(found, as_json, render_approvals)


# --- user-only ---------------------------------------------------------------------------


@group.command("approve")
@click.argument("approval_id")
@click.pass_context
def approve_command(ctx: click.Context, approval_id: str) -> None:
    """★ Grant an approval for one exact action, after showing it."""
    service = _service(ctx)
    with errors_to_exit():
        approval = service.check_grantable(approval_id)
        show_approval(service, approval)
        require_user(f"grant approval {approval_id}", approval_id)
        granted = service.grant_approval(approval_id)
    click.echo(f"Granted {approval_id} until {granted['expiresAt']}; retry the identical call.")


@group.command("create")
@click.option("--id", "protocol_id", help="Protocol id, such as team.review-first.")
@record_options
@click.option("--override", is_flag=True, help="Override the base protocol with this id.")
@click.pass_context
def create_command(ctx: click.Context, override: bool, **fields: Any) -> None:
    """★ Create a protocol (or, with --override, override a base one)."""
    service = _service(ctx)
    with errors_to_exit():
        record = record_from(fields)
        # Shape first, so a typo exits 2 before anyone confirms; whether the id may be
        # used (reserved, taken, overridable) is the service's call.
        service.check_shape(record)
        verb = "override base protocol" if override else "create protocol"
        require_user(f"{verb} {record['id']}", record["id"])
        created = service.create_protocol(record, actor="user", override=override)
    click.echo(f"Created {created['id']} (priority {created['priority']}).")


@group.command("update")
@click.argument("protocol_id")
@record_options
@click.pass_context
def update_command(ctx: click.Context, protocol_id: str, **fields: Any) -> None:
    """★ Replace the given fields of a protocol."""
    service = _service(ctx)
    with errors_to_exit():
        changes = record_from(fields)
        if not changes:
            raise invalid_field("", "NO_CHANGES", "give --file or at least one field flag")
        service.update_protocol(protocol_id, changes, actor="user", check_only=True)
        require_user(f"update protocol {protocol_id}", protocol_id)
        updated = service.update_protocol(protocol_id, changes, actor="user")
    click.echo(f"Updated {updated['id']}.")


def _switch(name: str, enabled: bool) -> click.Command:
    @click.argument("protocol_id")
    @click.pass_context
    def command(ctx: click.Context, protocol_id: str) -> None:
        service = _service(ctx)
        with errors_to_exit():
            service.set_enabled(protocol_id, enabled, actor="user", check_only=True)
            require_user(f"{name} protocol {protocol_id}", protocol_id)
            record = service.set_enabled(protocol_id, enabled, actor="user")
        click.echo(f"{record['id']} is {'enabled' if record['enabled'] else 'disabled'}.")

    command.__doc__ = f"★ {name.capitalize()} a user protocol."
    return group.command(name)(command)


_switch("enable", True)
_switch("disable", False)


@group.command("remove")
@click.argument("protocol_id")
@click.pass_context
def remove_command(ctx: click.Context, protocol_id: str) -> None:
    """★ Remove a user protocol; removing an override restores the base."""
    service = _service(ctx)
    with errors_to_exit():
        service.remove_protocol(protocol_id, actor="user", check_only=True)
        require_user(f"remove protocol {protocol_id}", protocol_id)
        removed = service.remove_protocol(protocol_id, actor="user")
    suffix = "; the base protocol is back" if removed["restoredBase"] else ""
    click.echo(f"Removed {protocol_id}{suffix}.")


@group.command("admit")
@click.option("--connector", type=click.Choice(ADMIT_CONNECTORS), default="cli", show_default=True)
@click.option("--kind", type=click.Choice(MESSAGE_KINDS), default="chat.message", show_default=True)
@click.option("--workflow")
@click.option("--task")
@click.option("--project-id")
@click.option("--client-id")
@click.option("--host-session", help="Make the event current for this host session.")
@click.option(
    "--prompt-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Prompt text to digest (only its SHA-256 and length are kept).",
)
@click.pass_context
def admit_command(
    ctx: click.Context,
    connector: str,
    kind: str,
    workflow: str | None,
    task: str | None,
    project_id: str | None,
    client_id: str | None,
    host_session: str | None,
    prompt_file: Path | None,
) -> None:
    """★ Admit an event outside a host hook; the typed token is the new event's id."""
    service = _service(ctx)
    event_id = ids.new("evt")
    with errors_to_exit():
        prompt_text = read_text(prompt_file.open(encoding="utf-8")) if prompt_file else None
        arguments: dict[str, Any] = dict(
            connector=connector,
            kind=kind,
            workflow=workflow,
            task=task,
            project_id=project_id,
            client_id=client_id,
            host_session_id=host_session,
            prompt_text=prompt_text,
            event_id=event_id,
            actor="user",
        )
        service.admit_event(**arguments, check_only=True)
        require_user(f"admit {connector} event {event_id}", event_id)
        event = service.admit_event(**arguments)
    click.echo(f"Admitted {event['id']} (workflow: {event['context']['workflow']}).")
