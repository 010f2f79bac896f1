"""The ``notebook``, ``ulysses`` and ``knowledge`` tools through the SDK's client.

A session driven over MCP behaves as the service does; state survives a reconnect; and
malformed input of any operation is refused with a coded error that leaves the journal
where it was.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ithaca.ulysses.tools import ULYSSES_SCHEMA
from ithaca.validators.tools import NOTEBOOK_SCHEMA

PASSES_ON_ZERO = """\
from tb_validate import observed, pass_, fail
seen = observed()
pass_("zero errors") if seen == {"errors": 0} else fail("errors remain", seen)
"""


def cell(client: Any, source: str = PASSES_ON_ZERO) -> dict[str, str]:
    notebook = client.ok("notebook", {"operation": "create", "title": "checks"})["notebookId"]
    added = client.ok(
        "notebook", {"operation": "add_cell", "notebookId": notebook, "source": source}
    )
    return {"notebookId": notebook, "cellId": added["cellId"]}


def test_tool_schemas_name_the_seed_operations_and_refuse_other_fields(client):
    tools = client.tools()
    ulysses = tools["ulysses"].input_schema
    assert ulysses["additionalProperties"] is False
    assert set(ulysses["properties"]["operation"]["enum"]) == {
        "init",
        "plan",
        "outcome",
        "bind_final_validator",
        "reflect",
        "note",
        "status",
        "resume",
        "complete",
    }
    assert {"primaryValidator", "recoveryValidator", "terminalState"} <= set(ulysses["properties"])
    notebook = tools["notebook"].input_schema["properties"]["operation"]["enum"]
    assert "run_cell" in notebook and "add_cell" in notebook
    assert tools["knowledge"].input_schema["properties"]["operation"]["enum"] == ["search", "get"]


def test_a_session_over_mcp_follows_the_validator_and_survives_a_reconnect(connect, project_dir):
    first = connect(project_dir)
    opened = first.ok("ulysses", {"operation": "init", "problem": "the importer drops rows"})
    validator = cell(first)
    planned = first.ok(
        "ulysses",
        {
            "operation": "plan",
            "primary": "skip the header row explicitly",
            "recovery": "restore the importer",
            "primaryValidator": validator,
            "recoveryValidator": validator,
        },
    )
    assert (planned["phase"], planned["S"]) == ("PRIMARY", 1)

    failed = first.ok("ulysses", {"operation": "outcome", "observed": {"errors": 3}})
    assert (failed["assessment"], failed["phase"]) == ("unexpected-unfavorable", "RECOVERY")

    second = connect(project_dir)
    resumed = second.ok("ulysses", {"operation": "resume"})
    assert resumed["session_id"] == opened["session_id"]
    assert resumed["phase"] == "RECOVERY"
    assert any(event["kind"] == "ulysses.outcome" for event in resumed["history"])
    passed = second.ok("ulysses", {"operation": "outcome", "observed": {"errors": 0}})
    assert (passed["assessment"], passed["phase"]) == ("expected", "IDLE")


def test_resolved_is_refused_without_a_final_validator_and_then_gated_by_it(client):
    client.ok("ulysses", {"operation": "init", "problem": "flaky upload test"})
    done = {
        "operation": "complete",
        "terminalState": "resolved",
        "observed": {"errors": 1},
        "summary": "The upload test raced the server start; it now waits for readiness.",
    }
    assert client.refused("ulysses", done)["code"] == "FINAL_VALIDATOR_REQUIRED"
    client.ok(  # seen failing on the problem as it stands
        "ulysses", {"operation": "bind_final_validator", **cell(client), "observed": {"errors": 1}}
    )
    refused = client.refused("ulysses", done)
    assert refused["code"] == "FINAL_VALIDATOR_FAILED"
    assert refused["details"]["validation"]["pass"] is False

    resolved = client.ok("ulysses", {**done, "observed": {"errors": 0}})
    assert resolved["terminalState"] == "resolved"
    found = client.ok("knowledge", {"operation": "search", "query": "upload readiness"})
    assert [hit["id"] for hit in found["results"]] == [resolved["lesson"]["id"]]
    lesson = client.ok("knowledge", {"operation": "get", "id": resolved["lesson"]["id"]})
    assert lesson["record"]["summary"] == done["summary"]


def test_run_cell_is_a_dry_run(client, journal_length):
    validator = cell(client)
    before = journal_length()
    result = client.ok(
        "notebook", {"operation": "run_cell", **validator, "observed": {"errors": 0}}
    )
    assert (result["pass"], result["reason"]) == (True, "zero errors")
    assert journal_length() == before


def test_without_bubblewrap_run_cell_is_refused_with_its_code_until_the_user_opts_out(
    connect, project_dir, no_bubblewrap
):
    client = connect(project_dir)
    arguments = {"operation": "run_cell", **cell(client), "observed": {"errors": 0}}
    refused = client.refused("notebook", arguments)
    assert (refused["code"], refused["details"]) == (
        "VALIDATOR_ISOLATION_UNAVAILABLE",
        {"isolation": "filesystem"},
    )
    assert "Traceback" not in refused["message"]
    local = project_dir / ".ithaca" / ".runtime" / "config.toml"
    local.write_text("[validators]\nrequire_filesystem_isolation = false\n")
    result = connect(project_dir).ok("notebook", arguments)
    assert (result["pass"], result["reason"]) == (True, "zero errors")
    assert [d["code"] for d in result["diagnostics"]] == ["filesystem_not_confined"]


OPERATIONS = {
    "ulysses": ULYSSES_SCHEMA["properties"]["operation"]["enum"],
    "notebook": NOTEBOOK_SCHEMA["properties"]["operation"]["enum"],
}
FIELDS = [
    "problem",
    "constraints",
    "primary",
    "recovery",
    "primaryValidator",
    "observed",
    "hypothesis",
    "falsification",
    "terminalState",
    "summary",
    "missing",
    "notebookId",
    "cellId",
    "title",
    "source",
    "language",
    "filename",
    "mode",
    "timeout_s",
    "version",
    "thought",
    "kind",
]
junk = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**60), max_value=2**60),
        st.floats(allow_nan=False),
        st.sampled_from(["", " ", "\ud800", "x" * 9000, "nb_missing", "python", "judge"]),
    ),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(FIELDS + ["zz"]), children, max_size=3)
    ),
    max_leaves=5,
)
malformed = st.one_of(
    st.tuples(
        st.sampled_from(sorted(OPERATIONS)),
        st.dictionaries(st.sampled_from(FIELDS), junk, min_size=1, max_size=4),
        st.text(min_size=1, max_size=8).filter(lambda name: name not in FIELDS),
    )
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=malformed, data=st.data())
def test_malformed_input_is_refused_with_a_code_and_moves_nothing(
    client, journal_length, case, data
):
    tool, fields, unknown = case
    operation = data.draw(st.sampled_from(OPERATIONS[tool]))
    arguments = {"operation": operation, **fields, unknown: 1}
    before = journal_length()
    refused = client.refused(tool, arguments)
    assert refused["code"] == "INVALID_INPUT" or refused["code"].isupper()
    assert journal_length() == before


def test_a_failed_move_spelled_with_look_alikes_is_forbidden_over_mcp(client):
    client.ok("ulysses", {"operation": "init", "problem": "the importer drops rows"})
    validator = cell(client)
    moves = {"primaryValidator": validator, "recoveryValidator": validator}
    client.ok(
        "ulysses",
        {"operation": "plan", "primary": "skip the header row", "recovery": "restore", **moves},
    )
    for _ in range(2):  # the primary fails, then the recovery: REFLECT
        client.ok("ulysses", {"operation": "outcome", "observed": {"errors": 3}})
    client.ok(
        "ulysses",
        {"operation": "reflect", "hypothesis": "rows are cut", "falsification": "all rows kept"},
    )
    look_alike = "skip th\u0435 h\u0435ad\u0435r r\u03bfw"  # Cyrillic е, Greek ο
    refused = client.refused(
        "ulysses", {"operation": "plan", "primary": look_alike, "recovery": "a new idea", **moves}
    )
    assert refused["code"] == "FORBIDDEN_MOVE"
    assert refused["details"]["move"] == look_alike
    assert client.ok("ulysses", {"operation": "status"})["phase"] == "IDLE"


def test_a_final_validator_that_cannot_fail_and_a_replacement_are_refused_over_mcp(client):
    client.ok("ulysses", {"operation": "init", "problem": "flaky upload test"})
    always = cell(client, "from tb_validate import pass_\npass_('fine')\n")
    refused = client.refused(
        "ulysses", {"operation": "bind_final_validator", **always, "observed": {"errors": 1}}
    )
    assert refused["code"] == "FINAL_VALIDATOR_CANNOT_FAIL"
    judge = cell(client)
    client.ok("ulysses", {"operation": "bind_final_validator", **judge, "observed": {"errors": 1}})
    replaced = client.refused("ulysses", {"operation": "replace_final_validator", **always})
    assert replaced["code"] == "USER_ONLY"
    assert (
        client.ok("ulysses", {"operation": "status"})["finalValidator"]["cellId"]
        == (judge["cellId"])
    )
