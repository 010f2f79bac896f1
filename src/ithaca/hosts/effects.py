"""The effect check: a gate that looks at what changed, not at what was typed.

Before every mutating tool call and after every call, the protected files are compared
with the fingerprint Ithaca last accepted (``kernel.fingerprint``), and the journal with its
anchor (the event Ithaca last committed must still be there). A change that Ithaca did
not make puts the session in lockdown (``kernel.lockdown``): it is recorded and
journaled in the hook's transaction, the call that revealed it is held (after the call)
or denied (before a mutating one), and from then on the session's mutating calls and
its calls to Ithaca's own tools are denied with ``LOCKDOWN`` until the user lifts it.

This holds whatever spelling made the change, in either install profile, and also
catches what a sandbox cannot see: a ``git checkout`` that brings other team rules, a
user-level settings file that switches the hooks off, a replaced database (its journal
no longer holds the event Ithaca last committed). It cannot see
a change that was undone within the same call, nor one that stopped the hooks from
running at all before they looked (the host's sandbox is the wall for that).
"""

from __future__ import annotations

from ithaca.kernel import ABSTAIN, GateContext, Opinion, anchor, fingerprint, lockdown

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.kernel import Call

EVENTS = ("PreToolUse", "PostToolUse")
_SEEN = "effects"
LIFT = "ithaca doctor lift-lockdown"


class Seen:
    """What one check found: the changes, and what to record of them."""

    __slots__ = ("changes", "signature", "heads", "first")

    def __init__(
        self,
        changes: list[dict[str, str]],
        first: bool,
        signature: bytes | None = None,
        heads: dict[str, str] | None = None,
    ):
        self.changes = changes
        self.first = first  # no fingerprint was ever recorded
        self.signature = signature  # a new signature to record (nothing that matters moved)
        self.heads = heads or {}  # and what the checked-out commit holds now


def decide(call: Call | None, ctx: GateContext) -> Opinion:
    if ctx.conn is None or not ctx.schema_current or ctx.project is None:
        return ABSTAIN
    if ctx.event == "PreToolUse" and not (
        call is not None and (call.mutating or call.tool_class == "ithaca")
    ):
        return ABSTAIN  # a read changes nothing; what came before it, PostToolUse saw
    seen = observe(ctx)
    ctx.scratch[_SEEN] = seen
    held = lockdown.active(ctx.conn, ctx.host, ctx.session_id)
    changes = seen.changes or (held["changes"] if held else [])
    if not changes:
        return ABSTAIN
    if ctx.event == "PostToolUse":
        return Opinion("block", lockdown.CODE, reason(changes, after=True))
    return Opinion("deny", lockdown.CODE, reason(changes, after=False))


def commit(call: Call | None, final: Opinion, ctx: GateContext) -> None:
    seen = ctx.scratch.get(_SEEN)
    conn = ctx.conn
    if not isinstance(seen, Seen) or conn is None or ctx.project is None:
        return None
    if seen.first:
        lockdown.record_baseline(conn, ctx.project, actor="hook", reason="first check", at=ctx.now)
    if seen.changes and lockdown.active(conn, ctx.host, ctx.session_id) is None:
        lockdown.enter(
            conn,
            host=ctx.host,
            session_id=ctx.session_id,
            event=ctx.event,
            tool=call.tool if call is not None else _tool_name(ctx.payload),
            changes=seen.changes,
            at=ctx.now,
        )
    elif seen.signature is not None:
        lockdown.resign(conn, seen.signature, seen.heads)
    return None


def observe(ctx: GateContext) -> Seen:
    """Compare the project with its accepted fingerprint (cheap unless a file moved)."""
    conn, project = ctx.conn, ctx.project
    assert conn is not None and project is not None
    found = _journal_cut(project, conn)
    recorded = lockdown.baseline(conn)
    if recorded is None:
        return Seen(found, first=True)
    signature = fingerprint.signature(project)
    if signature == recorded[0]:
        return Seen(found, first=False)
    moved, heads = _compared(project, recorded)  # only when the signature moved
    found += moved
    return Seen(found, first=False, signature=None if found else signature, heads=heads)


def _compared(
    project: Any, recorded: tuple[str | bytes, dict[str, Any], dict[str, str]]
) -> tuple[list[dict[str, str]], dict[str, str]]:
    """What differs from the accepted fingerprint ``recorded`` by content (the tracked
    files, what stands where a regular file belongs, the derived configuration cache
    rebuilt and compared, the commit's team files, the wiring and what the installs wrote
    whole), and the blobs the commit holds now."""
    from ithaca.hosts.install import wiring as install_wiring
    from ithaca.kernel import git_head

    heads = git_head.blobs(project)
    found = fingerprint.changes(project, recorded[1]) + git_head.drift(project, recorded[2], heads)
    return found + install_wiring.changes(project), heads


def _listed(changes: list[dict[str, str]]) -> str:
    return "; ".join(f"{item['path']}: {item['change']}" for item in changes)


def reason(changes: list[dict[str, str]], *, after: bool) -> str:
    """The agent's message: what changed, that it is locked down, and who lifts it."""
    listed = _listed(changes[:5])
    more = f" (and {len(changes) - 5} more)" if len(changes) > 5 else ""
    when = "after this call" if after else "before this call"
    return (
        f"Ithaca: what it protects changed without it ({listed}{more}), found {when}. This"
        " session is in lockdown: mutating calls and Ithaca's tools are denied. Stop, tell"
        " the user what you did, and ask them to review it with `ithaca doctor` and run"
        f" `{LIFT}` in their own terminal. Never undo it or work around it yourself."
    )


def _journal_cut(project: Any, conn: Any) -> list[dict[str, str]]:
    """The change when the journal no longer holds what Ithaca last committed (by its
    anchor, and by the head kept in the user's home), or those records are no longer
    sealed with the user's key (``kernel.anchor``)."""
    return [
        fingerprint.change(
            "journal",
            message,
            "restore the database with `ithaca doctor restore`, or accept the journal as it"
            " is with `ithaca doctor lift-lockdown`",
        )
        for _code, message in anchor.problems(project.runtime, conn)
    ]


def _tool_name(payload: dict[str, Any]) -> str | None:
    name = payload.get("tool_name")
    return name if isinstance(name, str) else None


def check(project: Any, conn: Any) -> list[dict[str, Any]]:
    """The doctor's findings: each lockdown in force, and what differs now from the
    accepted fingerprint (with how to restore it)."""
    from ithaca.hosts.install import wiring as install_wiring

    findings = []
    for held in lockdown.all_active(conn):
        listed = _listed(held["changes"])
        findings.append(
            {
                "code": lockdown.CODE,
                "severity": "error",
                "message": f"{held['host']} session {held['session']} is in lockdown since"
                f" {held['enteredAt']} ({listed}); restore what you do not want, then run"
                f" `{LIFT}`",
                "subject": held["id"],
            }
        )
    recorded = lockdown.baseline(conn)
    now = _compared(project, recorded)[0] if recorded else install_wiring.changes(project)
    for item in now + _journal_cut(project, conn):
        findings.append(
            {
                "code": "PROTECTED_CHANGED",
                "severity": "warning",
                "message": f"{item['path']}: {item['change']}; {item['restore']}",
                "subject": item["path"],
            }
        )
    return findings
