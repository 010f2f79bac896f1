"""``record decision …``: immutable self-digested files, id conflicts, supersession rules
(same scope, once, also under a race), drift detection and size caps."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from ithaca.app import IthacaProject
from ithaca.delivery.service import DeliveryService
from ithaca.delivery.units import recoverable as units
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict, Corrupt, InvalidInput, IthacaError

ACCEPT = {
    "id": "dec-database",
    "scope": {"baseline": True},
    "question": "Which database?",
    "recommendation": "SQLite",
    "selection": {"choice": "SQLite", "rationale": "one file, no server"},
    "owner": "maria",
}


def test_an_accepted_decision_is_a_self_digested_file(
    record: Any, state_root: Path, project: IthacaProject
) -> None:
    result = record("decision", "accept", ACCEPT)
    decision = result["result"]["decision"]
    path = state_root / "decisions/baseline/dec-database.json"
    assert decision["path"] == "decisions/baseline/dec-database.json"
    text = path.read_text()
    value = json.loads(text)
    assert value["schema"] == "ithaca.decision/1"
    assert value["scope"] == {"type": "baseline", "id": None}
    assert value["status"] == "accepted"
    assert value["provenance"] == {"source": "agent", "evidence_refs": []}
    assert value["digest"] == canon.digest_excluding(value, "digest") == decision["digest"]
    assert text.startswith('{\n  "applied_refs": []')  # pretty, in canonical key order
    registered = project.store.connection().execute(
        "SELECT digest FROM delivery_files WHERE path = ?", (decision["path"],)
    )
    assert registered.fetchone()[0] == canon.digest_bytes(path.read_bytes())


def test_a_change_scoped_decision_lives_in_the_change_folder(
    opened_change: dict[str, Any], record: Any, state_root: Path
) -> None:
    record("decision", "accept", {**ACCEPT, "scope": {"change_id": "add-login"}})
    assert (state_root / "changes/active/add-login/decisions/dec-database.json").is_file()


def test_the_same_decision_again_is_a_no_op(record: Any, count_events: Any) -> None:
    record("decision", "accept", ACCEPT)
    events = count_events("")
    again = record("decision", "accept", ACCEPT)
    assert again["result"]["unchanged"] is True
    assert count_events("") == events


def test_other_content_under_a_taken_id_conflicts(record: Any) -> None:
    record("decision", "accept", ACCEPT)
    with pytest.raises(Conflict) as caught:
        record("decision", "accept", {**ACCEPT, "recommendation": "Postgres"})
    assert caught.value.code == "DECISION_ID_CONFLICT"


def test_generated_ids_are_readable_and_stable(record: Any) -> None:
    data = {key: value for key, value in ACCEPT.items() if key != "id"}
    first = record("decision", "accept", data)["result"]["decision"]
    assert first["id"].startswith("dec-which-database-")
    assert record("decision", "accept", data)["result"]["unchanged"] is True


def test_a_deferred_decision_needs_attention(record: Any, state_root: Path) -> None:
    result = record(
        "decision",
        "defer",
        {
            "id": "dec-cache",
            "scope": {"baseline": True},
            "question": "Cache sessions?",
            "recommendation": "Not yet",
            "owner": "maria",
            "consequence": "sessions stay in the database",
        },
    )
    assert [found["severity"] for found in result["diagnostics"]] == ["needs_attention"]
    value = json.loads((state_root / "decisions/baseline/dec-cache.json").read_text())
    assert (value["status"], value["selection"]) == ("deferred", None)


def test_supersession_links_the_new_record_and_leaves_the_old_file(
    record: Any, state_root: Path
) -> None:
    record("decision", "accept", ACCEPT)
    old = (state_root / "decisions/baseline/dec-database.json").read_bytes()
    newer = {
        **ACCEPT,
        "id": "dec-database-2",
        "recommendation": "Postgres",
        "supersedes": "dec-database",
    }
    result = record("decision", "accept", newer)
    assert result["result"]["decision"]["supersedes"] == "dec-database"
    assert (state_root / "decisions/baseline/dec-database.json").read_bytes() == old
    with pytest.raises(Conflict) as caught:
        record("decision", "accept", {**newer, "id": "dec-database-3"})
    assert caught.value.code == "DECISION_ALREADY_SUPERSEDED"
    assert caught.value.details["superseded_by"] == "dec-database-2"


def test_supersession_across_scopes_is_refused(opened_change: dict[str, Any], record: Any) -> None:
    record("decision", "accept", ACCEPT)
    with pytest.raises(InvalidInput) as caught:
        record(
            "decision",
            "accept",
            {
                **ACCEPT,
                "id": "dec-x",
                "scope": {"change_id": "add-login"},
                "supersedes": "dec-database",
            },
        )
    assert caught.value.code == "DECISION_SCOPE_CONFLICT"


def test_an_edited_decision_file_cannot_be_superseded(record: Any, state_root: Path) -> None:
    record("decision", "accept", ACCEPT)
    path = state_root / "decisions/baseline/dec-database.json"
    path.write_text(path.read_text().replace("SQLite", "MySQL"))
    with pytest.raises(Corrupt) as caught:
        record(
            "decision", "accept", {**ACCEPT, "id": "dec-database-2", "supersedes": "dec-database"}
        )
    assert caught.value.code == "DECISION_FILE_DRIFT"


def test_size_caps_are_enforced(record: Any) -> None:
    with pytest.raises(InvalidInput) as caught:
        record("decision", "accept", {**ACCEPT, "question": "é" * 600})
    assert caught.value.code == "DECISION_TOO_LARGE"
    assert caught.value.details["pointer"] == "/entries/0/data/question"
    with pytest.raises(InvalidInput) as whole:
        record("decision", "accept", {**ACCEPT, "effects": ["x" * 1000] * 17})
    assert whole.value.code == "DECISION_TOO_LARGE"


def test_concurrent_supersession_has_one_winner_and_no_orphan(
    service: DeliveryService,
    record: Any,
    state_root: Path,
    project: IthacaProject,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record("decision", "accept", ACCEPT)
    both_written = threading.Barrier(2, timeout=30)
    real = units.write_atomic

    def write_then_wait(root: Any, relpath: Any, data: Any, **kwargs: Any) -> Any:
        written = real(root, relpath, data, **kwargs)
        if str(relpath).startswith("decisions/"):
            both_written.wait()  # both units hold written files before either commits
        return written

    monkeypatch.setattr(units, "write_atomic", write_then_wait)
    outcomes: dict[str, Any] = {}

    def supersede(decision_id: str) -> None:
        data = {
            **ACCEPT,
            "id": decision_id,
            "recommendation": decision_id,
            "supersedes": "dec-database",
        }
        try:
            service.record(
                {
                    "entries": [
                        {
                            "kind": "decision",
                            "action": "accept",
                            "data": data,
                            "idempotency_key": decision_id,
                        }
                    ]
                }
            )
            outcomes[decision_id] = "committed"
        except IthacaError as exc:
            outcomes[decision_id] = exc.code

    threads = [threading.Thread(target=supersede, args=(f"dec-racer-{n}",)) for n in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes.values()) == ["DECISION_ALREADY_SUPERSEDED", "committed"]
    loser = next(name for name, outcome in outcomes.items() if outcome != "committed")
    assert not (state_root / f"decisions/baseline/{loser}.json").exists()
    rows = project.store.connection().execute("SELECT count(*) FROM delivery_decisions")
    assert rows.fetchone()[0] == 2
