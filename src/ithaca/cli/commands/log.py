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
    return ""


def _critic_line(kind: str, payload: dict[str, Any]) -> str:
    """Why the end-of-turn critic let a turn end or held it."""
    if kind == "critic.changed":
        return f"{payload['tool']} changed the project" + (" (first)" if payload["first"] else "")
    if kind == "critic.verified":
        return f"a verification passed (reported by the {payload['measured']})"
    verdict: str = payload["verdict"]
    line = {
        "blocked": f"BLOCKED the end: run `{payload.get('command')}` ({payload.get('block')})",
        "verified": f"may end: `{payload.get('command')}` passed after the last change",
        "unchanged": "may end: the turn left the project as it was",
        "unverified": f"ended UNVERIFIED: {payload.get('why')}",
    }.get(verdict, verdict)
    if payload.get("measured") == "ithaca":
        line += " (run by Ithaca)"
    return line
