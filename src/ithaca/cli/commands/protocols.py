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

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, errors_to_exit, json_option, show
from ithaca.kernel import ids, states
from ithaca.kernel.authority import require_user
from ithaca.kernel.errors import IthacaError, invalid_field
from ithaca.protocols import tooling, validate
from ithaca.protocols.service import ADMIT_CONNECTORS, ProtocolsService

_SINCE = re.compile(r"(\d{1,5})d?")


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

    def render(rows: list[dict[str, Any]]) -> None:
        table = _table("id", "prio", "scope", "source", "on", "selector", "rules", "constraints")
        for row in rows:
            table.add_row(
                row["id"],
                str(row["priority"]),
                row["scope"] + (" (override)" if row["overridesBase"] else ""),
                row["source"],
                "yes" if row["enabled"] else "no",
                _selector_text(row["selector"]),
                str(len(row["rules"])),
                str(len(row["effectiveConstraints"])),
            )
        console().print(table)

    show(found, as_json, render)


@group.command("get")
@click.argument("protocol_id")
@json_option
@click.pass_context
def get_command(ctx: click.Context, protocol_id: str, as_json: bool) -> None:
    """One protocol with its effective constraints."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        record = service.get_protocol(protocol_id)
    show(record, as_json, _render_record)


@group.command("bundle")
@click.argument("event_id")
@json_option
@click.pass_context
def bundle_command(ctx: click.Context, event_id: str, as_json: bool) -> None:
    """The bundle an event gets (computed; no load is recorded)."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        computed = service.compute_bundle(event_id)

    def render(value: dict[str, Any]) -> None:
        out = console()
        out.print(
            f"Bundle of {value['eventId']}: {len(value['protocols'])} protocols,"
            f" revision {value['revision']}, digest {value['digest'][:16]}",
            markup=False,
        )
        table = _table("id", "prio", "source", "rules", "constraints")
        for protocol in value["protocols"]:
            table.add_row(
                protocol["id"],
                str(protocol["priority"]),
                protocol["source"],
                str(len(protocol["rules"])),
                str(len(protocol["constraints"])),
            )
        out.print(table)

    show(computed, as_json, render)


@group.command("explain")
@click.argument("event_id")
@json_option
@click.pass_context
def explain_command(ctx: click.Context, event_id: str, as_json: bool) -> None:
    """Why an event gets its bundle, record by record."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        explained = tooling.explain(service, event_id)
    show(explained, as_json, _render_explanation)


@group.command("test")
@click.argument("fixtures_file", type=click.File("r", encoding="utf-8"))
@json_option
@click.pass_context
def test_command(ctx: click.Context, fixtures_file: IO[str], as_json: bool) -> None:
    """Run protocol fixtures in memory; exit 0 if all pass, 1 if any fails, 2 if invalid."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        result = tooling.run_fixtures(service, tooling.parse_fixtures(_read(fixtures_file)))

    def render(value: dict[str, Any]) -> None:
        out = console()
        for case in value["cases"]:
            mark = "[green]PASS[/green]" if case["passed"] else "[red]FAIL[/red]"
            out.print(f"{mark} {_escape(case['name'])}")
            for failure in case["failures"]:
                out.print(f"     {failure}", markup=False)
        out.print(f"{value['total'] - value['failed']} of {value['total']} cases passed.")

    show(result, as_json, render)
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
        days = _parse_since(since)
        findings = tooling.lint(service, since_days=days)

    def render(rows: list[dict[str, Any]]) -> None:
        out = console()
        if not rows:
            out.print("No findings.")
            return
        table = _table("level", "code", "subject", "message")
        for row in rows:
            table.add_row(row["level"], row["code"], row["subject"], row["message"])
        out.print(table)

    show(findings, as_json, render)
    if any(finding["level"] in ("warning", "error") for finding in findings):
        ctx.exit(1)


