"""The notebook facility: operations, their checks, versions, events, dry runs and export."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ithaca.app import IthacaProject
from ithaca.kernel import journal
from ithaca.kernel.errors import IthacaError
from ithaca.validators import notebook_arguments
from ithaca.validators.notebooks import NotebookService

PASSING = "from tb_validate import observed, pass_, fail\n" + (
    "d = observed()\npass_('clean') if d['errors'] == 0 else fail(f\"{d['errors']} errors\")\n"
)


@pytest.fixture
def nb(notebooks: NotebookService) -> str:
    return str(notebooks.create({"title": "Checks"})["notebookId"])


def journal_length(project: IthacaProject) -> int:
    return int(project.store.connection().execute("SELECT count(*) FROM journal").fetchone()[0])


def table_sizes(project: IthacaProject) -> dict[str, int]:
    conn = project.store.connection()
    tables = ("notebooks", "notebook_cells", "notebook_cell_versions", "validator_runs")
    return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in tables}


def code_of(call: Any, *args: Any) -> str:
    with pytest.raises(IthacaError) as raised:
        call(*args)
    return raised.value.code


def events(project: IthacaProject, kind: str) -> list[dict[str, Any]]:
    return journal.query(project.store.connection(), kind=kind)


# --- create -----------------------------------------------------------------------------


def test_create_answers_the_notebook_and_journals_it(
    project: IthacaProject, notebooks: NotebookService
) -> None:
    created = notebooks.create({"title": "Checks", "session": "host-1"})

    assert set(created) == {"notebookId", "title", "language", "createdAt"}
    assert created["notebookId"].startswith("nb_")
    assert (created["title"], created["language"]) == ("Checks", "python")
    [event] = events(project, "notebook.created")
    assert event["actor"] == "agent"
    assert event["subject"] == created["notebookId"]
    assert event["payload"] == {
        "notebookId": created["notebookId"],
        "title": "Checks",
        "language": "python",
    }


@pytest.mark.parametrize(
    ("arguments", "code", "problem"),
    [
        ({}, "INVALID_INPUT", "REQUIRED"),
        ({"title": ""}, "INVALID_INPUT", "OUT_OF_RANGE"),
        ({"title": "x" * 201}, "INVALID_INPUT", "OUT_OF_RANGE"),
        ({"title": "   "}, "INVALID_INPUT", "BLANK"),
        ({"title": "two\nlines"}, "INVALID_INPUT", "CONTROL_CHARACTER"),
        ({"title": 7}, "INVALID_INPUT", "WRONG_TYPE"),
        ({"title": "T", "language": "cobol"}, "LANGUAGE_UNSUPPORTED", None),
        ({"title": "T", "owner": "me"}, "INVALID_INPUT", "UNKNOWN_FIELD"),
    ],
)
def test_create_refuses_bad_input_and_changes_nothing(
    project: IthacaProject,
    notebooks: NotebookService,
    arguments: dict[str, Any],
    code: str,
    problem: str | None,
) -> None:
    before = journal_length(project)

    with pytest.raises(IthacaError) as raised:
        notebooks.create(arguments)

    assert raised.value.code == code
    if problem is not None:
        assert raised.value.details["problem"] == problem
    assert journal_length(project) == before
    assert notebooks.list() == []


def test_a_200_character_title_is_accepted(notebooks: NotebookService) -> None:
    assert notebooks.create({"title": "é" * 200})["title"] == "é" * 200


# --- add_cell ---------------------------------------------------------------------------


def test_add_cell_answers_version_1_and_journals_the_sources_digest_not_the_source(
    project: IthacaProject, notebooks: NotebookService, nb: str
) -> None:
    added = notebooks.add_cell({"notebookId": nb, "source": "print('hi')\n"})

    assert added == {
        "cellId": added["cellId"],
        "version": 1,
        "role": "validator",
        "language": "python",
        "filename": "validate.py",
        "mode": "judge",
    }
    assert added["cellId"].startswith("cell_")
    [event] = events(project, "notebook.cell_added")
    assert event["subject"] == nb
    assert event["payload"] == {
        "notebookId": nb,
        "cellId": added["cellId"],
        "version": 1,
        "kind": "code",
        "role": "validator",
        "language": "python",
        "filename": "validate.py",
        "mode": "judge",
        "timeout_s": None,
        "sourceSha256": hashlib.sha256(b"print('hi')\n").hexdigest(),
    }


def test_validators_without_a_filename_take_distinct_default_names(
    notebooks: NotebookService, nb: str
) -> None:
    names = [notebooks.add_cell({"notebookId": nb, "source": "x"})["filename"] for _ in range(3)]
    js = notebooks.add_cell({"notebookId": nb, "source": "x", "language": "javascript"})

    assert names == ["validate.py", "validate-2.py", "validate-3.py"]
    assert js["filename"] == "validate.js"


@pytest.mark.parametrize(
    ("language", "filename", "role"),
    [
        ("python", "requirements.txt", "manifest"),
        ("python", "pyproject.toml", "manifest"),
        ("javascript", "package.json", "manifest"),
        ("typescript", "package.json", "manifest"),
        ("typescript", "tsconfig.json", "manifest"),
        ("python", "check_1.py", "validator"),
        ("javascript", "check.mjs", "validator"),
        ("javascript", "check.cjs", "validator"),
        ("typescript", "check.mts", "validator"),
        ("typescript", "check.cts", "validator"),
        ("shell", "check.sh", "validator"),
    ],
)
def test_the_filename_decides_the_role(
    notebooks: NotebookService, nb: str, language: str, filename: str, role: str
) -> None:
    added = notebooks.add_cell(
        {"notebookId": nb, "source": "x", "language": language, "filename": filename}
    )

    assert (added["role"], added["filename"], added["language"]) == (role, filename, language)
    assert added["mode"] == ("judge" if role == "validator" else None)


@pytest.mark.parametrize(
    ("language", "filename"),
    [
        ("python", ""),
        ("python", ".hidden.py"),
        ("python", "sub/dir.py"),
        ("python", "a" * 62 + ".py"),
        ("python", "check.js"),
        ("python", "check"),
        ("python", "package.json"),
        ("javascript", "tsconfig.json"),
        ("javascript", "requirements.txt"),
        ("shell", "check.bash"),
        ("python", "tb_validate.py"),
        ("javascript", "tb-validate.js"),
        ("javascript", "tb-validate.cjs"),
        ("shell", "tb-validate.sh"),
        ("python", "observed.json"),
        ("python", "verdict.json"),
        ("python", "home"),
        ("python", "temp"),
    ],
)
def test_filenames_that_do_not_fit_or_are_reserved_are_refused(
    project: IthacaProject, notebooks: NotebookService, nb: str, language: str, filename: str
) -> None:
    before = journal_length(project)

    code = code_of(
        notebooks.add_cell,
        {"notebookId": nb, "source": "x", "language": language, "filename": filename},
    )

    assert code == "INVALID_FILENAME"
    assert journal_length(project) == before


def test_a_manifest_name_is_taken_once_per_notebook(
    project: IthacaProject, notebooks: NotebookService, nb: str
) -> None:
    notebooks.add_cell({"notebookId": nb, "source": "a", "filename": "requirements.txt"})
    before = journal_length(project)

    code = code_of(
        notebooks.add_cell, {"notebookId": nb, "source": "b", "filename": "requirements.txt"}
    )

    assert code == "CELL_FILENAME_TAKEN"
    assert journal_length(project) == before
    other = notebooks.create({"title": "Other"})["notebookId"]
    assert notebooks.add_cell({"notebookId": other, "source": "b", "filename": "requirements.txt"})


def test_an_explicit_validator_filename_is_taken_once_per_notebook(
    notebooks: NotebookService, nb: str
) -> None:
    notebooks.add_cell({"notebookId": nb, "source": "a", "filename": "check.py"})

    code = code_of(notebooks.add_cell, {"notebookId": nb, "source": "b", "filename": "check.py"})

    assert code == "CELL_FILENAME_TAKEN"


def test_markdown_cells_ignore_code_fields(notebooks: NotebookService, nb: str) -> None:
    added = notebooks.add_cell(
        {
            "notebookId": nb,
            "source": "# Why",
            "kind": "markdown",
            "filename": "ignored.py",
            "mode": "probe",
            "language": "shell",
            "timeout_s": 5,
        }
    )

    assert added == {
        "cellId": added["cellId"],
        "version": 1,
        "role": "markdown",
        "language": None,
        "filename": None,
        "mode": None,
    }


@pytest.mark.parametrize(
    ("fields", "code", "problem"),
    [
        ({"source": "x" * (256 * 1024 + 1)}, "INVALID_INPUT", "TOO_LONG"),
        ({"source": "é" * (128 * 1024 + 1)}, "INVALID_INPUT", "TOO_LONG"),
        ({"source": 1}, "INVALID_INPUT", "WRONG_TYPE"),
        ({"source": "x", "kind": "raw"}, "INVALID_INPUT", "NOT_ALLOWED"),
        ({"source": "x", "mode": "watch"}, "INVALID_INPUT", "NOT_ALLOWED"),
        ({"source": "x", "timeout_s": 0}, "INVALID_INPUT", "OUT_OF_RANGE"),
        ({"source": "x", "timeout_s": 31}, "INVALID_INPUT", "OUT_OF_RANGE"),
        ({"source": "x", "timeout_s": "5"}, "INVALID_INPUT", "WRONG_TYPE"),
        ({"source": "x", "timeout_s": True}, "INVALID_INPUT", "WRONG_TYPE"),
        ({"source": "x", "language": "ruby"}, "LANGUAGE_UNSUPPORTED", None),
        ({"source": "x", "cellId": "cell_1"}, "INVALID_INPUT", "UNKNOWN_FIELD"),
        ({}, "INVALID_INPUT", "REQUIRED"),
    ],
)
def test_add_cell_refuses_bad_input(
    project: IthacaProject,
    notebooks: NotebookService,
    nb: str,
    fields: dict[str, Any],
    code: str,
    problem: str | None,
) -> None:
    before = table_sizes(project), journal_length(project)

    with pytest.raises(IthacaError) as raised:
        notebooks.add_cell({"notebookId": nb, **fields})

    assert raised.value.code == code
    if problem is not None:
        assert raised.value.details["problem"] == problem
    assert (table_sizes(project), journal_length(project)) == before


def test_a_source_of_exactly_256_kib_is_accepted(notebooks: NotebookService, nb: str) -> None:
    assert notebooks.add_cell({"notebookId": nb, "source": "x" * 256 * 1024})["version"] == 1


def test_add_cell_to_an_unknown_notebook_is_notebook_not_found(notebooks: NotebookService) -> None:
    code = code_of(notebooks.add_cell, {"notebookId": "nb_missing", "source": "x"})

    assert code == "NOTEBOOK_NOT_FOUND"


# --- update_cell ------------------------------------------------------------------------


def test_update_cell_stores_a_new_version_and_keeps_every_old_one(
    project: IthacaProject, notebooks: NotebookService, nb: str
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "one\n"})["cellId"]

    assert notebooks.update_cell({"notebookId": nb, "cellId": cell, "source": "two\n"}) == {
        "cellId": cell,
        "version": 2,
    }
    notebooks.update_cell({"notebookId": nb, "cellId": cell, "mode": "probe", "timeout_s": 3})

    got = notebooks.get({"notebookId": nb, "cellId": cell, "version": 1})
    assert got["cell"]["source"] == "one\n"
    assert [v["version"] for v in got["versions"]] == [1, 2, 3]
    latest = notebooks.get({"notebookId": nb, "cellId": cell})["cell"]
    assert (latest["version"], latest["source"], latest["mode"], latest["timeout_s"]) == (
        3,
        "two\n",
        "probe",
        3,
    )
    [first, second] = events(project, "notebook.cell_updated")
    assert (first["payload"]["version"], second["payload"]["version"]) == (2, 3)
    assert first["payload"]["sourceSha256"] == hashlib.sha256(b"two\n").hexdigest()


def test_stored_versions_cannot_be_edited_or_deleted(
    project: IthacaProject, notebooks: NotebookService, nb: str
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "one\n"})["cellId"]
    conn = project.store.connection()

    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE notebook_cell_versions SET source = 'x' WHERE cell_id = ?", (cell,))
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("DELETE FROM notebook_cell_versions WHERE cell_id = ?", (cell,))


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"source": "same\n"},
        {"source": "same\n", "filename": "validate.py", "mode": "judge", "language": "python"},
        {"timeout_s": None},
        {"session": "host-1"},
    ],
)
def test_an_update_that_changes_nothing_answers_the_current_version_and_stores_nothing(
    project: IthacaProject, notebooks: NotebookService, nb: str, changes: dict[str, Any]
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "same\n"})["cellId"]
    before = table_sizes(project), journal_length(project)

    answer = notebooks.update_cell({"notebookId": nb, "cellId": cell, **changes})

    assert answer == {"cellId": cell, "version": 1}
    assert (table_sizes(project), journal_length(project)) == before


def test_a_stored_timeout_above_a_lowered_limit_does_not_block_other_updates(
    project: IthacaProject, notebooks: NotebookService, nb: str
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "x", "timeout_s": 20})["cellId"]
    project.config["validators"]["timeout_s"] = 10

    assert notebooks.update_cell({"notebookId": nb, "cellId": cell, "source": "y"})["version"] == 2
    assert code_of(notebooks.update_cell, {"notebookId": nb, "cellId": cell, "timeout_s": 15}) == (
        "INVALID_INPUT"
    )


def test_renaming_a_validator_to_a_manifest_name_makes_it_a_manifest(
    notebooks: NotebookService, nb: str
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "x", "mode": "probe"})["cellId"]

    notebooks.update_cell({"notebookId": nb, "cellId": cell, "filename": "requirements.txt"})

    latest = notebooks.get({"notebookId": nb, "cellId": cell})["cell"]
    assert (latest["role"], latest["mode"]) == ("manifest", None)


def test_update_cell_applies_the_filename_and_language_rules(
    notebooks: NotebookService, nb: str
) -> None:
    notebooks.add_cell({"notebookId": nb, "source": "a", "filename": "check.py"})
    cell = notebooks.add_cell({"notebookId": nb, "source": "b"})["cellId"]
    update = notebooks.update_cell

    assert code_of(update, {"notebookId": nb, "cellId": cell, "filename": "check.py"}) == (
        "CELL_FILENAME_TAKEN"
    )
    assert code_of(update, {"notebookId": nb, "cellId": cell, "language": "javascript"}) == (
        "INVALID_FILENAME"
    )
    moved = update(
        {"notebookId": nb, "cellId": cell, "language": "javascript", "filename": "check.js"}
    )
    assert moved["version"] == 2


@pytest.mark.parametrize("cell_id", ["cell_missing", "other-notebook"])
def test_update_of_a_cell_not_in_the_notebook_is_cell_not_found(
    notebooks: NotebookService, nb: str, cell_id: str
) -> None:
    other = notebooks.create({"title": "Other"})["notebookId"]
    foreign = notebooks.add_cell({"notebookId": other, "source": "x"})["cellId"]
    target = foreign if cell_id == "other-notebook" else cell_id

    assert code_of(notebooks.update_cell, {"notebookId": nb, "cellId": target, "source": "y"}) == (
        "CELL_NOT_FOUND"
    )


# --- get and list -----------------------------------------------------------------------


def test_get_shows_the_notebook_with_its_latest_cells_in_order(
    notebooks: NotebookService, nb: str
) -> None:
    first = notebooks.add_cell({"notebookId": nb, "source": "# intro", "kind": "markdown"})
    second = notebooks.add_cell({"notebookId": nb, "source": "v1"})
    notebooks.update_cell({"notebookId": nb, "cellId": second["cellId"], "source": "v2"})

    got = notebooks.get({"notebookId": nb})

    assert (got["notebookId"], got["title"], got["language"]) == (nb, "Checks", "python")
    assert [(c["cellId"], c["version"], c["source"]) for c in got["cells"]] == [
        (first["cellId"], 1, "# intro"),
        (second["cellId"], 2, "v2"),
    ]
    assert got["cells"][1]["sourceSha256"] == hashlib.sha256(b"v2").hexdigest()


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"notebookId": "nb_missing"}, "NOTEBOOK_NOT_FOUND"),
        ({"cellId": "cell_missing"}, "CELL_NOT_FOUND"),
        ({"cellId": "<cell>", "version": 9}, "CELL_NOT_FOUND"),
        ({"version": 1}, "INVALID_INPUT"),
        ({"cellId": "<cell>", "version": 0}, "INVALID_INPUT"),
        ({"cellId": "<cell>", "version": 2**70}, "INVALID_INPUT"),
        ({"cellId": "<cell>", "version": "1"}, "INVALID_INPUT"),
    ],
)
def test_get_refusals(
    notebooks: NotebookService, nb: str, arguments: dict[str, Any], code: str
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "x"})["cellId"]
    arguments = {"notebookId": nb, **arguments}
    if arguments.get("cellId") == "<cell>":
        arguments["cellId"] = cell

    assert code_of(notebooks.get, arguments) == code


def test_list_counts_cells_most_recently_changed_first(notebooks: NotebookService) -> None:
    older = notebooks.create({"title": "Older", "language": "shell"})["notebookId"]
    newer = notebooks.create({"title": "Newer"})["notebookId"]
    notebooks.add_cell({"notebookId": older, "source": "x"})
    notebooks.add_cell({"notebookId": older, "source": "y"})

    listed = notebooks.list({"session": "host-1"})

    assert [(n["notebookId"], n["cellCount"], n["language"]) for n in listed] == [
        (older, 2, "shell"),
        (newer, 0, "python"),
    ]
    assert set(listed[0]) == {"notebookId", "title", "language", "cellCount", "updatedAt"}


# --- run_cell ---------------------------------------------------------------------------


def test_run_cell_runs_the_cell_and_stores_nothing(
    project: IthacaProject, notebooks: NotebookService, nb: str
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": PASSING})["cellId"]
    before = table_sizes(project), journal_length(project)

    passed = notebooks.run_cell({"notebookId": nb, "cellId": cell, "observed": {"errors": 0}})
    failed = notebooks.run_cell({"notebookId": nb, "cellId": cell, "observed": {"errors": 2}})

    assert (passed["pass"], passed["reason"]) == (True, "clean")
    assert (failed["pass"], failed["reason"]) == (False, "2 errors")
    assert passed["hashMatched"] is True
    assert (table_sizes(project), journal_length(project)) == before


def test_run_cell_runs_the_version_asked_for(notebooks: NotebookService, nb: str) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": PASSING})["cellId"]
    notebooks.update_cell(
        {"notebookId": nb, "cellId": cell, "source": "from tb_validate import fail\nfail('no')\n"}
    )
    observed = {"errors": 0}

    assert notebooks.run_cell({"notebookId": nb, "cellId": cell, "observed": observed})["pass"] is (
        False
    )
    old = notebooks.run_cell({"notebookId": nb, "cellId": cell, "observed": observed, "version": 1})
    assert old["pass"] is True


@pytest.mark.parametrize("fields", [{"kind": "markdown"}, {"filename": "requirements.txt"}])
def test_run_cell_refuses_cells_that_are_not_validators(
    notebooks: NotebookService, nb: str, fields: dict[str, Any]
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": "x", **fields})["cellId"]

    code = code_of(notebooks.run_cell, {"notebookId": nb, "cellId": cell, "observed": None})

    assert code == "CELL_NOT_RUNNABLE"


@pytest.mark.parametrize(
    ("observed", "code", "problem"),
    [
        ("x" * (1024 * 1024), "OBSERVED_TOO_LARGE", None),
        (float("nan"), "INVALID_INPUT", "NUMBER_OUT_OF_RANGE"),
        ({"deep": [2**60]}, "INVALID_INPUT", "NUMBER_OUT_OF_RANGE"),
    ],
)
def test_run_cell_refuses_observed_data_it_cannot_carry(
    notebooks: NotebookService, nb: str, observed: Any, code: str, problem: str | None
) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": PASSING})["cellId"]

    with pytest.raises(IthacaError) as raised:
        notebooks.run_cell({"notebookId": nb, "cellId": cell, "observed": observed})

    assert raised.value.code == code
    if problem is not None:
        assert raised.value.details["problem"] == problem


def test_run_cell_needs_observed(notebooks: NotebookService, nb: str) -> None:
    cell = notebooks.add_cell({"notebookId": nb, "source": PASSING})["cellId"]

    with pytest.raises(IthacaError) as raised:
        notebooks.run_cell({"notebookId": nb, "cellId": cell})

    assert raised.value.details == {"pointer": "/observed", "problem": "REQUIRED"}


# --- export -----------------------------------------------------------------------------


def test_export_writes_the_documented_markdown(notebooks: NotebookService, nb: str) -> None:
    note = notebooks.add_cell(
        {"notebookId": nb, "source": "Checks the <build> -->\n", "kind": "markdown"}
    )
    code = notebooks.add_cell({"notebookId": nb, "source": "print('x')"})
    reqs = notebooks.add_cell(
        {"notebookId": nb, "source": "attrs\n", "filename": "requirements.txt"}
    )

    markdown = notebooks.export({"notebookId": nb})["markdown"]

    assert markdown == (
        f'<!-- ithaca:notebook {{"id":"{nb}","title":"Checks","language":"python"}} -->\n\n'
        "# Checks\n\n"
        f'<!-- ithaca:cell {{"cellId":"{note["cellId"]}","version":1,"kind":"markdown",'
        '"language":null,"filename":null,"mode":null} -->\n\n'
        "Checks the <build> -->\n\n"
        f'<!-- ithaca:cell {{"cellId":"{code["cellId"]}","version":1,"kind":"code",'
        '"language":"python","filename":"validate.py","mode":"judge"} -->\n\n'
        "```python\nprint('x')\n```\n\n"
        f'<!-- ithaca:cell {{"cellId":"{reqs["cellId"]}","version":1,"kind":"code",'
        '"language":"python","filename":"requirements.txt","mode":null} -->\n\n'
        "```text\nattrs\n```\n"
    )


def test_export_comments_cannot_be_closed_by_a_title(notebooks: NotebookService) -> None:
    nb = notebooks.create({"title": "a --> <!-- b"})["notebookId"]

    header = notebooks.export({"notebookId": nb})["markdown"].splitlines()[0]

    assert header.count("-->") == 1 and header.endswith("-->")
    assert "\\u003e" in header


def _fenced_sources(markdown: str) -> list[str]:
    """The contents of each top-level code fence, read the way CommonMark reads them."""
    found, lines, index = [], markdown.split("\n"), 0
    while index < len(lines):
        opening = re.match(r"(`{3,})[^`]*$", lines[index])
        if opening is None:
            index += 1
            continue
        fence, body = opening.group(1), []
        index += 1
        while not re.fullmatch(f"{fence}`*\\s*", lines[index]):
            body.append(lines[index])
            index += 1
        found.append("\n".join(body) + "\n")
        index += 1
    return found


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.text(alphabet=st.sampled_from("`a \n~"), max_size=40).map(lambda s: s + "\n"),
        min_size=1,
        max_size=3,
    )
)
def test_export_fences_survive_backtick_runs(
    notebooks: NotebookService, sources: list[str]
) -> None:
    nb = notebooks.create({"title": "Fences"})["notebookId"]
    for index, source in enumerate(sources):
        notebooks.add_cell({"notebookId": nb, "source": source, "filename": f"c{index}.py"})

    markdown = notebooks.export({"notebookId": nb})["markdown"]

    assert _fenced_sources(markdown) == sources


# --- dispatch and strict input ----------------------------------------------------------


def test_dispatch_routes_each_operation(notebooks: NotebookService) -> None:
    created = notebooks.dispatch({"operation": "create", "title": "T", "session": "s"})
    nb = created["notebookId"]
    cell = notebooks.dispatch({"operation": "add_cell", "notebookId": nb, "source": "x"})

    assert notebooks.dispatch({"operation": "list"}) == {"notebooks": notebooks.list()}
    assert (
        notebooks.dispatch({"operation": "get", "notebookId": nb})["cells"][0]["cellId"]
        == (cell["cellId"])
    )
    assert "markdown" in notebooks.dispatch({"operation": "export", "notebookId": nb})


@pytest.mark.parametrize(
    ("arguments", "pointer", "problem"),
    [
        ({}, "/operation", "REQUIRED"),
        ({"operation": "delete"}, "/operation", "NOT_ALLOWED"),
        ({"operation": 3}, "/operation", "WRONG_TYPE"),
        ({"operation": "list", "title": "x"}, "/title", "UNKNOWN_FIELD"),
        ({"operation": "list", "session": 1}, "/session", "WRONG_TYPE"),
    ],
)
def test_dispatch_refuses_malformed_calls(
    notebooks: NotebookService, arguments: dict[str, Any], pointer: str, problem: str
) -> None:
    with pytest.raises(IthacaError) as raised:
        notebooks.dispatch(arguments)

    assert raised.value.code == "INVALID_INPUT"
    assert raised.value.details == {"pointer": pointer, "problem": problem}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=5,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operation=st.sampled_from(notebook_arguments.OPERATIONS),
    base=st.fixed_dictionaries(
        {},
        optional={
            "title": JSON_VALUES,
            "language": JSON_VALUES,
            "source": JSON_VALUES,
            "kind": JSON_VALUES,
            "filename": JSON_VALUES,
            "mode": JSON_VALUES,
            "timeout_s": JSON_VALUES,
            "version": JSON_VALUES,
            "cellId": JSON_VALUES,
            "session": JSON_VALUES,
        },
    ),
    extra=st.dictionaries(st.text(min_size=1, max_size=12), JSON_VALUES, max_size=2),
)
def test_malformed_operations_raise_coded_errors_and_leave_the_journal_alone(
    project: IthacaProject,
    notebooks: NotebookService,
    nb: str,
    operation: str,
    base: dict[str, Any],
    extra: dict[str, Any],
) -> None:
    arguments = {"operation": operation, "notebookId": nb, **base, **extra}
    if operation == "run_cell":
        arguments.pop("observed", None)  # no run: the refusal must come first
    before = journal_length(project)
    fields = notebook_arguments.FIELDS[operation]
    well_formed = all(
        name in fields or name == "session" for name in arguments if name != "operation"
    )

    try:
        notebooks.dispatch(arguments)
    except IthacaError as exc:
        assert re.fullmatch(r"[A-Z][A-Z_]+", exc.code)
        assert journal_length(project) - before == 0
    else:
        assert well_formed
