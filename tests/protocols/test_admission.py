"""Trusted event admission on UserPromptSubmit (protocols reference §3, §13 Admission)."""

from __future__ import annotations

import getpass
import hashlib
import json
import shutil
import sqlite3
import subprocess
import uuid
from typing import Any

import pytest
from tests.refusals import gate_reason

from ithaca.app import open_project
from ithaca.hosts import dispatch
from ithaca.kernel.errors import Conflict

BLOCK_PREFIX = "Ithaca could not admit this prompt ({code}): "


def expected_context(event_id: str, workflow: str, strict: bool) -> str:
    text = (
        f"Ithaca admitted this prompt as event {event_id} (workflow: {workflow}). "
        "Before any other tool call, call load_protocols with "
        f'{{"eventId": "{event_id}"}} and follow every rule in the returned bundle.'
    )
    if strict:
        text += " Until then Ithaca blocks mutating tool calls."
    return (
        text + " If load_protocols is not among your tools yet, load it with ToolSearch"
        ' {"query": "select:mcp__ithaca__load_protocols"}.'
    )


def assert_blocked(answer: dict[str, Any], code: str) -> None:
    assert set(answer) == {"decision", "reason"}, answer
    assert answer["decision"] == "block"
    reason = gate_reason(answer["reason"])
    assert reason.startswith(BLOCK_PREFIX.format(code=code)), answer["reason"]


def event_count(conn: sqlite3.Connection) -> int:
    count: int = conn.execute("SELECT count(*) FROM protocol_events").fetchone()[0]
    return count


def current_event(conn: sqlite3.Connection, session: str = "s1") -> str | None:
    row = conn.execute(
        "SELECT current_event_id FROM protocol_sessions WHERE host_session_id = ?", (session,)
    ).fetchone()
    return row[0] if row else None


def sources_of(conn: sqlite3.Connection, event_id: str) -> dict[str, str]:
    row = conn.execute(
        "SELECT context_sources FROM protocol_events WHERE id = ?", (event_id,)
    ).fetchone()
    sources: dict[str, str] = json.loads(row[0])
    return sources


# --- connector, context text, actor ---------------------------------------------------


def test_prompt_through_the_claude_entry_point_is_admitted_as_a_claude_code_event(
    hook, governed, journaled
):
    result = hook.process("UserPromptSubmit", hook.prompt_payload("Fix the login page."))

    assert result.returncode == 0, result.stderr
    event_id = hook.event_id_of(json.loads(result.stdout))
    event = governed.protocols.get_event(event_id)
    assert event["connector"] == "claude-code"
    assert event["kind"] == "chat.message"
    assert event["hostSessionId"] == "s1"
    assert event["actor"]["kind"] == "user"
    assert event["context"]["workflow"] == "coding"
    admitted = journaled("protocols.event_admitted")
    assert [(e["subject"], e["actor"]) for e in admitted] == [(event_id, "hook")]
    assert admitted[0]["payload"] == event
    assert current_event(governed.store.connection()) == event_id


def test_console_script_answers_an_admission_with_the_exact_strict_context(hook):
    result = hook.process("UserPromptSubmit", hook.prompt_payload("Add a changelog entry."))

    answer = json.loads(result.stdout)
    event_id = hook.event_id_of(answer)
    assert answer == {
        "hookSpecificOutput": {
            "hookEventName": "UserPromptSubmit",
            "additionalContext": expected_context(event_id, "coding", strict=True),
        }
    }


def test_admission_context_is_the_exact_strict_sentence(hook):
    answer = hook.prompt("::workflow debugging\nWhy does the cache miss?")

    event_id = hook.event_id_of(answer)
    assert answer["hookSpecificOutput"]["additionalContext"] == expected_context(
        event_id, "debugging", strict=True
    )


def test_admission_context_without_strict_mode_omits_the_blocking_sentence(hook):
    hook.configure("[protocols]\nstrict = false\n")

    answer = hook.prompt("Rename the helper.")

    event_id = hook.event_id_of(answer)
    assert answer["hookSpecificOutput"]["additionalContext"] == expected_context(
        event_id, "coding", strict=False
    )


def test_actor_id_comes_from_the_user_settings_in_ithaca_home(governed_dir, hook, governed):
    home = governed_dir.parent / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('user_id = "dev-7"\n', encoding="utf-8")

    event_id = hook.admit()

    assert governed.protocols.get_event(event_id)["actor"] == {"id": "dev-7", "kind": "user"}


