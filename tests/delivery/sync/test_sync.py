"""``sync`` against a real store (reference §8.2, §16 sync): publish and import, no-ops,
per-record merges with a teammate's ledger, conflicts that apply nothing, ``resolve``,
running tasks, branch switches, local-only fields, idempotency, inspect and migrate."""

from __future__ import annotations

import itertools
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.ledger import format as ledger_format
from ithaca.delivery.ledger.format import LEDGER_PATH, Key, Ledger, Record, document, parse
from ithaca.delivery.sync import importer as sync_import
from ithaca.delivery.sync import publish as sync_publish
from ithaca.delivery.sync import rehash as sync_rehash
from ithaca.delivery.sync import tool as sync
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, Refused

_KEYS = itertools.count(1)


def call(project: IthacaProject, action: str, key: str | None = None, **fields: Any):
    request: dict[str, Any] = {"action": action, **fields}
    if action != "inspect":
        request["idempotency_key"] = key or f"sync-{next(_KEYS)}"
    return sync.sync(
        project.project, project.store, project.config, request, units=project.delivery.units
    )


def define(record: Callable[..., Any], task_id: str, title: str = "a task") -> None:
    record(
        "task_contract",
        "define",
        {
            "id": task_id,
            "title": title,
            "verification": {"argv": ["pytest"]},
            "files_modified": [f"src/{task_id}.py"],
        },
    )


def retitle(record: Callable[..., Any], task_id: str, title: str) -> None:
    record("task_contract", "revise", {"id": task_id, "patch": {"title": title}})


def ledger_file(project: IthacaProject) -> Path:
    return Path(project.project.state_root) / LEDGER_PATH


def title_of(project: IthacaProject, task_id: str) -> str:
    row = (
        project.store.connection()
        .execute("SELECT contract FROM delivery_tasks WHERE id = ?", (task_id,))
        .fetchone()
    )
    title: str = json.loads(row[0])["title"]
    return title


def events(project: IthacaProject, kind: str) -> int:
    query = "SELECT count(*) FROM journal WHERE kind = ?"
    return int(project.store.connection().execute(query, (kind,)).fetchone()[0])


def teammate(project: IthacaProject, edit: Callable[[dict[Key, Record]], object]) -> Ledger:
    """Write the next generation of the ledger as another checkout would publish it."""
    current = parse(ledger_file(project).read_bytes())
    records = dict(current.index)
    edit(records)
    stamped = tuple(
        ledger_format.revised(found, current.index[key].stamp if key in current.index else None)
        for key, found in records.items()
    )
    following = document(
        current.project_id,
        stamped,
        generation=current.generation + 1,
        parent_digest=current.state_digest,
        ancestors=(current.state_digest, *current.ancestors),
    )
    ledger_file(project).write_bytes(ledger_format.render(following))
    return following


def retitled(title: str, task_id: str) -> Callable[[dict[Key, Record]], None]:
    def edit(records: dict[Key, Record]) -> None:
        found = records[("task", task_id)]
        records[found.key] = ledger_format.record("task", task_id, {**found.body, "title": title})

    return edit


@pytest.fixture
def published(project: IthacaProject, record: Callable[..., Any]) -> IthacaProject:
    """Three tasks, published: the file and the base agree."""
    for task_id in ("T-1", "T-2", "T-3"):
        define(record, task_id)
    call(project, "publish")
    return project


# --- publish --------------------------------------------------------------------------------


def test_publish_writes_every_record_and_a_second_publish_writes_nothing(
    project: IthacaProject, record: Callable[..., Any]
):
    for number in (3, 1, 2):
        define(record, f"T-{number}", f"task {number}")
    answer = call(project, "publish")
    data = ledger_file(project).read_bytes()
    written = parse(data)
    # ``ithaca init`` published generation 0, with no records.
    assert (answer["status"], answer["generation"], answer["records"]) == ("published", 1, 3)
    assert [found.id for found in written.records] == ["T-1", "T-2", "T-3"]
    assert written.records[0].body["title"] == "task 1"
    assert written.state_digest == answer["state_digest"]

    again = call(project, "publish")
    assert again["status"] == "unchanged" and again["journal_seq"] is None
    assert ledger_file(project).read_bytes() == data
    assert events(project, "delivery.ledger.published") == 2  # init's, then this one


