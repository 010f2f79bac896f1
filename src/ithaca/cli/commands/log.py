"""``ithaca log``: the journal, every state change and decision, told in words."""

from __future__ import annotations

from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import console, json_option, show


@click.command("log")
@click.option("--kind", help="Event kind, or a prefix ending in '.' or '*' (protocols.*).")
@click.option("--subject", help="Only events about this id.")
@click.option("--limit", type=click.IntRange(1, 100000), default=200, show_default=True)
@json_option
@click.pass_context
def command(
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
    if kind == "verify.run":
        return verification_line(payload)
    if kind == "verify.config_accepted":
        return f"the user accepted the {payload['runner']} configuration"
    return ""


def _critic_line(kind: str, payload: dict[str, Any]) -> str:
    """Why the end-of-turn critic let a turn end or held it."""
    if kind == "critic.changed":
        return f"{payload['tool']} changed the project: the turn now needs a verification"
    verdict: str = payload["verdict"]
    return {
        "blocked": f"BLOCKED the end: no passing run by Ithaca ({payload.get('block')})",
        "verified": f"may end: Ithaca's run {payload.get('run')} passed on the project as it is",
        "unchanged": "may end: the turn left the project as it was",
        "unverified": f"ended UNVERIFIED: {payload.get('why')}",
    }.get(verdict, verdict)


def verification_line(payload: dict[str, Any]) -> str:
    """One of Ithaca's own verification runs, with its counts."""
    counts = payload.get("counts")
    counted = (
        f"{counts['passed']} passed, {counts['failed']} failed, {counts['errors']} errors,"
        f" {counts['skipped']} skipped of {counts['collected']}"
        if counts
        else "not counted"
    )
    seconds = payload["duration_ms"] / 1000
    return (
        f"{payload['runner']} {payload['status']}: {counted}, {seconds:.1f} s,"
        f" tree {payload['tree_digest'][:12]} ({payload['id']})"
    )