@group.command("seeds")
@json_option
@click.pass_context
def seeds_command(ctx: click.Context, as_json: bool) -> None:
    """The shipped base protocols and what the store holds for each."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        report = tooling.seed_status(service)

    def render(value: dict[str, Any]) -> None:
        out = console()
        table = _table("id", "prio", "seed hash", "state")
        for seed in value["seeds"]:
            table.add_row(seed["id"], str(seed["priority"]), seed["seedHash"][:16], seed["state"])
        out.print(table)
        digests = value["seedSetDigest"]
        out.print(f"seed_set_digest in code:  {digests['code']}", markup=False)
        out.print(f"seed_set_digest in store: {digests['store']}", markup=False)

    show(report, as_json, render)


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

    def render(rows: list[dict[str, Any]]) -> None:
        table = _table("seq", "at", "effect", "code", "tool", "event")
        for row in rows:
            table.add_row(
                str(row["seq"]),
                row["at"],
                row["effect"],
                row.get("reasonCode") or "",
                row["tool"],
                row.get("eventId") or "",
            )
        console().print(table)

    show(found, as_json, render)


@group.command("approvals")
@click.option("--all", "include_all", is_flag=True, help="Include used and expired ones.")
@json_option
@click.pass_context
def approvals_command(ctx: click.Context, include_all: bool, as_json: bool) -> None:
    """Approval requests: pending and granted ones, or --all."""
    service = _service(ctx, as_json)
    with errors_to_exit(as_json):
        found = service.list_approvals(include_all=include_all)

    def render(rows: list[dict[str, Any]]) -> None:
        table = _table("id", "status", "tool", "expires", "protocols")
        for row in rows:
            action = row["action"] or {}
            table.add_row(
                row["id"],
                row["status"],
                str(action.get("tool") or ""),
                row["expiresAt"],
                ", ".join(row["protocolIds"]),
            )
        console().print(table)

    show(found, as_json, render)


# --- user-only ---------------------------------------------------------------------------


@group.command("approve")
@click.argument("approval_id")
@click.pass_context
def approve_command(ctx: click.Context, approval_id: str) -> None:
    """★ Grant an approval for one exact action, after showing it."""
    service = _service(ctx)
    with errors_to_exit():
        approval = service.check_grantable(approval_id)
        _show_approval(service, approval)
        require_user(f"grant approval {approval_id}", approval_id)
        granted = service.grant_approval(approval_id)
    click.echo(f"Granted {approval_id} until {granted['expiresAt']}; retry the identical call.")


def _read(handle: IO[str]) -> str:
    """A file's text, or ``INVALID_INPUT`` when it is not UTF-8."""
    try:
        with handle:
            return handle.read()
    except UnicodeDecodeError as exc:
        raise invalid_field("", "NOT_UTF8", f"{handle.name} is not UTF-8 text") from exc


