"""The dispatcher's answers where a project's state is lost (``kernel.lost_state``).

Where Ithaca was set up (``ithaca init``'s record in the user's Ithaca home, or, for an
install's hook, the project's wiring naming ``ithaca-hook``) but its state is gone
(``.ithaca/`` deleted, emptied, replaced by a file or a foreign link; the database
missing, empty after Ithaca committed to it, or unreadable), no gate can decide anything,
so none runs. The same holds where the database opens but its journal no longer holds
events Ithaca committed (a write-ahead log deleted or damaged after a crash, an older copy
put back, a truncated file: ``JOURNAL_TAIL_MISSING``, ``JOURNAL_ROLLED_BACK``). Every call
that could change something, every call of Ithaca's own tools and every Ithaca command
but its reports is refused with the loss's code (``STATE_MISSING``, ``STATE_UNREADABLE``,
``STATE_EMPTIED``, or the journal's) and the commands that restore it; after a tool call,
a journal's loss holds the call too (the call may be what revealed it). The prompt and
the session start go through, with the same message as the agent's context and as a
warning to the user (``systemMessage``): blocking the prompt would protect nothing more,
since nothing can change meanwhile, and would stop the user from asking the agent to look
around; letting it through in silence would hide the loss. Stop and the other events
answer nothing: with no state there is no pursuit to hold the
turn for, and nothing to record. Where only the database is lost, a session start still
runs its gates without it, so a compacted session gets its PreCompact snapshot back after
the notice of the loss (``before``).

A folder where nothing says Ithaca was set up is left alone. This module loads only where
no state of the wired project's own was found, or its anchor says the journal fell short,
so a healthy hook call never pays for it.
"""

from __future__ import annotations

import os

from ithaca.kernel import IthacaError, Opinion, Project, config, git_top, lost_state

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from ithaca.hosts.dispatch import HostAdapter
    from ithaca.kernel import Call

# The journal's losses (``lost_state.journal_lost``): the store opens, but it no longer
# holds events Ithaca committed.
JOURNAL_LOSSES = (lost_state.TAIL_MISSING, lost_state.ROLLED_BACK)
# Where the host shows the agent a context and the user a message: what each opens with.
NOTICES = {
    "SessionStart": "Ithaca cannot govern this session",
    "UserPromptSubmit": "Ithaca could not admit this prompt",
}


def folder(
    adapter: HostAdapter, event: str, cwd: str, anchor: str | None, plugin: bool
) -> tuple[str, lost_state.Lost | None]:
    """The folder the hook's wiring belongs to (the host's project folder or the Git top
    of ``cwd``), and what became of its state folder when Ithaca was set up there but its
    state is gone. Nothing is lost where nothing says Ithaca was set up (its record, or,
    for an install's hook, the project's wiring), where ``ITHACA_DIR`` names the state
    elsewhere, or, for a plugin's hook, where the project's own install answers the event.
    """
    start = anchor or cwd
    home = git_top(start) or start
    if os.environ.get("ITHACA_DIR") or (plugin and adapter.wired_by_install(home, event)):
        return home, None
    why, record = lost_state.set_up_here(home, None if plugin else adapter.runs_ithaca(home))
    if why is None:
        return home, None
    return home, lost_state.folder_lost(home, why, record)


def answer(
    adapter: HostAdapter, event: str, payload: dict[str, Any], home: str, lost: lost_state.Lost
) -> Opinion:
    """The answer where the state folder is lost: a tool call classified against the wired
    project's folder, with the user's own settings alone."""
    from ithaca.hosts.dispatch import _classify, _session_id

    call = None
    if event == "PreToolUse":
        try:
            settings = config.load(None)
        except IthacaError:
            settings = config.defaults()
        project = Project(home, os.path.join(home, ".ithaca"), home)
        given_cwd = payload.get("cwd")
        cwd = given_cwd if isinstance(given_cwd, str) else home
        payload = adapter.normalised(payload, settings["protocols"]["mcp_server_name"])
        call = _classify(adapter, payload, project, cwd, settings, _session_id(payload))
    return opinion(event, call, lost)


def opinion(event: str, call: Call | None, lost: lost_state.Lost) -> Opinion:
    """Refuse what could change something, and say why wherever the host shows text."""
    if event == "PreToolUse":
        if call is not None and not lost_state.acts(call):
            return Opinion()
        return Opinion(
            "deny",
            lost.code,
            f"{lost.message} Only the user can restore it: tell them.",
            gate="kernel",
        )
    if event == "PostToolUse" and lost.code in JOURNAL_LOSSES:
        # The call may be what revealed it (a database put back, a log deleted): the
        # agent hears it now, as the effect check's hold said it before.
        told = f"{lost.message} Only the user can restore it: tell them."
        return Opinion("block", lost.code, told, gate="kernel")
    if event not in NOTICES:
        return Opinion()
    if event == "SessionStart":
        from ithaca.kernel import lineage

        lineage.record_host(config.home(), os.getppid())  # still the user's terminals' guard
    return Opinion(
        "abstain",
        lost.code,
        context=(
            f"{NOTICES[event]} [{lost.code}]: {lost.message} Reads still work. Tell the"
            " user what is wrong and how to restore it; do not try to make Ithaca's state"
            " yourself."
        ),
        system_message=f"Ithaca [{lost.code}]: {lost.user_message}",
    )


def before(final: Opinion, lost: lost_state.Lost) -> Opinion:
    """A session start's answer from the gates, run without a database, after the notice
    of what was lost."""
    notice = opinion("SessionStart", None, lost)
    context = "\n\n".join(text for text in (notice.context, final.context) if text)
    return Opinion("abstain", lost.code, context=context, system_message=notice.system_message)
