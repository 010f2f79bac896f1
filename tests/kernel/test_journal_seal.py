"""The journal's anchor and head, sealed with the user's key: a cut or rolled-back journal is
reported even when the records beside the database were rewritten to match it, a key that
went missing is reported (never re-made behind the user's back), and what an agent that
can read the key (the unsandboxed profile) could do unseen is written down here as such.

Every step runs as a user or a host runs it: ``ithaca`` and ``ithaca-hook`` processes. The
"attacker" is the test itself, writing the project's files as an agent's command would;
in the sandboxed profiles the host's sandbox keeps the agent from writing them at all
(tests/hosts_real), so these tests check the next line: what Ithaca sees if they were."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from tests.command_line import claude_hook, doctor_codes, ithaca
from tests.conftest import TerminalRun

from ithaca.kernel import Store, anchor, journal, journal_pages

SESSION = "44444444-4444-4444-8444-444444444444"
RUNTIME = ".ithaca/.runtime"


def hook(root: Path, command: str, event: str = "PreToolUse") -> dict[str, Any]:
    """Claude Code's hook on a ``Bash`` call: ``{"effect", "text"}``."""
    return claude_hook(root, event, "Bash", {"command": command}, SESSION)


def work(root: Path, calls: int = 3) -> None:
    """A few ordinary calls through the hooks, each journaled (no prompt was admitted, so
    the protocols refuse them; the journal records each decision all the same)."""
    for n in range(calls):
        assert "[LOCKDOWN]" not in hook(root, f"touch file{n}.txt")["text"]
        hook(root, f"touch file{n}.txt", "PostToolUse")


def home() -> Path:
    return Path(os.environ["ITHACA_HOME"])


def db(root: Path) -> sqlite3.Connection:
    return sqlite3.connect(root / RUNTIME / "state.db", isolation_level=None)


def head(root: Path) -> tuple[int, str]:
    conn = db(root)
    try:
        found = conn.execute("SELECT seq, hash FROM journal ORDER BY seq DESC LIMIT 1").fetchone()
    finally:
        conn.close()
    return int(found[0]), str(found[1])


def cut_tail(root: Path, rows: int) -> tuple[int, str]:
    """Delete the journal's last ``rows`` rows (and any seal over them); the new head."""
    conn = db(root)
    try:
        last = conn.execute("SELECT max(seq) FROM journal").fetchone()[0]
        conn.execute("DELETE FROM journal WHERE seq > ?", (last - rows,))
        conn.execute("DELETE FROM journal_seals WHERE last_seq > ?", (last - rows,))
    finally:
        conn.close()
    return head(root)


def legacy_record(found: tuple[int, str]) -> bytes:
    """An anchor as an older release wrote it: no key, a self-check only."""
    body = f"{found[0]:>20} {found[1]}"
    return f"{body} {anchor._check(body)}\n".encode()


@pytest.fixture(params=["sandboxed", "unsandboxed"])
def installed(request: pytest.FixtureRequest, project_dir: Path) -> Path:
    done = ithaca(project_dir, "install", "claude", "--profile", request.param)
    assert done.returncode == 0, done.stderr
    work(project_dir)
    assert doctor_codes(project_dir) == set()
    return project_dir


@pytest.fixture
def sandboxed(project_dir: Path) -> Path:
    done = ithaca(project_dir, "install", "claude", "--profile", "sandboxed")
    assert done.returncode == 0, done.stderr
    work(project_dir)
    assert doctor_codes(project_dir) == set()
    return project_dir


def test_every_commit_seals_the_anchor_and_the_head_kept_in_the_users_home(sandboxed):
    key, found = anchor.load_key()
    assert found == "ok" and key is not None
    assert (home() / anchor.KEY).stat().st_mode & 0o777 == 0o600
    runtime = str(sandboxed / RUNTIME)
    anchored = anchor.read_record(os.path.join(runtime, anchor.ANCHOR))
    recorded = anchor.read_record(anchor.head_path(runtime))
    assert anchored is not None and recorded is not None
    assert anchored[:2] == recorded[:2] == head(sandboxed)
    assert anchored[2].startswith(anchor.key_id(key) + ":")


@pytest.mark.parametrize("rewrite", ["legacy anchor", "anchor under another key", "older anchor"])
def test_a_cut_journal_is_reported_although_its_anchor_was_rewritten_to_match(sandboxed, rewrite):
    runtime = sandboxed / RUNTIME
    older = (runtime / anchor.ANCHOR).read_bytes()
    older_head = head(sandboxed)
    work(sandboxed)
    new_head = cut_tail(sandboxed, rows=head(sandboxed)[0] - older_head[0])
    assert new_head == older_head
    if rewrite == "legacy anchor":
        (runtime / anchor.ANCHOR).write_bytes(legacy_record(new_head))
    elif rewrite == "anchor under another key":
        anchor.write(str(runtime), anchor.ANCHOR, new_head, os.urandom(32))
    else:
        (runtime / anchor.ANCHOR).write_bytes(older)
    for _ in range(2):  # reported, and still reported: the records are never moved past it
        assert "JOURNAL_ROLLED_BACK" in doctor_codes(sandboxed)
    denied = hook(sandboxed, "touch more.txt")  # refused as the loss it is, with its restore
    assert denied["text"].startswith("Refused by Ithaca policy [JOURNAL_ROLLED_BACK]")
    assert "no longer holds event" in denied["text"] and "ithaca doctor restore" in denied["text"]
    assert "JOURNAL_ROLLED_BACK" in doctor_codes(sandboxed)


