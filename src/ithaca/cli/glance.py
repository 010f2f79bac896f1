"""What ``ithaca status`` shows at a glance and ``ithaca next`` picks from: one line per
area of a project (its lockdowns, the wired hosts, the agent's turn, pending approvals,
the Ulysses session, the Ultragoal pursuit, delivery work, the settings that weaken a
guarantee), each with the one command that moves it on.

Each line reads one part's face; the order of ``AREAS`` is the order in which something
waiting needs a person: a lockdown first, settings last.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ithaca.app import IthacaProject

AREAS = (
    "lockdown",
    "hosts",
    "turn",
    "verify",
    "approvals",
    "ulysses",
    "ultragoal",
    "delivery",
    "settings",
)


def line(
    area: str, state: str, next_command: str | None = None, *, waiting: bool = False
) -> dict[str, Any]:
    """One area: what holds, the command that moves it on, and whether it waits for you."""
    return {"area": area, "state": state, "next": next_command, "waiting": waiting}


def area_lines(project: IthacaProject) -> list[dict[str, Any]]:
    """Every area's line, in ``AREAS`` order (some areas have several lines)."""
    lines: list[dict[str, Any]] = []
    for area in AREAS:
        lines.extend(_READERS[area](project))
    return lines


def next_step(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """The one thing to do next: the first line that waits for you, else the first with a
    command, else a line saying nothing waits."""
    for wanted in (True, False):
        for found in lines:
            if found["next"] and found["waiting"] == wanted:
                return found
    return line("nothing", "nothing waits for you: the agent can work")


def _lockdowns(project: IthacaProject) -> list[dict[str, Any]]:
    from ithaca.kernel import lockdown

    held = lockdown.all_active(project.store.connection())
    return [
        line(
            "lockdown",
            f"LOCKDOWN of {found['host']} session {found['session']} since {found['enteredAt']}:"
            f" {found['changes'][0]['path']} changed behind Ithaca's back",
            "ithaca doctor  (review it, then: ithaca doctor lift-lockdown)",
            waiting=True,
        )
        for found in held
    ]


def _hosts(project: IthacaProject) -> list[dict[str, Any]]:
    from ithaca.hosts import HOSTS
    from ithaca.hosts.install.doctor import check
    from ithaca.kernel import IthacaError, mcp_calls

    unhooked = {
        found["host"]: found for found in mcp_calls.unhooked_calls(project.store.connection())
    }
    lines = []
    wired = []
    for host in HOSTS:
        try:
            found = check(Path(project.project.root), host, run_hook=False)
        except IthacaError as exc:
            lines.append(
                line(
                    "hosts", f"{host}: {exc.code}", f"ithaca install --doctor {host}", waiting=True
                )
            )
            continue
        if not found["installed"]:
            continue
        wired.append(host)
        # No profile: a manifest too broken or too old to say (drifted, below).
        profile = found.get("profile")
        guard = "" if profile in ("sandboxed", None) else " (text guard only: no OS sandbox)"
        if found.get("plugin"):
            guard += f", plugin {found['plugin']}"
        wiring = f"profile {profile or 'unknown'}{guard}"
        if host in unhooked:
            lines.append(
                line(
                    "hosts",
                    f"{host}: hooks NOT RUNNING for {host} (an MCP call at {unhooked[host]['at']}"
                    " that no hook saw was refused)",
                    f"ithaca install --doctor {host}",
                    waiting=True,
                )
            )
        elif found["findings"]:
            codes = ", ".join(sorted({item["code"] for item in found["findings"]}))
            lines.append(
                line(
                    "hosts",
                    f"{host}: {wiring}, drifted ({codes})",
                    f"ithaca install {host}",
                    waiting=True,
                )
            )
        else:
            lines.append(line("hosts", f"{host}: {wiring}, healthy"))
    if not wired:
        lines.append(
            line(
                "hosts",
                "no host is wired",
                "ithaca install claude  (or: ithaca install codex)",
                waiting=True,
            )
        )
    return lines


def _turn(project: IthacaProject) -> list[dict[str, Any]]:
    recent = project.protocols.summary()["recentSessions"]
    if not recent:
        return [line("turn", "no agent turn yet: start Claude Code or Codex in this repository")]
    session = recent[0]
    loaded = (
        "bundle loaded"
        if session["bundleLoaded"]
        else "bundle not loaded yet (the agent's load_protocols)"
    )
    return [
        line(
            "turn",
            f"session {session['hostSessionId']}: event {session['currentEventId']}, {loaded}",
        )
    ]


def _verification(project: IthacaProject) -> list[dict[str, Any]]:
    """The runner Ithaca verifies with and why, and its latest run."""
    summary = project.verification.summary()
    runner = summary["runner"]
    if runner is None:
        return [
            line(
                "verify",
                "no test runner found: a turn that changes the project ends UNVERIFIED",
                "set [verification] runner or commands in .ithaca/config.toml",
                waiting=True,
            )
        ]
    state = f"{runner['name']} (`{' '.join(runner['command'])}`): {runner['why']}"
    latest = summary["latest"]
    if latest is not None:
        from ithaca.cli.commands.log import verification_line

        state += f"; last run: {verification_line(latest)} at {latest['finished_at']}"
    return [line("verify", state)]


def _approvals(project: IthacaProject) -> list[dict[str, Any]]:
    pending = [
        found for found in project.protocols.list_approvals() if found["status"] == "pending"
    ]
    if not pending:
        return [line("approvals", "none pending")]
    first = pending[0]
    tool = (first["action"] or {}).get("tool") or "tool"
    more = f" (and {len(pending) - 1} more: ithaca protocols approvals)" if len(pending) > 1 else ""
    return [
        line(
            "approvals",
            f"{len(pending)} pending: {first['id']} asks for a {tool} call{more}",
            f"ithaca protocols approve {first['id']}",
            waiting=True,
        )
    ]


def _ulysses(project: IthacaProject) -> list[dict[str, Any]]:
    status = project.ulysses.status({})
    if not status.get("active"):
        return [line("ulysses", "no active debugging session")]
    return [
        line(
            "ulysses",
            f"{status['session_id']}: {status['phase']} (S={status['S']}),"
            f" waits for {status['required_action']}",
            "ithaca ulysses status",
        )
    ]


def _ultragoal(project: IthacaProject) -> list[dict[str, Any]]:
    pursuits = project.ultragoal.pursuits()
    if not pursuits:
        return [line("ultragoal", "no pursuit")]
    found = pursuits[0]
    session = found["session_id"]
    story = found["current_story"]
    on = f", story {story['id']}: {story['story']}" if story else ""
    state = f"{session}: {found['phase']}{on}"
    if found["phase"] == "planning" and found["unconfirmed"]:
        return [
            line(
                "ultragoal",
                f"{state}; {found['unconfirmed']} stories wait for your confirmation",
                f"ithaca ultragoal confirm-all-stories --session {session}",
                waiting=True,
            )
        ]
    if found["phase"] in ("budget_limited", "blocked"):
        return [
            line(
                "ultragoal",
                state,
                f"ithaca ultragoal resume-pursuit --session {session}",
                waiting=True,
            )
        ]
    return [line("ultragoal", state, f"ithaca ultragoal get --session {session}")]


def _delivery(project: IthacaProject) -> list[dict[str, Any]]:
    summary = project.delivery.summary()
    if summary is None:
        return [line("delivery", "no open change", "ithaca record --example change_contract open")]
    attention = summary["attention"]
    if "RECOVERY_PENDING" in attention:
        return [
            line(
                "delivery",
                "an interrupted write waits for recovery",
                "ithaca doctor --repair",
                waiting=True,
            )
        ]
    change, task = summary["change"], summary["task"]
    if change is None:
        return [line("delivery", "a session runs with no open change", "ithaca context")]
    state = f"change {change['id']} ({change['status']})"
    if task is None:
        return [
            line(
                "delivery", f"{state}, no open task", "ithaca record --example task_contract define"
            )
        ]
    state += f", next task {task['id']}: {task['title']} ({task['status']})"
    if attention:
        state += f"; attention: {', '.join(attention)}"
    return [line("delivery", state, "ithaca context")]


def validator_confinement(settings: dict[str, Any]) -> str:
    """How validator cells run here: confined, refused or unconfined (docs/ulysses.md)."""
    from ithaca.validators import bubblewrap

    if bubblewrap() is not None:
        return "confined"
    if settings["validators"]["require_filesystem_isolation"]:
        return "refused: no bubblewrap here, so every validator run is refused"
    return "UNCONFINED: no bubblewrap, and validators.require_filesystem_isolation = false"


def _settings(project: IthacaProject) -> list[dict[str, Any]]:
    config = project.config
    lines = []
    if not config["protocols"]["strict"]:
        lines.append(
            line("settings", "strict mode OFF: mutating calls pass before the bundle is loaded")
        )
    if not config["ultragoal"]["strict_approval"]:
        lines.append(
            line(
                "settings",
                "ultragoal strict approval OFF: the agent may confirm its own stories while"
                " planning (ultragoal.strict_approval = false in the configuration)",
            )
        )
    if not config["verification"]["require"]:
        lines.append(
            line(
                "settings",
                "verification critic OFF: a coding turn may end without a passing"
                " verification after its last change (verification.require = false)",
            )
        )
    confinement = validator_confinement(config)
    if confinement != "confined":
        refused = confinement.startswith("refused")
        fix = "sudo apt-get install bubblewrap" if refused else None
        lines.append(line("settings", f"validators {confinement}", fix, waiting=refused))
    return lines


_READERS = {
    "lockdown": _lockdowns,
    "hosts": _hosts,
    "turn": _turn,
    "verify": _verification,
    "approvals": _approvals,
    "ulysses": _ulysses,
    "ultragoal": _ultragoal,
    "delivery": _delivery,
    "settings": _settings,
}
