"""Base protocols, overrides, seed and file reconciliation (protocols reference §4–§6,
§13 Base and overrides)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ithaca.app import open_project
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, Corrupt, NotFound, Refused
from ithaca.kernel.project import planned_project
from ithaca.kernel.store import Store
from ithaca.protocols import seeds

PROGRESS = "ithaca.coding.progress"
ULYSSES = "ithaca.debugging.ulysses"


def override_of(seed_id: str, **fields):
    """An override record of a shipped seed, with new rules."""
    seed = next(s for s in seeds.BASE_PROTOCOLS if s["id"] == seed_id)
    record = {
        "id": seed_id,
        "name": "Team version",
        "description": "The team's stricter wording.",
        "priority": seed["priority"],
        "selector": dict(seed["selector"]),
        "rules": ["Report progress after every file."],
    }
    record.update(fields)
    return record


def seed_hash_of(seed_id: str) -> str:
    return seeds.seed_hash(next(s for s in seeds.BASE_PROTOCOLS if s["id"] == seed_id))


def journal_rows(governed):
    return governed.store.connection().execute("SELECT seq, hash FROM journal").fetchall()


def revision(governed) -> int:
    current: int = (
        governed.store.connection().execute("SELECT revision FROM protocol_state").fetchone()[0]
    )
    return current


def protocol_file(governed_dir, record, name=None):
    path = governed_dir / ".ithaca" / "protocols" / f"{name or record['id']}.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    return path


# --- base records ---------------------------------------------------------------------


def test_base_protocol_cannot_be_disabled(governed):
    with pytest.raises(Refused) as caught:
        governed.protocols.set_enabled(PROGRESS, False, actor="user")

    assert caught.value.code == "BASE_LOCKED"
    assert governed.protocols.get_protocol(PROGRESS)["enabled"] is True


def test_base_protocol_cannot_be_removed(governed):
    with pytest.raises(Refused) as caught:
        governed.protocols.remove_protocol(PROGRESS, actor="user")

    assert caught.value.code == "BASE_LOCKED"
    assert governed.protocols.get_protocol(PROGRESS)["source"] == "seed"


def test_base_protocol_cannot_be_updated(governed):
    with pytest.raises(Refused) as caught:
        governed.protocols.update_protocol(PROGRESS, {"rules": ["Nothing."]}, actor="user")

    assert caught.value.code == "BASE_LOCKED"


def test_base_row_cannot_be_disabled_through_raw_sql(governed):
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        governed.store.connection().execute(
            "UPDATE protocols SET enabled = 0 WHERE id = ?", (PROGRESS,)
        )


# --- overrides --------------------------------------------------------------------------


def test_override_of_a_base_id_is_created_with_the_override_flag(governed, journaled):
    created = governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    assert created["overridesBase"] is True
    assert created["baseHash"] == seed_hash_of(PROGRESS)
    assert created["scope"] == "user"
    assert created["rules"] == ["Report progress after every file."]
    events = journaled("protocols.override_created")
    assert [(e["subject"], e["actor"]) for e in events] == [(PROGRESS, "user")]


def test_existing_base_id_without_the_override_flag_is_protocol_exists(governed):
    with pytest.raises(Conflict) as caught:
        governed.protocols.create_protocol(override_of(PROGRESS), actor="user")

    assert caught.value.code == "PROTOCOL_EXISTS"


def test_second_override_of_the_same_base_id_is_protocol_exists(governed):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    with pytest.raises(Conflict) as caught:
        governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    assert caught.value.code == "PROTOCOL_EXISTS"


def test_override_cannot_be_disabled_through_update(governed):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    with pytest.raises(Refused) as caught:
        governed.protocols.update_protocol(PROGRESS, {"enabled": False}, actor="user")

    assert caught.value.code == "BASE_LOCKED"
    assert governed.protocols.get_protocol(PROGRESS)["enabled"] is True


def test_override_cannot_be_disabled_through_set_enabled(governed):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    with pytest.raises(Refused) as caught:
        governed.protocols.set_enabled(PROGRESS, False, actor="user")

    assert caught.value.code == "BASE_LOCKED"


def test_override_cannot_be_created_disabled(governed):
    with pytest.raises(Refused) as caught:
        governed.protocols.create_protocol(
            override_of(PROGRESS, enabled=False), actor="user", override=True
        )

    assert caught.value.code == "BASE_LOCKED"
    assert governed.protocols.get_protocol(PROGRESS)["source"] == "seed"


def test_override_cannot_be_disabled_through_a_file(governed_dir, hook, governed):
    event_id = hook.admit()
    protocol_file(governed_dir, override_of(PROGRESS, enabled=False))

    with pytest.raises(Corrupt) as caught:
        governed.protocols.load_protocols({"eventId": event_id})

    assert caught.value.code == "PROTOCOL_FILE_INVALID"
    assert governed.protocols.get_protocol(PROGRESS)["enabled"] is True
    assert governed.protocols.get_protocol(PROGRESS)["source"] == "seed"


def test_override_cannot_be_disabled_through_raw_sql(governed):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        governed.store.connection().execute(
            "UPDATE protocols SET enabled = 0 WHERE id = ?", (PROGRESS,)
        )

    assert governed.protocols.get_protocol(PROGRESS)["enabled"] is True


def test_removing_an_override_restores_the_seed_row(governed, journaled):
    seed_row = governed.protocols.get_protocol(PROGRESS)
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    result = governed.protocols.remove_protocol(PROGRESS, actor="user")

    restored = governed.protocols.get_protocol(PROGRESS)
    assert result["restoredBase"] is True
    assert restored["scope"] == "base"
    assert restored["source"] == "seed"
    assert restored["overridesBase"] is False
    assert restored["contentHash"] == seed_row["contentHash"] == seed_hash_of(PROGRESS)
    assert restored["rules"] == seed_row["rules"]
    assert [e["subject"] for e in journaled("protocols.override_removed")] == [PROGRESS]


@pytest.mark.parametrize(
    "selector",
    [{"workflow": "debugging"}, {"workflow": "coding", "task": "docs"}, {"connector": "cli"}],
)
def test_override_narrowing_the_selector_is_refused(selector, governed):
    with pytest.raises(Refused) as caught:
        governed.protocols.create_protocol(
            override_of(PROGRESS, selector=selector), actor="user", override=True
        )

    assert caught.value.code == "OVERRIDE_NARROWS_SELECTOR"
    assert governed.protocols.get_protocol(PROGRESS)["source"] == "seed"


def test_override_update_narrowing_the_selector_is_refused(governed):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)

    with pytest.raises(Refused) as caught:
        governed.protocols.update_protocol(
            PROGRESS, {"selector": {"workflow": "chat"}}, actor="user"
        )

    assert caught.value.code == "OVERRIDE_NARROWS_SELECTOR"


def test_override_may_widen_the_selector(governed):
    created = governed.protocols.create_protocol(
        override_of(PROGRESS, selector={"workflow": ["coding", "chat"]}),
        actor="user",
        override=True,
    )

    assert created["selector"] == {"workflow": ["coding", "chat"]}


def test_override_keeps_the_seed_constraints_first(governed):
    extra = {"kind": "deny_command", "commands": ["rm -rf *"]}
    created = governed.protocols.create_protocol(
        override_of(ULYSSES, constraints=[extra]), actor="user", override=True
    )

    seed = next(s for s in seeds.BASE_PROTOCOLS if s["id"] == ULYSSES)
    assert created["effectiveConstraints"][: len(seed["constraints"])] == seed["constraints"]
    assert created["effectiveConstraints"][-1]["commands"] == ["rm -rf *"]


def test_base_constraints_still_fire_under_an_override(hook, governed):
    governed.protocols.create_protocol(
        override_of(ULYSSES, constraints=[]), actor="user", override=True
    )
    event_id = hook.admit("::workflow debugging\nThe cache misses.")
    bundle = governed.protocols.load_protocols({"eventId": event_id})
    shipped = next(p for p in bundle["protocols"] if p["id"] == ULYSSES)
    assert shipped["rules"] == ["Report progress after every file."]

    answer = hook.write("src/cache.py")

    assert answer.decision == "deny"
    assert f"[{ULYSSES}]" in answer.reason
    assert hook.tool("Read", {"file_path": "src/cache.py"}).decision == "allow"


# --- namespace and identity ------------------------------------------------------------------


def test_new_ithaca_id_is_reserved(governed, make_record):
    for override in (False, True):
        with pytest.raises(Refused) as caught:
            governed.protocols.create_protocol(
                make_record("ithaca.custom-rule"), actor="user", override=override
            )
        assert caught.value.code == "RESERVED_NAMESPACE"


def test_existing_user_id_is_protocol_exists(governed, make_record):
    governed.protocols.create_protocol(make_record("team.rule"), actor="user")

    with pytest.raises(Conflict) as caught:
        governed.protocols.create_protocol(make_record("team.rule", priority=5), actor="user")

    assert caught.value.code == "PROTOCOL_EXISTS"
    assert governed.protocols.get_protocol("team.rule")["priority"] == 100


# --- seed reconciliation ----------------------------------------------------------------


def test_reopening_the_project_changes_nothing(governed_dir, governed, journaled):
    before_rows = journal_rows(governed)
    before_revision = revision(governed)

    for _ in range(2):
        again = open_project(governed_dir)
        again.close()

    assert journal_rows(governed) == before_rows
    assert revision(governed) == before_revision
    assert len(journaled("protocols.seeds_reconciled")) == 1


def test_reopening_with_an_override_keeps_it_and_reports_no_drift(governed_dir, governed):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)
    before_rows = journal_rows(governed)

    again = open_project(governed_dir)
    again.close()

    assert journal_rows(governed) == before_rows
    assert governed.protocols.get_protocol(PROGRESS)["overridesBase"] is True


def test_concurrent_opens_of_a_fresh_store_reconcile_the_seeds_once(tmp_path):
    root = tmp_path / "fresh"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True, capture_output=True)
    project = planned_project(root)
    for folder in (project.protocols_dir, project.runtime):
        Path(folder).mkdir(parents=True, exist_ok=True)
    db_path = Path(project.db_path)
    Store(db_path).close()
    script = (
        "import sys\n"
        "from ithaca.app import open_project\n"
        "sys.stdin.read()\n"
        "open_project(sys.argv[1]).close()\n"
    )
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", script, str(root)],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for _ in range(6)
    ]
    # Each process waits on stdin until all of them are running.
    errors = [process.communicate("", timeout=120)[1] for process in processes]

    assert [p.returncode for p in processes] == [0] * 6, errors
    conn = sqlite3.connect(db_path)
    try:
        kinds = [row[0] for row in conn.execute("SELECT kind FROM journal ORDER BY seq")]
        base_rows = conn.execute("SELECT count(*) FROM protocols WHERE scope = 'base'").fetchone()
    finally:
        conn.close()
    assert kinds.count("protocols.seeds_reconciled") == 1
    assert base_rows[0] == len(seeds.BASE_PROTOCOLS)


def test_retired_seed_is_removed_and_its_override_orphaned(governed_dir, governed, journaled):
    governed.protocols.create_protocol(override_of(PROGRESS), actor="user", override=True)
    kept = tuple(s for s in seeds.BASE_PROTOCOLS if s["id"] not in (PROGRESS, ULYSSES))
    kept_digest = canon.digest(sorted(kept, key=lambda seed: seed["id"]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(seeds, "BASE_PROTOCOLS", kept)
        patch.setattr(seeds, "seed_set_digest", lambda: kept_digest)
        reopened = open_project(governed_dir)
        reopened.close()

    report = journaled("protocols.seeds_reconciled")[-1]["payload"]
    assert report["removed"] == [ULYSSES]
    assert report["orphanedOverrides"] == [PROGRESS]
    orphan = governed.protocols.get_protocol(PROGRESS)
    assert orphan["overridesBase"] is False
    assert orphan["scope"] == "user"
    assert orphan["rules"] == ["Report progress after every file."]
    with pytest.raises(NotFound) as caught:
        governed.protocols.get_protocol(ULYSSES)
    assert caught.value.code == "PROTOCOL_NOT_FOUND"


# --- protocol files ---------------------------------------------------------------------


def test_protocol_files_are_added_changed_and_deleted_with_one_event_each(
    governed_dir, governed, make_record, journaled
):
    path = protocol_file(governed_dir, make_record("team.review"))
    governed.protocols.reconcile()
    added = governed.protocols.get_protocol("team.review")
    assert (added["source"], added["filePath"]) == ("file", ".ithaca/protocols/team.review.json")

    protocol_file(governed_dir, make_record("team.review", rules=["Review twice, carefully."]))
    governed.protocols.reconcile()
    assert governed.protocols.get_protocol("team.review")["rules"] == ["Review twice, carefully."]

    path.unlink()
    governed.protocols.reconcile()
    governed.protocols.reconcile()

    reports = [e["payload"] for e in journaled("protocols.files_reconciled")]
    assert [(r["added"], r["updated"], r["removed"]) for r in reports] == [
        (["team.review"], [], []),
        ([], ["team.review"], []),
        ([], [], ["team.review"]),
    ]
    assert [e["actor"] for e in journaled("protocols.files_reconciled")] == ["system"] * 3
    assert "team.review" not in [p["id"] for p in governed.protocols.list_protocols()]


def test_unchanged_protocol_files_are_not_reconciled_again(governed_dir, governed, make_record):
    protocol_file(governed_dir, make_record("team.review"))
    governed.protocols.reconcile()
    before = journal_rows(governed)

    again = open_project(governed_dir)
    again.close()
    governed.protocols.reconcile()

    assert journal_rows(governed) == before


def test_file_records_apply_to_bundles(governed_dir, hook, governed, make_record):
    protocol_file(governed_dir, make_record("team.review", selector={"workflow": "coding"}))
    event_id = hook.admit()

    bundle = governed.protocols.load_protocols({"eventId": event_id})

    review = next(p for p in bundle["protocols"] if p["id"] == "team.review")
    assert review["source"] == "file"


@pytest.mark.parametrize(
    "operation",
    [
        lambda service: service.update_protocol("team.review", {"priority": 1}, actor="user"),
        lambda service: service.set_enabled("team.review", False, actor="user"),
        lambda service: service.remove_protocol("team.review", actor="user"),
    ],
    ids=["update", "disable", "remove"],
)
def test_operations_on_a_file_record_are_file_managed(
    operation, governed_dir, governed, make_record
):
    protocol_file(governed_dir, make_record("team.review"))
    governed.protocols.reconcile()
    stored = governed.protocols.get_protocol("team.review")

    with pytest.raises(Refused) as caught:
        operation(governed.protocols)

    assert caught.value.code == "FILE_MANAGED"
    assert governed.protocols.get_protocol("team.review") == stored


def test_file_reusing_a_stored_record_id_fails_lookups_with_file_conflict(
    governed_dir, hook, governed, make_record
):
    governed.protocols.create_protocol(make_record("team.review"), actor="user")
    event_id = hook.admit()
    protocol_file(governed_dir, make_record("team.review", rules=["From the file."]))

    for _ in range(2):
        with pytest.raises(Conflict) as caught:
            governed.protocols.load_protocols({"eventId": event_id})
        assert caught.value.code == "PROTOCOL_FILE_CONFLICT"

    stored = governed.protocols.get_protocol("team.review")
    assert (stored["source"], stored["rules"]) == ("sqlite", ["Follow the team rule."])


def test_file_override_of_a_base_id_is_an_override_and_deleting_it_restores_the_base(
    governed_dir, governed
):
    path = protocol_file(governed_dir, override_of(PROGRESS))
    governed.protocols.reconcile()
    overridden = governed.protocols.get_protocol(PROGRESS)
    assert (overridden["source"], overridden["overridesBase"]) == ("file", True)

    path.unlink()
    governed.protocols.reconcile()

    restored = governed.protocols.get_protocol(PROGRESS)
    assert (restored["scope"], restored["source"]) == ("base", "seed")
    assert restored["contentHash"] == seed_hash_of(PROGRESS)


def test_file_override_narrowing_the_selector_fails_lookups(governed_dir, hook, governed):
    event_id = hook.admit()
    protocol_file(governed_dir, override_of(PROGRESS, selector={"workflow": "chat"}))

    with pytest.raises(Corrupt) as caught:
        governed.protocols.load_protocols({"eventId": event_id})

    assert caught.value.code == "PROTOCOL_FILE_INVALID"
    assert governed.protocols.get_protocol(PROGRESS)["source"] == "seed"


# --- what a rule file is -----------------------------------------------------------------


def _not_a_regular_file(path: Path, elsewhere: Path, make: str) -> None:
    """Put something other than the rule's own regular file at ``path``."""
    if make == "symlink":  # to an identical copy: the same bytes, read through a link
        elsewhere.write_bytes(path.read_bytes())
        path.unlink()
        path.symlink_to(elsewhere)
    elif make == "hard link":
        os.link(path, elsewhere)
    elif make == "fifo":
        path.unlink()
        os.mkfifo(path)
    else:
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("make", ["symlink", "hard link", "fifo", "folder"])
def test_a_rule_file_that_is_no_regular_file_is_refused_not_skipped(
    governed_dir, hook, governed, make_record, tmp_path, make
):
    from ithaca.protocols import health

    path = protocol_file(governed_dir, make_record("team.review", selector={"workflow": "coding"}))
    governed.protocols.reconcile()
    _not_a_regular_file(path, tmp_path / "copy.json", make)
    event_id = hook.admit()

    with pytest.raises(Corrupt) as caught:
        governed.protocols.load_protocols({"eventId": event_id})

    assert caught.value.code == "PROTOCOL_FILE_INVALID"
    assert caught.value.details == {
        "path": ".ithaca/protocols/team.review.json",
        "problem": "NOT_REGULAR",
    }
    found = health.check(governed.project, governed.store.connection())
    assert [f["code"] for f in found] == ["PROTOCOL_FILE_INVALID"]
    assert "team.review.json" in found[0]["message"] and "not a regular file" in found[0]["message"]


def test_a_rule_edited_in_place_with_its_size_and_time_put_back_is_read_again(
    governed_dir, governed, make_record
):
    path = protocol_file(governed_dir, make_record("team.review", rules=["Review once, AAAA."]))
    governed.protocols.reconcile()
    before = path.stat()
    text = path.read_text().replace("AAAA", "BBBB")
    with open(path, "r+", encoding="utf-8") as handle:  # the same inode, the same size
        handle.write(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)

    governed.protocols.reconcile()

    assert governed.protocols.get_protocol("team.review")["rules"] == ["Review once, BBBB."]


def test_an_editors_lock_beside_a_rule_is_not_a_rule(governed_dir, hook, governed, make_record):
    protocol_file(governed_dir, make_record("team.review", selector={"workflow": "coding"}))
    lock = governed_dir / ".ithaca" / "protocols" / ".#team.review.json"
    lock.symlink_to("someone@host.4242:1700000000")  # how Emacs marks a file being edited

    bundle = governed.protocols.load_protocols({"eventId": hook.admit()})

    assert "team.review" in [p["id"] for p in bundle["protocols"]]