def test_actor_id_falls_back_to_the_login_name(hook, governed):
    event_id = hook.admit()

    assert governed.protocols.get_event(event_id)["actor"] == {
        "id": getpass.getuser(),
        "kind": "user",
    }


def test_prompt_outside_any_project_gets_no_answer(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    payload = {"session_id": "s1", "cwd": str(elsewhere), "prompt": "hello"}

    assert dispatch.run("claude", "UserPromptSubmit", json.dumps(payload)) == ("", 0)


# --- markers -------------------------------------------------------------------------


def test_workflow_marker_is_sticky_until_default_clears_it(hook, governed):
    conn = governed.protocols.store.connection()
    first = hook.admit("::workflow debugging\nThe parser drops the last token.")
    second = hook.admit("Keep going.")
    cleared = hook.admit("::workflow default\nNow the docs.")
    after = hook.admit("And the tests.")

    workflows = [
        governed.protocols.get_event(e)["context"]["workflow"]
        for e in (first, second, cleared, after)
    ]
    assert workflows == ["debugging", "debugging", "coding", "coding"]
    assert sources_of(conn, first)["workflow"] == "marker"
    assert sources_of(conn, second)["workflow"] == "session"
    assert sources_of(conn, cleared)["workflow"] != "session"


def test_task_marker_is_sticky_and_default_clears_it(hook, governed):
    first = hook.admit("::task ticket-42\nStart on the ticket.")
    second = hook.admit("Continue.")
    cleared = hook.admit("::task default\nSomething else.")

    tasks = [governed.protocols.get_event(e)["context"]["task"] for e in (first, second, cleared)]
    assert tasks == ["ticket-42", "ticket-42", None]


def test_markers_are_sticky_per_host_session(hook, governed):
    hook.admit("::workflow debugging\nInvestigate.", session="s1")
    other = hook.admit("Unrelated work.", session="s2")

    assert governed.protocols.get_event(other)["context"]["workflow"] == "coding"


def test_blank_lines_before_markers_are_skipped(hook, governed):
    event_id = hook.admit("\n\n::workflow chat\n::task notes\nJust talk.")

    assert governed.protocols.get_event(event_id)["context"] == {
        "clientId": None,
        "projectId": None,
        "workflow": "chat",
        "task": "notes",
    }


def test_unknown_workflow_blocks_the_prompt_and_admits_nothing(hook, governed, journaled):
    conn = governed.store.connection()
    earlier = hook.admit("::workflow debugging\nLook at the crash.")

    answer = hook.prompt("::workflow debuging\nTypo in the marker.")

    assert_blocked(answer, "UNKNOWN_WORKFLOW")
    assert event_count(conn) == 1
    assert conn.execute("SELECT count(*) FROM protocol_sessions").fetchone()[0] == 1
    assert len(journaled("protocols.event_admitted")) == 1
    assert current_event(conn) == earlier
    following = hook.admit("Carry on.")
    assert governed.protocols.get_event(following)["context"]["workflow"] == "debugging"


@pytest.mark.parametrize(
    "prompt",
    [
        "::workflow\nno value",
        "::workflow Debugging\nupper case",
        "::wrkflow coding\nunknown key",
        "::workflow coding extra\ntrailing word",
        "::task one\n::task two\nrepeated key",
        "::workflow coding\n::workflow chat\nrepeated workflow",
        "::\nempty marker",
    ],
)
def test_malformed_marker_blocks_the_prompt_and_admits_nothing(prompt, hook, governed, journaled):
    answer = hook.prompt(prompt)

    assert_blocked(answer, "MALFORMED_MARKER")
    assert event_count(governed.store.connection()) == 0
    assert journaled("protocols.event_admitted") == []


def test_marker_lines_after_the_first_real_line_are_ordinary_text(hook, governed):
    event_id = hook.admit("Explain this:\n::workflow nonsense\n::bad")

    assert governed.protocols.get_event(event_id)["context"]["workflow"] == "coding"


def test_configured_workflow_makes_its_marker_valid(hook, governed):
    assert_blocked(hook.prompt("::workflow release\nCut 1.2."), "UNKNOWN_WORKFLOW")
    hook.configure('[protocols]\nworkflows = ["release"]\n')

    event_id = hook.admit("::workflow release\nCut 1.2.")

    assert governed.protocols.get_event(event_id)["context"]["workflow"] == "release"


# --- config defaults and kind ----------------------------------------------------------


def test_workflow_falls_back_to_coding(hook, governed):
    event_id = hook.admit("No markers and no configuration.")

    event = governed.protocols.get_event(event_id)
    assert event["context"] == {
        "clientId": None,
        "projectId": None,
        "workflow": "coding",
        "task": None,
    }


def test_config_supplies_default_workflow_task_project_and_client(hook, governed):
    hook.configure(
        "[protocols]\n"
        'default_workflow = "chat"\n'
        'default_task = "triage"\n'
        'project_id = "customer-portal"\n'
        'client_id = "acme"\n',
    )

    event_id = hook.admit("What changed yesterday?")

    assert governed.protocols.get_event(event_id)["context"] == {
        "clientId": "acme",
        "projectId": "customer-portal",
        "workflow": "chat",
        "task": "triage",
    }
    sources = sources_of(governed.store.connection(), event_id)
    assert {key: sources[key] for key in ("workflow", "task", "projectId", "clientId")} == {
        "workflow": "config",
        "task": "config",
        "projectId": "config",
        "clientId": "config",
    }


def test_marker_wins_over_the_configured_default_workflow(hook, governed):
    hook.configure('[protocols]\ndefault_workflow = "chat"\n')

    event_id = hook.admit("::workflow goal\nShip the importer.")

    assert governed.protocols.get_event(event_id)["context"]["workflow"] == "goal"


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("/review the branch", "command"),
        ("::task t1\n\n/compact", "command"),
        ("\n   /init", "command"),
        ("Please run /review later", "chat.message"),
        ("Plain request.", "chat.message"),
    ],
)
def test_slash_on_the_first_real_line_makes_a_command_event(prompt, kind, hook, governed):
    event_id = hook.admit(prompt)

    assert governed.protocols.get_event(event_id)["kind"] == kind


