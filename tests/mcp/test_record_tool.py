"""Delivery's ``record`` tool through the SDK's client: files, replays, reused keys."""

from __future__ import annotations

DECISION = {
    "kind": "decision",
    "action": "accept",
    "idempotency_key": "dec-1",
    "data": {
        "scope": {"baseline": True},
        "question": "Which database?",
        "recommendation": "SQLite: one file, no server.",
        "selection": {"choice": "sqlite", "rationale": "single-user tool"},
        "owner": "team",
    },
}


def test_record_writes_the_decision_file_and_replays_the_same_key(client, project_dir):
    first = client.ok("record", {"entries": [DECISION]})
    decision = first["results"][0]["result"]["decision"]
    assert first["results"][0]["status"] == "committed"
    assert (project_dir / ".ithaca" / decision["path"]).is_file()

    again = client.ok("record", {"entries": [DECISION]})
    assert again["results"][0]["status"] == "replayed"
    assert again["results"][0]["result"]["decision"] == decision


def test_record_refuses_a_reused_key_and_unknown_fields_without_writing(client, journal_length):
    client.ok("record", {"entries": [DECISION]})
    before = journal_length()
    other = {**DECISION, "data": {**DECISION["data"], "question": "Which queue?"}}
    assert client.refused("record", {"entries": [other]})["code"] == "IDEMPOTENCY_KEY_REUSED"
    stray = {**DECISION, "idempotency_key": "dec-2", "colour": "blue"}
    refused = client.refused("record", {"entries": [stray]})
    assert refused["code"] == "VALIDATION_ERROR"
    assert refused["details"]["pointer"] == "/entries/0/colour"
    assert journal_length() == before
