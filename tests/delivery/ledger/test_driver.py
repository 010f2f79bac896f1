"""The ledger's Git merge driver on its own (reference §8.3): exit codes, the merged
header, the conflicts block, and the ours file left alone when a side is not a ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ithaca.delivery.ledger.driver import main
from ithaca.delivery.ledger.format import Ledger, Record, document, parse, record, render


def task(task_id: str, title: str) -> Record:
    return record("task", task_id, {"id": task_id, "title": title, "status": "pending"})


def ledger(*records: Record, generation: int = 1, project: str = "prj-000000000001") -> Ledger:
    return document(project, records, generation=generation, parent_digest=None, ancestors=())


def write(tmp_path: Path, name: str, value: Ledger | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(value if isinstance(value, bytes) else render(value))
    return path


def test_branches_touching_different_records_merge_with_a_new_header(tmp_path: Path):
    base = ledger(task("T-1", "one"), task("T-2", "two"))
    ours = ledger(task("T-1", "one, ours"), task("T-2", "two"), generation=2)
    theirs = ledger(
        task("T-1", "one"), task("T-2", "two, theirs"), task("T-3", "new"), generation=5
    )
    paths = [
        write(tmp_path, name, value) for name, value in (("O", base), ("A", ours), ("B", theirs))
    ]

    assert main([str(path) for path in paths]) == 0

    merged = parse(paths[1].read_bytes())
    assert {item.id: item.body["title"] for item in merged.records} == {
        "T-1": "one, ours",
        "T-2": "two, theirs",
        "T-3": "new",
    }
    assert merged.generation == 6
    assert merged.parent_digest == ours.state_digest
    assert merged.ancestors[:2] == (ours.state_digest, theirs.state_digest)
    assert merged.conflicts == ()


def test_a_record_both_branches_changed_is_kept_as_ours_and_listed(tmp_path: Path, capsys):
    base = ledger(task("T-1", "one"))
    ours = ledger(task("T-1", "ours"))
    theirs = ledger(task("T-1", "theirs"))
    paths = [
        write(tmp_path, name, value) for name, value in (("O", base), ("A", ours), ("B", theirs))
    ]

    assert main([*map(str, paths), ".ithaca/tasks/tasks.json"]) == 1

    merged = parse(paths[1].read_bytes())
    assert merged.records[0].body["title"] == "ours"
    [conflict] = merged.conflicts
    assert (conflict.label, conflict.base_digest) == ("task:T-1", base.records[0].digest)
    assert conflict.ours is not None and conflict.theirs is not None
    assert conflict.ours.body["title"] == "ours"
    assert conflict.theirs.body["title"] == "theirs"
    assert "task:T-1" in capsys.readouterr().err


def test_a_side_that_is_not_a_ledger_leaves_ours_untouched(tmp_path: Path):
    ours_bytes = render(ledger(task("T-1", "ours")))
    broken = json.loads(render(ledger(task("T-1", "theirs"))))
    broken["records"][0]["body"]["title"] = "edited by hand"
    paths = [
        write(tmp_path, "O", ledger(task("T-1", "one"))),
        write(tmp_path, "A", ours_bytes),
        write(tmp_path, "B", json.dumps(broken).encode()),
    ]
    assert main([str(path) for path in paths]) == 2
    assert paths[1].read_bytes() == ours_bytes


def test_ledgers_of_different_projects_do_not_merge(tmp_path: Path):
    ours_bytes = render(ledger(task("T-1", "ours")))
    paths = [
        write(tmp_path, "O", ledger(task("T-1", "one"))),
        write(tmp_path, "A", ours_bytes),
        write(tmp_path, "B", ledger(task("T-1", "one"), project="prj-00000000000f")),
    ]
    assert main([str(path) for path in paths]) == 2
    assert paths[1].read_bytes() == ours_bytes


def test_a_ledger_both_branches_added_merges_against_an_empty_base(tmp_path: Path):
    paths = [
        write(tmp_path, "O", b""),
        write(tmp_path, "A", ledger(task("T-1", "ours"))),
        write(tmp_path, "B", ledger(task("T-2", "theirs"))),
    ]
    assert main([str(path) for path in paths]) == 0
    assert [item.id for item in parse(paths[1].read_bytes()).records] == ["T-1", "T-2"]


def test_the_driver_runs_as_a_module_without_a_project(tmp_path: Path):
    paths = [
        write(tmp_path, "O", ledger(task("T-1", "one"))),
        write(tmp_path, "A", ledger(task("T-1", "ours"))),
        write(tmp_path, "B", ledger(task("T-1", "theirs"))),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "ithaca.delivery.ledger.driver", *map(str, paths)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 1
    assert "conflicts" in json.loads(paths[1].read_text())
    assert main(["only-one-argument"]) == 2


def test_the_driver_loads_no_database_and_no_cli():
    code = (
        "import sys, ithaca.delivery.ledger.driver\n"
        "loaded = {'sqlite3', 'click', 'ithaca.delivery.service', 'ithaca.kernel.store'}\n"
        "assert not loaded & set(sys.modules), loaded & set(sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