# --- the prompt itself ------------------------------------------------------------------


def test_prompt_text_is_never_stored_but_its_digest_and_byte_length_are(
    governed_dir, hook, governed
):
    secret = f"zebra-{uuid.uuid4().hex}-naïve café ✓"
    prompt = f"::task t1\nPlease handle {secret} carefully."

    event_id = hook.admit(prompt)

    encoded = prompt.encode("utf-8")
    event = governed.protocols.get_event(event_id)
    assert event["promptSha256"] == hashlib.sha256(encoded).hexdigest()
    assert event["promptLength"] == len(encoded)
    assert event["promptLength"] != len(prompt)
    governed.close()
    for path in (governed_dir / ".ithaca").rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret.encode("utf-8") not in data, path
            assert b"zebra-" not in data, path
    reopened = open_project(governed_dir)
    try:
        rows = reopened.store.connection().execute("SELECT payload FROM journal").fetchall()
        assert all("zebra-" not in row[0] for row in rows)
    finally:
        reopened.close()


# --- failures ---------------------------------------------------------------------------


def test_missing_session_id_blocks_the_prompt_with_invalid_event(hook, governed):
    answer = hook.prompt("No session here.", session=None)

    assert_blocked(answer, "INVALID_EVENT")
    assert event_count(governed.store.connection()) == 0


def test_malformed_session_id_blocks_the_prompt_with_invalid_event(hook, governed):
    answer = hook.prompt("Odd session.", session="not a valid id!")

    assert_blocked(answer, "INVALID_EVENT")
    assert event_count(governed.store.connection()) == 0


def test_unreadable_store_admits_nothing_and_says_so(governed_dir, hook, tmp_path):
    """Lost state fails closed at the tool calls (tests/hosts/test_lost_state.py); the
    prompt goes through unadmitted, telling the agent and the user what was lost."""
    earlier = hook.admit("Before the damage.")
    runtime = governed_dir / ".ithaca" / ".runtime"
    saved = tmp_path / "saved"
    saved.mkdir()
    for name in ("state.db", "state.db-wal", "state.db-shm"):
        if (runtime / name).exists():
            shutil.move(runtime / name, saved / name)
    (runtime / "state.db").write_bytes(b"this is not a database\n" * 256)

    answer = hook.prompt("After the damage.")

    assert "decision" not in answer
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert context.startswith("Ithaca could not admit this prompt [STATE_UNREADABLE]: ")
    assert "Ithaca admitted this prompt" not in context
    assert answer["systemMessage"].startswith("Ithaca [STATE_UNREADABLE]: ")
    (runtime / "state.db").unlink()
    for item in saved.iterdir():
        shutil.move(item, runtime / item.name)
    restored = open_project(governed_dir)
    try:
        conn = restored.store.connection()
        assert event_count(conn) == 1
        assert current_event(conn) == earlier
    finally:
        restored.close()