def _field_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The record field flags ``create`` and ``update`` share (``--id`` is create's own)."""
    options = [
        click.option(
            "--file",
            "record_file",
            type=click.File("r", encoding="utf-8"),
            help="The record as JSON ('-' reads it from the terminal).",
        ),
        click.option("--name"),
        click.option("--description"),
        click.option("--priority", type=int),
        click.option("--selector", help='JSON object, such as {"workflow": "coding"}.'),
        click.option("--rule", "rules", multiple=True, help="A rule (repeat for more)."),
        click.option(
            "--constraint", "constraint_texts", multiple=True, help="A constraint as JSON."
        ),
        click.option("--tag", "tags", multiple=True),
        click.option("--disabled", is_flag=True, help="Store the record disabled."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


@group.command("create")
@click.option("--id", "protocol_id", help="Protocol id, such as team.review-first.")
@_field_options
@click.option("--override", is_flag=True, help="Override the base protocol with this id.")
@click.pass_context
def create_command(ctx: click.Context, override: bool, **fields: Any) -> None:
    """★ Create a protocol (or, with --override, override a base one)."""
    service = _service(ctx)
    with errors_to_exit():
        record = _record_from(fields)
        # Shape first, so a typo exits 2 before anyone confirms; whether the id may be
        # used (reserved, taken, overridable) is the service's call.
        validate.validate_record(
            record,
            workflows=service.workflows,
            known_states=states.KNOWN_STATES,
            allow_reserved=True,
        )
        verb = "override base protocol" if override else "create protocol"
        require_user(f"{verb} {record['id']}", record["id"])
        created = service.create_protocol(record, actor="user", override=override)
    click.echo(f"Created {created['id']} (priority {created['priority']}).")


@group.command("update")
@click.argument("protocol_id")
@_field_options
@click.pass_context
def update_command(ctx: click.Context, protocol_id: str, **fields: Any) -> None:
    """★ Replace the given fields of a protocol."""
    service = _service(ctx)
    with errors_to_exit():
        changes = _record_from(fields)
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
@click.option(
    "--kind", type=click.Choice(validate.MESSAGE_KINDS), default="chat.message", show_default=True
)
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
        prompt_text = _read(prompt_file.open(encoding="utf-8")) if prompt_file else None
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


# --- input -------------------------------------------------------------------------------


def _record_from(fields: dict[str, Any]) -> dict[str, Any]:
    """A record (or the changes of one) from ``--file`` or the field flags, not both."""
    record_file = fields.pop("record_file")
    flags: dict[str, Any] = {}
    for flag, key in (
        ("protocol_id", "id"),
        ("name", "name"),
        ("description", "description"),
        ("priority", "priority"),
    ):
        if fields.get(flag) is not None:
            flags[key] = fields[flag]
    if fields["selector"] is not None:
        flags["selector"] = _json_flag(fields["selector"], "/selector")
    if fields["rules"]:
        flags["rules"] = list(fields["rules"])
    if fields["constraint_texts"]:
        flags["constraints"] = [
            _json_flag(text, f"/constraints/{index}")
            for index, text in enumerate(fields["constraint_texts"])
        ]
    if fields["tags"]:
        flags["tags"] = list(fields["tags"])
    if fields["disabled"]:
        flags["enabled"] = False
    if record_file is None:
        return flags
    if flags:
        raise invalid_field("", "CONFLICTING_OPTIONS", "give --file or the field flags, not both")
    loaded = _json_flag(_read(record_file), "")
    if not isinstance(loaded, dict):
        raise invalid_field("", "WRONG_TYPE", "the file must hold one JSON object")
    return loaded


def _json_flag(text: str, pointer: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        message = f"{pointer or 'the file'}: not JSON ({exc})"
        raise invalid_field(pointer, "INVALID_JSON", message) from exc


def _parse_since(text: str) -> int:
    matched = _SINCE.fullmatch(text.strip())
    if matched is None:
        raise invalid_field("/since", "WRONG_FORMAT", "--since takes a number of days, such as 30d")
    return int(matched.group(1))


# --- human output ------------------------------------------------------------------------


def _escape(text: Any) -> str:
    from rich.markup import escape

    return escape(str(text))


def _table(*columns: str) -> Any:
    from rich.table import Table

    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in columns:
        wrapped = column in _WRAPPED_COLUMNS
        if wrapped:
            table.add_column(column.upper(), min_width=16, overflow="fold")
        else:
            table.add_column(column.upper(), no_wrap=True)
    return _EscapingTable(table)


# Prose columns wrap; ids, codes and the like are kept whole, however narrow the terminal.
_WRAPPED_COLUMNS = frozenset({"selector", "message", "why", "protocols"})


class _EscapingTable:
    """A rich table whose cells are plain text, never markup (ids and rules are data)."""

    def __init__(self, table: Any):
        self.table = table

    def add_row(self, *cells: str) -> None:
        for column, cell in zip(self.table.columns, cells, strict=True):
            if column.no_wrap:
                column.min_width = max(column.min_width or 0, len(cell), len(str(column.header)))
        self.table.add_row(*(_escape(cell) for cell in cells))

    def __rich__(self) -> Any:
        return self.table


def _selector_text(selector: dict[str, Any]) -> str:
    if not selector:
        return "any event"
    return " ".join(
        f"{key}={value if isinstance(value, str) else '|'.join(value)}"
        for key, value in selector.items()
    )


def _constraint_text(constraint: dict[str, Any]) -> str:
    kind = constraint["kind"]
    if kind == "require_state":
        scope = constraint.get("for", "mutating")
        scope_text = scope if isinstance(scope, str) else ",".join(scope)
        text = f"{kind} {constraint['state']}={str(constraint.get('expect', True)).lower()}"
        text += f" for {scope_text}"
    else:
        parts = [
            f"{key} {', '.join(constraint[key])}"
            for key in ("tools", "classes", "commands", "paths")
            if key in constraint
        ]
        text = f"{kind} " + "; ".join(parts)
    if "effect" in constraint:
        text += f" ({constraint['effect']})"
    return text


def _render_record(record: dict[str, Any]) -> None:
    out = console()
    out.print(f"[bold]{_escape(record['id'])}[/bold]  {_escape(record['name'])}")
    out.print(f"  {record['description']}", markup=False)
    status = "enabled" if record["enabled"] else "disabled"
    origin = f"{record['scope']}, {record['source']}"
    if record["overridesBase"]:
        origin += ", overrides the base"
    if record["filePath"]:
        origin += f", from {record['filePath']}"
    out.print(f"  priority {record['priority']}, {status}, {origin}", markup=False)
    out.print(f"  applies to: {_selector_text(record['selector'])}", markup=False)
    if record["tags"]:
        out.print(f"  tags: {', '.join(record['tags'])}", markup=False)
    out.print("Rules:")
    for rule in record["rules"]:
        out.print(f"  - {rule}", markup=False)
    if record["effectiveConstraints"]:
        out.print("Constraints:")
        for constraint in record["effectiveConstraints"]:
            reason = f": {constraint['reason']}" if constraint.get("reason") else ""
            out.print(f"  - {_constraint_text(constraint)}{reason}", markup=False)


def _render_explanation(value: dict[str, Any]) -> None:
    out = console()
    out.print(f"[bold]Event {_escape(value['eventId'])}[/bold]")
    for key, selected in value["selectorValues"].items():
        shown = "null" if selected is None else selected
        out.print(f"  {key:<12} {shown}  ({value['sources'][key]})", markup=False)
    table = _table("id", "prio", "status", "why")
    for entry in value["records"]:
        if entry["status"] == "no-match":
            why = "; ".join(
                f"{m['key']}: wants {_json_text(m['expected'])}, is {_json_text(m['actual'])}"
                for m in entry["mismatches"]
            )
        elif entry["status"] == "corrupt":
            why = f"{entry['problem']}: {entry['detail']}"
        else:
            why = ""
        table.add_row(entry["id"], str(entry["priority"]), entry["status"], why)
    out.print(table)
    if value["effectiveConstraints"]:
        out.print("Effective constraints:")
        for item in value["effectiveConstraints"]:
            out.print(
                f"  [{item['protocolId']} #{item['index']}] {_constraint_text(item['constraint'])}",
                markup=False,
            )
    load = value["load"]
    if load["ok"]:
        out.print(
            f"load_protocols would return {len(load['protocolIds'])} protocols"
            f" (digest {load['digest'][:16]}).",
            markup=False,
        )
    else:
        error = load["error"]
        out.print(f"load_protocols would fail: {error['code']}: {error['message']}", markup=False)


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _show_approval(service: ProtocolsService, approval: dict[str, Any]) -> None:
    """Show the exact action and the protocols asking for approval, before the prompt."""
    out = console()
    action = approval["action"] or {}
    tool_input = action.get("input")
    out.print(
        f"[bold]Approval {_escape(approval['id'])}[/bold] ({approval['status']},"
        f" requested {approval['requestedAt']}, expires {approval['expiresAt']})"
    )
    out.print(f"  tool     {action.get('tool')}", markup=False)
    if isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        out.print(f"  command  {tool_input['command']}", markup=False)
    else:
        out.print(f"  input    {_json_text(tool_input)}", markup=False)
    out.print(f"  cwd      {action.get('cwd')}", markup=False)
    out.print(f"  session  {approval['hostSessionId']}", markup=False)
    reasons = _approval_reasons(service, approval)
    out.print("Asked for by:")
    for protocol_id in approval["protocolIds"]:
        out.print(f"  {protocol_id}", markup=False)
        for reason in reasons.get(protocol_id, []):
            out.print(f"    - {reason}", markup=False)


def _approval_reasons(service: ProtocolsService, approval: dict[str, Any]) -> dict[str, list[str]]:
    """Each asking protocol's approval and ask constraints, from its event's bundle."""
    if not approval["eventId"]:
        return {}
    try:
        computed = service.compute_bundle(approval["eventId"])
    except IthacaError as exc:
        return {pid: [f"(its rules cannot be read: {exc.code})"] for pid in approval["protocolIds"]}
    reasons: dict[str, list[str]] = {}
    for protocol in computed["protocols"]:
        if protocol["id"] not in approval["protocolIds"]:
            continue
        reasons[protocol["id"]] = [
            constraint.get("reason") or _constraint_text(constraint)
            for constraint in protocol["constraints"]
            if constraint["kind"] == "require_approval" or constraint.get("effect") == "ask"
        ]
    return reasons
