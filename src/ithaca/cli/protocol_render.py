"""How ``ithaca protocols`` shows its answers to a person (``--json`` prints them as they are).

Ids, rules and reasons are data, never rich markup, so every cell and line is printed as
plain text; prose columns wrap, ids and codes stay whole however narrow the terminal.
"""

from __future__ import annotations

import json
from typing import Any

from ithaca.cli.output import console
from ithaca.kernel import IthacaError
from ithaca.protocols import ProtocolsService


def render_protocols(rows: list[dict[str, Any]]) -> None:
    """``protocols list``: one row per stored protocol."""
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


def render_record(record: dict[str, Any]) -> None:
    """``protocols get``: one protocol, its rules and effective constraints."""
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


def render_bundle(value: dict[str, Any]) -> None:
    """``protocols bundle``: the bundle's summary line and its protocols."""
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


def render_explanation(value: dict[str, Any]) -> None:
    """``protocols explain``: the selector values, each record's verdict, and the load."""
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


def render_fixture_results(value: dict[str, Any]) -> None:
    """``protocols test``: PASS or FAIL per case, with each failure, then the tally."""
    out = console()
    for case in value["cases"]:
        mark = "[green]PASS[/green]" if case["passed"] else "[red]FAIL[/red]"
        out.print(f"{mark} {_escape(case['name'])}")
        for failure in case["failures"]:
            out.print(f"     {failure}", markup=False)
    out.print(f"{value['total'] - value['failed']} of {value['total']} cases passed.")


def render_findings(rows: list[dict[str, Any]]) -> None:
    """``protocols lint``: one row per finding, or that there are none."""
    out = console()
    if not rows:
        out.print("No findings.")
        return
    table = _table("level", "code", "subject", "message")
    for row in rows:
        table.add_row(row["level"], row["code"], row["subject"], row["message"])
    out.print(table)


def render_seeds(value: dict[str, Any]) -> None:
    """``protocols seeds``: each shipped base protocol's state, then both seed-set digests."""
    out = console()
    table = _table("id", "prio", "seed hash", "state")
    for seed in value["seeds"]:
        table.add_row(seed["id"], str(seed["priority"]), seed["seedHash"][:16], seed["state"])
    out.print(table)
    digests = value["seedSetDigest"]
    out.print(f"seed_set_digest in code:  {digests['code']}", markup=False)
    out.print(f"seed_set_digest in store: {digests['store']}", markup=False)


def render_decisions(rows: list[dict[str, Any]]) -> None:
    """``protocols decisions``: one row per enforcement decision."""
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


def render_approvals(rows: list[dict[str, Any]]) -> None:
    """``protocols approvals``: one row per approval request."""
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


def show_approval(service: ProtocolsService, approval: dict[str, Any]) -> None:
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


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)