def test_failed_admission_write_blocks_the_prompt_and_admits_nothing(hook, governed, journaled):
    conn = governed.store.connection()
    earlier = hook.admit("The last good prompt.")
    conn.execute(
        "CREATE TRIGGER refuse_admission BEFORE INSERT ON journal"
        " WHEN NEW.kind = 'protocols.event_admitted'"
        " BEGIN SELECT RAISE(ABORT, 'journal refuses'); END"
    )

    answer = hook.prompt("::workflow debugging\nThis one cannot be recorded.")

    assert answer["decision"] == "block"
    assert gate_reason(answer["reason"]).startswith("Ithaca could not admit this prompt (")
    assert event_count(conn) == 1
    assert current_event(conn) == earlier
    assert len(journaled("protocols.event_admitted")) == 1
    conn.execute("DROP TRIGGER refuse_admission")
    following = hook.admit("Carry on.")
    assert governed.protocols.get_event(following)["context"]["workflow"] == "coding"


def test_invalid_configuration_blocks_the_prompt(hook, governed):
    hook.configure("[protocols]\nstrickt = false\n")

    assert_blocked(hook.prompt("Anything."), "INVALID_CONFIG")
    assert event_count(governed.store.connection()) == 0


def test_older_schema_blocks_the_prompt_with_state_needs_migration(hook, governed):
    governed.store.connection().execute("PRAGMA user_version = 1")

    assert_blocked(hook.prompt("Anything."), "STATE_NEEDS_MIGRATION")
    assert event_count(governed.store.connection()) == 0


def test_admit_event_with_an_existing_id_fails_with_event_exists(hook, governed, journaled):
    existing = hook.admit()
    before = journaled("protocols.event_admitted")

    with pytest.raises(Conflict) as caught:
        governed.protocols.admit_event(connector="test", workflow="chat", event_id=existing)

    assert caught.value.code == "EVENT_EXISTS"
    assert journaled("protocols.event_admitted") == before
    assert governed.protocols.get_event(existing)["connector"] == "claude-code"


def test_protocol_events_refuse_update_and_delete(hook, governed):
    event_id = hook.admit()
    conn = governed.store.connection()
    before = governed.protocols.get_event(event_id)

    with pytest.raises(sqlite3.DatabaseError, match="insert-only"):
        conn.execute("UPDATE protocol_events SET workflow = 'chat' WHERE id = ?", (event_id,))
    with pytest.raises(sqlite3.DatabaseError, match="insert-only"):
        conn.execute("DELETE FROM protocol_events WHERE id = ?", (event_id,))

    assert governed.protocols.get_event(event_id) == before


def test_concurrent_admitting_processes_get_distinct_ids_and_the_last_commit_is_current(
    hook, governed, journaled
):
    processes = [
        subprocess.Popen(
            [str(hook.script), "claude", "UserPromptSubmit"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=hook.root,
        )
        for _ in range(8)
    ]
    # Every process is started (and blocks reading stdin) before any gets its prompt.
    results = [
        process.communicate(json.dumps(hook.prompt_payload(f"Prompt {n}.")), timeout=120)
        for n, process in enumerate(processes)
    ]

    assert [p.returncode for p in processes] == [0] * 8, [err for _, err in results]
    ids = [hook.event_id_of(json.loads(out)) for out, _ in results]
    assert len(set(ids)) == 8
    admitted = journaled("protocols.event_admitted")
    assert sorted(e["subject"] for e in admitted) == sorted(ids)
    conn = governed.store.connection()
    last_committed = conn.execute(
        "SELECT id FROM protocol_events ORDER BY seq DESC LIMIT 1"
    ).fetchone()[0]
    assert admitted[-1]["subject"] == last_committed
    assert current_event(conn) == last_committed
