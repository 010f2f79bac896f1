"""Delivery's tools as an agent lists them: compact enough to leave room in the context."""

from __future__ import annotations

from ithaca.kernel import canon

DELIVERY_TOOLS = ("context", "record", "checkpoint", "archive", "sync", "session", "doctor")
# Canonical bytes for the seven delivery tool objects, titles, hints and output schemas
# included (delivery reference §3.2).
BUDGET = 6144


def test_all_seven_delivery_tool_objects_fit_their_budget(client):
    listed = client.tools()
    objects = [
        listed[name].model_dump(mode="json", by_alias=True, exclude_none=True)
        for name in DELIVERY_TOOLS
    ]
    size = len(canon.canonical(objects))
    assert size <= BUDGET, size


def test_every_delivery_schema_refuses_unknown_fields_at_the_top(client):
    listed = client.tools()
    for name in DELIVERY_TOOLS:
        assert listed[name].input_schema.get("additionalProperties") is False, name


def test_context_over_mcp_reads_without_writing(client, journal_length):
    before = journal_length()
    envelope = client.ok("context", {})
    assert envelope["id"].startswith("ctx-")
    assert journal_length() == before


def test_doctor_over_mcp_inspects_a_healthy_project(client):
    report = client.ok("doctor", {"operation": "inspect"})
    assert report["status"] == "healthy", report