def test_a_changed_record_is_the_next_revision_of_the_published_one(
    published: IthacaProject, record: Callable[..., Any]
):
    before = parse(ledger_file(published).read_bytes())
    retitle(record, "T-2", "renamed")
    answer = call(published, "publish")
    after = parse(ledger_file(published).read_bytes())
    changed = after.index[("task", "T-2")]
    assert (answer["generation"], answer["changed"]) == (before.generation + 1, 1)
    assert (changed.revision, changed.parent_digest) == (2, before.index[("task", "T-2")].digest)
    assert after.index[("task", "T-1")] == before.index[("task", "T-1")]
    assert after.parent_digest == before.state_digest
    assert after.ancestors[0] == before.state_digest


def test_no_local_only_field_is_published(published: IthacaProject, record: Callable[..., Any]):
    conn = published.store.connection()
    conn.execute(
        "UPDATE delivery_tasks SET status = 'in_progress', completion_commit = 'abc123'"
        " WHERE id = 'T-1'"
    )
    conn.execute(
        "INSERT INTO delivery_circuits (task_id, consecutive_failures, open, updated_at)"
        " VALUES ('T-1', 2, 0, 'now')"
    )
    record("task_contract", "remove", {"id": "T-3", "reason": "not needed"})
    call(published, "publish")
    text = ledger_file(published).read_text()
    written = parse(text.encode())
    assert [found.id for found in written.records] == ["T-1", "T-2"]
    assert written.index[("task", "T-1")].body["status"] == "pending"
    for local in ("in_progress", "completion_commit", "abc123", "consecutive_failures"):
        assert local not in text


def test_a_missing_ledger_is_written_again(published: IthacaProject):
    before = parse(ledger_file(published).read_bytes())
    ledger_file(published).unlink()
    assert call(published, "import")["status"] == "missing"
    answer = call(published, "publish")
    again = parse(ledger_file(published).read_bytes())
    assert answer["generation"] == before.generation + 1
    assert again.state_digest == before.state_digest


def test_publish_on_a_fresh_project_is_generation_zero_with_a_project_id(project: IthacaProject):
    answer = call(project, "publish")
    written = parse(ledger_file(project).read_bytes())
    assert (answer["generation"], written.records, written.parent_digest) == (0, (), None)
    assert written.project_id.startswith("prj-") and len(written.project_id) == 16


# --- import ---------------------------------------------------------------------------------


def test_importing_the_ledger_just_synced_writes_nothing(published: IthacaProject):
    def written() -> tuple[Any, ...]:
        conn = published.store.connection()
        return (
            conn.execute("SELECT count(*) FROM journal").fetchone()[0],
            conn.execute("SELECT count(*) FROM delivery_idempotency").fetchone()[0],
        )

    before = written()
    answer = call(published, "import")
    again = call(published, "import")
    assert answer["status"] == again["status"] == "current"
    assert answer["journal_seq"] is None
    assert written() == before  # no event and no stored key: no write at all (§8.2)
    assert events(published, "delivery.ledger.imported") == 0


def test_import_takes_a_teammates_edit_and_keeps_unpublished_work(
    published: IthacaProject, record: Callable[..., Any]
):
    retitle(record, "T-2", "mine, unpublished")
    teammate(published, retitled("theirs", "T-1"))
    answer = call(published, "import")
    assert (answer["status"], answer["relation"], answer["applied"]) == ("imported", "behind", 1)
    assert title_of(published, "T-1") == "theirs"
    assert title_of(published, "T-2") == "mine, unpublished"
    revision = (
        published.store.connection()
        .execute("SELECT revision FROM delivery_tasks WHERE id = 'T-1'")
        .fetchone()[0]
    )
    assert revision == 2
    assert events(published, "delivery.ledger.imported") == 1
    assert call(published, "inspect")["status"] == "ahead"


def test_a_record_changed_here_and_in_the_ledger_conflicts_and_nothing_is_applied(
    published: IthacaProject, record: Callable[..., Any]
):
    retitle(record, "T-1", "mine")
    teammate(
        published,
        lambda records: (
            retitled("theirs", "T-1")(records),
            retitled("theirs too", "T-2")(records),
        ),
    )
    before = events(published, "")
    with pytest.raises(Conflict) as caught:
        call(published, "import")
    assert caught.value.code == "LEDGER_CONFLICT"
    assert caught.value.details["conflicts"][0]["id"] == "T-1"
    assert (title_of(published, "T-1"), title_of(published, "T-2")) == ("mine", "a task")
    assert events(published, "") == before
    assert call(published, "inspect")["status"] == "conflicted"