def test_an_older_database_put_back_with_its_anchor_is_reported(sandboxed, tmp_path):
    runtime = sandboxed / RUNTIME
    saved = tmp_path / "saved"
    shutil.copytree(runtime, saved)  # the database and its anchor, as they were
    work(sandboxed)
    for name in ("state.db", "state.db-wal", "state.db-shm", anchor.ANCHOR):
        if (saved / name).exists():
            shutil.copy2(saved / name, runtime / name)
    assert "JOURNAL_ROLLED_BACK" in doctor_codes(sandboxed)
    assert "[JOURNAL_ROLLED_BACK]" in hook(sandboxed, "touch more.txt")["text"]


def test_a_missing_key_is_reported_and_never_re_made_behind_the_users_back(
    sandboxed, type_ahead: TerminalRun
):
    (home() / anchor.KEY).unlink()
    assert "JOURNAL_SEAL_KEY_MISSING" in doctor_codes(sandboxed)
    denied = hook(sandboxed, "touch more.txt")
    assert "[LOCKDOWN]" in denied["text"] and "journal.key" in denied["text"]
    hook(sandboxed, "touch more.txt", "PostToolUse")
    assert not (home() / anchor.KEY).exists()
    assert "JOURNAL_SEAL_KEY_MISSING" in doctor_codes(sandboxed)
    code, shown = type_ahead(["--project", str(sandboxed), "doctor", "lift-lockdown"], "lift")
    assert code == 0, shown
    assert (home() / anchor.KEY).exists()
    assert doctor_codes(sandboxed) == set()
    assert "[LOCKDOWN]" not in hook(sandboxed, "touch after.txt")["text"]


def test_a_forged_head_record_is_reported(sandboxed):
    recorded = anchor.head_path(str(sandboxed / RUNTIME))
    anchor._put(recorded, head(sandboxed), f"{'0' * 16}:{'0' * 64}")
    assert "JOURNAL_HEAD_FORGED" in doctor_codes(sandboxed)


def test_the_user_accepting_the_journal_as_it_is_seals_it_again(sandboxed, type_ahead):
    cut_tail(sandboxed, rows=2)
    assert "JOURNAL_TAIL_MISSING" in doctor_codes(sandboxed)
    code, shown = type_ahead(["--project", str(sandboxed), "doctor", "lift-lockdown"], "lift")
    assert code == 0, shown
    assert doctor_codes(sandboxed) == set()
    work(sandboxed)
    assert doctor_codes(sandboxed) == set()


def test_with_the_key_in_its_reach_an_agent_can_cut_the_journal_unseen(installed):
    """What the unsandboxed profile cannot detect, and the sandboxed ones do: an agent whose
    commands run as the user can read the key, so it can cut the journal and seal the
    anchor and the head record again to match. (In the sandboxed profile the same agent
    can neither read the key nor write the database, the anchor or ``~/.ithaca``.)"""
    runtime = str(installed / RUNTIME)
    new_head = cut_tail(installed, rows=3)
    key = bytes.fromhex((home() / anchor.KEY).read_text().strip())  # readable: no sandbox
    anchor.write(runtime, anchor.ANCHOR, new_head, key)
    anchor.write_head(runtime, new_head, key)
    assert doctor_codes(installed) == set()  # undetected: the limit docs/hooks.md states
    assert "[LOCKDOWN]" not in hook(installed, "touch more.txt")["text"]


def test_a_page_seal_rewritten_to_match_an_edited_row_is_reported(sandboxed):
    store = Store(sandboxed / RUNTIME / "state.db")
    try:
        with store.write() as conn:
            for n in range(300):
                journal.append(conn, actor="system", kind="test.event", subject=None,
                               payload={"n": n})  # fmt: skip
    finally:
        store.close()
    assert doctor_codes(sandboxed) == set()  # the full pages are sealed now
    conn = db(sandboxed)
    try:
        conn.execute("UPDATE journal SET payload = '{\"n\":-1}' WHERE kind = 'test.event'"
                     " AND payload = '{\"n\":5}'")  # fmt: skip
        edited = conn.execute("SELECT seq FROM journal WHERE payload = '{\"n\":-1}'").fetchone()[0]
        root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'journal'").fetchone()
        first, last, leaves, overflow = conn.execute(
            "SELECT first_seq, last_seq, leaves, overflow FROM journal_seals"
            " WHERE first_seq <= ? AND last_seq >= ?", (edited, edited),
        ).fetchone()  # fmt: skip
    finally:
        conn.close()
    reader = journal_pages.Session()  # no SQLite connection of this process is open now
    reader.answer({"op": "open", "db": str(sandboxed / RUNTIME / "state.db"), "root": root[0]})
    rewritten = reader.digests([[first, last, leaves.hex(), overflow.hex()]])[0]
    reader.pages.close()
    conn = db(sandboxed)
    try:
        conn.execute("UPDATE journal_seals SET digest = ? WHERE first_seq = ?", (rewritten, first))
    finally:
        conn.close()
    report = json.loads(ithaca(sandboxed, "doctor", "--json").stdout)
    broken = {f["seq"] for f in report["findings"] if f["code"] == "JOURNAL_CHAIN_BROKEN"}
    assert edited in broken


def test_a_project_made_again_in_the_same_folder_starts_a_new_sealed_journal(sandboxed):
    shutil.rmtree(sandboxed / ".ithaca")
    done = ithaca(sandboxed, "init")
    assert done.returncode == 0, done.stderr
    assert doctor_codes(sandboxed) == set()