def test_resolve_settles_a_conflict_either_way(
    published: IthacaProject, record: Callable[..., Any]
):
    retitle(record, "T-1", "mine")
    retitle(record, "T-2", "mine too")
    teammate(
        published,
        lambda records: (
            retitled("theirs", "T-1")(records),
            retitled("theirs too", "T-2")(records),
        ),
    )
    answer = call(published, "import", resolve={"task:T-1": "theirs", "task:T-2": "ours"})
    assert answer["resolved"] == {"task:T-1": "theirs", "task:T-2": "ours"}
    assert (title_of(published, "T-1"), title_of(published, "T-2")) == ("theirs", "mine too")
    republished = call(published, "publish")
    assert republished["changed"] == 1
    assert parse(ledger_file(published).read_bytes()).index[("task", "T-2")].revision == 3


def test_delete_against_change_conflicts(published: IthacaProject, record: Callable[..., Any]):
    retitle(record, "T-2", "mine")
    teammate(published, lambda records: records.pop(("task", "T-2")))
    with pytest.raises(Conflict) as caught:
        call(published, "import")
    assert caught.value.details["conflicts"][0]["theirs_digest"] is None
    assert title_of(published, "T-2") == "mine"


def test_a_record_the_ledger_removed_is_removed_here(published: IthacaProject):
    teammate(published, lambda records: records.pop(("task", "T-3")))
    call(published, "import")
    status = (
        published.store.connection()
        .execute("SELECT status FROM delivery_tasks WHERE id = 'T-3'")
        .fetchone()[0]
    )
    assert status == "removed"


def test_a_change_to_a_task_a_session_runs_here_conflicts(published: IthacaProject):
    published.store.connection().execute(
        "UPDATE delivery_tasks SET status = 'in_progress' WHERE id = 'T-1'"
    )
    teammate(published, retitled("theirs", "T-1"))
    with pytest.raises(Conflict) as caught:
        call(published, "import", resolve={"task:T-1": "theirs"})
    assert caught.value.code == "LEDGER_ACTIVE_TASK_CONFLICT"
    assert title_of(published, "T-1") == "a task"


def test_a_branch_switch_makes_the_database_follow_and_keeps_unpublished_edits(
    published: IthacaProject, record: Callable[..., Any]
):
    old_branch = ledger_file(published).read_bytes()
    retitle(record, "T-1", "published on the new branch")
    call(published, "publish")
    retitle(record, "T-2", "unpublished")
    ledger_file(published).write_bytes(old_branch)  # git checkout of the old branch
    answer = call(published, "import")
    assert answer["relation"] == "rewound"
    assert [note["code"] for note in answer["diagnostics"]] == ["LEDGER_REWOUND"]
    assert title_of(published, "T-1") == "a task"
    assert title_of(published, "T-2") == "unpublished"


def test_a_ledger_of_another_project_or_edited_by_hand_is_refused(published: IthacaProject):
    value = json.loads(ledger_file(published).read_text())
    value["project_id"] = "prj-ffffffffffff"
    records = tuple(parse(ledger_file(published).read_bytes()).records)
    other = document("prj-ffffffffffff", records, generation=1, parent_digest=None, ancestors=())
    ledger_file(published).write_bytes(ledger_format.render(other))
    with pytest.raises(Corrupt) as caught:
        call(published, "import")
    assert caught.value.code == "LEDGER_PROJECT_MISMATCH"

    value["project_id"] = parse(ledger_format.render(other)).project_id
    value["records"][0]["body"]["title"] = "edited by hand"
    ledger_file(published).write_text(json.dumps(value))
    with pytest.raises(Corrupt) as caught:
        call(published, "import")
    assert caught.value.code == "LEDGER_DIGEST_MISMATCH"
    assert call(published, "inspect")["status"] == "corrupt"


def test_a_ledger_from_a_newer_ithaca_is_reported_and_never_migrated(
    published: IthacaProject,
) -> None:
    value = json.loads(ledger_file(published).read_text())
    value["schema_version"] = 2
    ledger_file(published).write_text(json.dumps(value))

    answer = call(published, "inspect")
    assert answer["status"] == "corrupt"
    assert "LEDGER_SCHEMA_TOO_NEW" in [d["code"] for d in answer["diagnostics"]]
    with pytest.raises(Refused) as caught:
        call(published, "migrate")
    assert caught.value.code == "LEDGER_SCHEMA_TOO_NEW"


def test_a_fresh_checkout_imports_every_kind_of_record(
    tmp_path: Path, project: IthacaProject, record: Callable[..., Any], new_change: Any
):
    from ithaca import init_project

    new_change("add-login")
    define(record, "T-1")
    record(
        "decision",
        "accept",
        {
            "scope": {"change_id": "add-login"},
            "question": "Which hash?",
            "recommendation": "SHA-256",
            "owner": "maria",
            "selection": {"choice": "SHA-256", "rationale": "standard"},
        },
    )
    record("baseline", "initialize", {"project_name": "demo"})
    call(project, "publish")
    clone = tmp_path / "clone"
    state = Path(project.project.state_root)
    for path in state.rglob("*"):
        relative = path.relative_to(state)
        if path.is_file() and relative.parts[0] != ".runtime":
            target = clone / ".ithaca" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    (clone / ".git").mkdir()
    other, _ = init_project(clone)  # a fresh database: init imports the ledger
    try:
        assert call(other, "import")["status"] == "current"
        assert call(other, "inspect")["status"] == "current"
        assert events(other, "delivery.ledger.imported") == 1
        conn = other.store.connection()
        assert conn.execute("SELECT count(*) FROM delivery_decisions").fetchone()[0] == 1
        assert conn.execute("SELECT status FROM delivery_baselines").fetchone()[0] == "draft"
        registered = {row[0] for row in conn.execute("SELECT kind FROM delivery_files")}
        assert {"decision", "intent", "ledger"} <= registered
    finally:
        other.close()


# --- the tool contract ---------------------------------------------------------------------


def test_the_sync_tool_fits_its_share_of_the_tools_list_budget():
    tool = {"name": "sync", "description": sync.SYNC_DESCRIPTION, "inputSchema": sync.SYNC_SCHEMA}
    assert len(canon.canonical(tool)) <= 1024


def test_the_same_key_replays_and_another_request_under_it_is_refused(published: IthacaProject):
    first = call(published, "publish", key="k-publish")
    again = call(published, "publish", key="k-publish")
    assert again["replayed"] is True and again["status"] == first["status"]
    with pytest.raises(Conflict) as caught:
        call(published, "import", key="k-publish")
    assert caught.value.code == "IDEMPOTENCY_KEY_REUSED"


@pytest.mark.parametrize(
    ("request_", "pointer"),
    [
        ({"action": "publish"}, "/idempotency_key"),
        (
            {"action": "publish", "idempotency_key": "k", "resolve": {"task:T-1": "ours"}},
            "/resolve",
        ),
        ({"action": "import", "idempotency_key": "k", "resolve": {"T-1": "ours"}}, "/resolve/T-1"),
        (
            {"action": "import", "idempotency_key": "k", "resolve": {"task:T-1": "mine"}},
            "/resolve/task:T-1",
        ),
        ({"action": "import", "idempotency_key": "k", "force": True}, "/force"),
    ],
)
def test_malformed_requests_are_refused(project: IthacaProject, request_, pointer):
    with pytest.raises(InvalidInput) as caught:
        sync.sync(project.project, project.store, project.config, request_)
    assert caught.value.details["pointer"] == pointer


def test_inspect_reports_where_things_stand_and_writes_nothing(
    project: IthacaProject, record: Callable[..., Any]
):
    answer = call(project, "inspect")  # init registered the driver and published
    assert (answer["status"], answer["merge_driver_registered"]) == ("current", True)
    ledger_file(project).unlink()
    root = project.project.root
    subprocess.run(["git", "-C", root, "config", "--unset", "merge.ithaca-ledger.driver"])
    answer = call(project, "inspect")
    assert (answer["status"], answer["merge_driver_registered"]) == ("missing", False)
    assert "MERGE_DRIVER_MISSING" in [note["code"] for note in answer["diagnostics"]]
    define(record, "T-1")
    call(project, "publish")
    assert call(project, "inspect")["status"] == "current"
    teammate(project, retitled("theirs", "T-1"))
    before = events(project, "")
    answer = call(project, "inspect")
    assert (answer["status"], answer["incoming"]) == ("behind", 1)
    assert events(project, "") == before


def test_auto_import_follows_the_file_and_reports_conflicts_without_failing(
    published: IthacaProject, record: Callable[..., Any]
):
    delivery = published.delivery
    teammate(published, retitled("theirs", "T-1"))
    assert sync_import.auto_import(published.project, published.store, delivery.units) == []
    assert title_of(published, "T-1") == "theirs"
    assert sync_import.auto_import(published.project, published.store, delivery.units) == []

    retitle(record, "T-2", "mine")
    teammate(published, retitled("theirs", "T-2"))
    [note] = sync_import.auto_import(published.project, published.store, delivery.units)
    assert (note["code"], note["severity"]) == ("LEDGER_CONFLICT", "needs_attention")
    assert title_of(published, "T-2") == "mine"


def test_auto_publish_writes_the_change_or_defers_without_failing(
    published: IthacaProject, record: Callable[..., Any]
):
    units = published.delivery.units
    retitle(record, "T-1", "changed here")
    assert sync_publish.auto_publish(published.project, published.store, units) == []
    assert parse(ledger_file(published).read_bytes()).index[("task", "T-1")].revision == 2

    retitle(record, "T-2", "mine")
    teammate(published, retitled("theirs", "T-2"))
    [note] = sync_publish.auto_publish(published.project, published.store, units)
    assert (note["code"], note["severity"]) == ("LEDGER_PUBLISH_DEFERRED", "needs_attention")
    assert "LEDGER_CONFLICT" in note["message"]


def test_migrate_rewrites_a_reformatted_ledger_after_a_byte_exact_backup(
    published: IthacaProject,
):
    canonical = ledger_file(published).read_bytes()
    reformatted = json.dumps(json.loads(canonical), indent=1).encode()
    ledger_file(published).write_bytes(reformatted)
    answer = call(published, "migrate")
    backup = Path(published.project.runtime) / answer["backup"]
    assert backup.read_bytes() == reformatted
    assert ledger_file(published).read_bytes() == canonical
    assert call(published, "migrate")["status"] == "current"
    assert call(published, "import")["status"] == "current"


def test_ten_thousand_records_publish_and_import(
    project: IthacaProject, record: Callable[..., Any]
):
    records = tuple(
        ledger_format.record(
            "task",
            f"T-{n}",
            {
                "id": f"T-{n}",
                "title": f"task {n}",
                "status": "pending",
                "verification": {"argv": ["pytest"]},
            },
            exact=True,
        )
        for n in range(10_000)
    )
    project_id = parse(ledger_file(project).read_bytes()).project_id  # init's generation 0
    ledger = document(project_id, records, generation=1, parent_digest=None, ancestors=())
    ledger_file(project).write_bytes(ledger_format.render(ledger))
    assert call(project, "import")["applied"] == 10_000
    retitle(record, "T-9999", "the last one, revised")
    answer = call(project, "publish")
    assert (answer["records"], answer["changed"]) == (10_000, 1)
    written = parse(ledger_file(project).read_bytes())
    assert written.index[("task", "T-9999")].revision == 2


def test_a_hand_edit_is_accepted_only_through_rehash_by_the_user(published: IthacaProject):
    from click.testing import CliRunner

    from ithaca.cli.commands.sync import group

    value = json.loads(ledger_file(published).read_text())
    value["records"][0]["body"]["title"] = "edited by hand"
    ledger_file(published).write_text(json.dumps(value, indent=2))
    with pytest.raises(Corrupt) as caught:
        call(published, "import")
    assert caught.value.code == "LEDGER_DIGEST_MISMATCH"

    refused = CliRunner().invoke(
        group, ["import", "--rehash"], obj={"project_path": published.project.root}
    )
    assert refused.exit_code == 1 and "USER_ONLY" in refused.output
    assert title_of(published, "T-1") == "a task"

    edits = sync_rehash.read_edits(published.project)
    assert edits.edited == ["task:T-1"]
    shown = sync_rehash.diff(published.project, published.store, edits)
    assert '-  "title": "a task",' in shown and '+  "title": "edited by hand",' in shown
    answer = sync.rehash(
        published.project,
        published.store,
        published.config,
        edits.ledger.state_digest,
        "k-rehash",
        units=published.delivery.units,
    )
    assert answer["rehashed"] == ["task:T-1"] and answer["status"] == "imported"
    assert title_of(published, "T-1") == "edited by hand"
    assert parse(ledger_file(published).read_bytes()).index[("task", "T-1")].revision == 2
