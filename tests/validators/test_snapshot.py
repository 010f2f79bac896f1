"""Snapshots: what a validator cell freezes into, its canonical bytes and their digest."""

from __future__ import annotations

import json
from typing import Any

import pytest
import rfc8785

from ithaca.app import IthacaProject
from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt, InvalidInput, Refused
from ithaca.validators import runtimes, snapshot
from ithaca.validators.notebooks import NotebookService

GOLDEN: dict[str, Any] = {
    "schema": "ithaca.validator-snapshot/1",
    "language": "python",
    "mode": "judge",
    "entrypoint": "validate.py",
    "source": "from tb_validate import observed, pass_\npass_('ok')\n",
    "timeout_s": 30,
    "runtime": {"name": "cpython", "version": "3.12.4"},
    "manifests": [{"filename": "requirements.txt", "source": "attrs==23.2.0\n"}],
}
GOLDEN_BYTES = (
    b'{"entrypoint":"validate.py","language":"python","manifests":[{"filename":'
    b'"requirements.txt","source":"attrs==23.2.0\\n"}],"mode":"judge","runtime":'
    b'{"name":"cpython","version":"3.12.4"},"schema":"ithaca.validator-snapshot/1",'
    b'"source":"from tb_validate import observed, pass_\\npass_(\'ok\')\\n","timeout_s":30}'
)
GOLDEN_DIGEST = "c26e2f4eb5518a0a312bad6959c4dbbf14f023c7336a526bf3a0f97dd86d412a"
pytestmark = pytest.mark.usefixtures("fixed_runtime")


def build(project: IthacaProject, notebook_id: str, cell_id: str, **kwargs: Any) -> Any:
    settings = project.config["validators"]
    return snapshot.build(project.store.connection(), notebook_id, cell_id, settings, **kwargs)


# --- golden vector ----------------------------------------------------------------------


def test_golden_snapshot_has_fixed_canonical_bytes_and_digest() -> None:
    data = snapshot.encode(GOLDEN)

    assert data == GOLDEN_BYTES
    assert data == rfc8785.dumps(GOLDEN)
    assert canon.digest_bytes(data) == canon.digest(GOLDEN) == GOLDEN_DIGEST
    assert snapshot.decode(data) == GOLDEN


# --- build ------------------------------------------------------------------------------


def test_build_freezes_the_latest_version_with_the_languages_manifests_sorted(
    project: IthacaProject, notebooks: NotebookService, fixed_runtime: dict[str, str]
) -> None:
    nb = notebooks.create({"title": "Checks"})["notebookId"]
    cell = notebooks.add_cell({"notebookId": nb, "source": "print(1)\n"})["cellId"]
    notebooks.add_cell({"notebookId": nb, "source": "b==1\n", "filename": "requirements.txt"})
    notebooks.add_cell({"notebookId": nb, "source": "[project]\n", "filename": "pyproject.toml"})
    notebooks.add_cell(
        {"notebookId": nb, "source": "{}", "filename": "package.json", "language": "javascript"}
    )
    notebooks.add_cell({"notebookId": nb, "source": "# notes", "kind": "markdown"})
    notebooks.update_cell({"notebookId": nb, "cellId": cell, "source": "print(2)\n"})

    built, origin = build(project, nb, cell)

    assert built == {
        "schema": "ithaca.validator-snapshot/1",
        "language": "python",
        "mode": "judge",
        "entrypoint": "validate.py",
        "source": "print(2)\n",
        "timeout_s": 30,
        "runtime": fixed_runtime,
        "manifests": [
            {"filename": "pyproject.toml", "source": "[project]\n"},
            {"filename": "requirements.txt", "source": "b==1\n"},
        ],
    }
    assert origin == {
        "notebookId": nb,
        "cellId": cell,
        "cellVersion": 2,
        "language": "python",
        "mode": "judge",
    }


def test_build_of_an_older_version_takes_that_versions_source(
    project: IthacaProject, notebooks: NotebookService
) -> None:
    nb = notebooks.create({"title": "Checks"})["notebookId"]
    cell = notebooks.add_cell({"notebookId": nb, "source": "one\n"})["cellId"]
    notebooks.update_cell({"notebookId": nb, "cellId": cell, "source": "two\n"})

    built, origin = build(project, nb, cell, version=1)

    assert built["source"] == "one\n"
    assert origin["cellVersion"] == 1


def test_typescript_takes_package_json_and_tsconfig_json(
    project: IthacaProject, notebooks: NotebookService
) -> None:
    nb = notebooks.create({"title": "TS", "language": "typescript"})["notebookId"]
    notebooks.add_cell({"notebookId": nb, "source": "{}", "filename": "tsconfig.json"})
    notebooks.add_cell({"notebookId": nb, "source": '{"a":1}', "filename": "package.json"})
    cell = notebooks.add_cell({"notebookId": nb, "source": "pass()", "mode": "probe"})["cellId"]

    built, _ = build(project, nb, cell)

    assert built["entrypoint"] == "validate.ts"
    assert built["mode"] == "probe"
    assert [m["filename"] for m in built["manifests"]] == ["package.json", "tsconfig.json"]


def test_a_cell_timeout_stays_under_the_configured_one(
    project: IthacaProject, notebooks: NotebookService
) -> None:
    nb = notebooks.create({"title": "Checks"})["notebookId"]
    short = notebooks.add_cell({"notebookId": nb, "source": "x", "timeout_s": 2.5})["cellId"]

    assert build(project, nb, short)[0]["timeout_s"] == 2.5
    project.config["validators"]["timeout_s"] = 2
    assert build(project, nb, short)[0]["timeout_s"] == 2


@pytest.mark.parametrize(
    "fields",
    [
        {"kind": "markdown"},
        {"filename": "requirements.txt"},
    ],
)
def test_markdown_and_manifest_cells_are_not_runnable(
    project: IthacaProject, notebooks: NotebookService, fields: dict[str, Any]
) -> None:
    nb = notebooks.create({"title": "Checks"})["notebookId"]
    cell = notebooks.add_cell({"notebookId": nb, "source": "x", **fields})["cellId"]

    with pytest.raises(Refused) as raised:
        build(project, nb, cell)

    assert raised.value.code == "CELL_NOT_RUNNABLE"


def test_a_missing_runtime_refuses_the_snapshot(
    project: IthacaProject, notebooks: NotebookService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(language: str, settings: dict[str, Any]) -> dict[str, str]:
        raise Refused("VALIDATOR_RUNTIME_MISSING", "no node", {"language": language})

    monkeypatch.setattr(runtimes, "measure", missing)
    nb = notebooks.create({"title": "JS", "language": "javascript"})["notebookId"]
    cell = notebooks.add_cell({"notebookId": nb, "source": "x"})["cellId"]

    with pytest.raises(Refused) as raised:
        build(project, nb, cell)

    assert raised.value.code == "VALIDATOR_RUNTIME_MISSING"


# --- decode and encode ------------------------------------------------------------------


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOLDEN, **changes}


@pytest.mark.parametrize(
    "data",
    [
        json.dumps(GOLDEN, indent=2).encode(),  # valid JSON, not canonical
        GOLDEN_BYTES.replace(b'"timeout_s":30', b'"timeout_s":30.0'),
        GOLDEN_BYTES[:-1] + b',"timeout_s":31}',  # a duplicate key
        GOLDEN_BYTES.replace(b"30}", b"NaN}"),
        b"\xff" + GOLDEN_BYTES,
        b"[]",
        rfc8785.dumps(_with(schema="ithaca.validator-snapshot/2")),
        rfc8785.dumps(_with(extra=True)),
        rfc8785.dumps({k: v for k, v in GOLDEN.items() if k != "runtime"}),
        rfc8785.dumps(_with(language="cobol")),
        rfc8785.dumps(_with(mode="watch")),
        rfc8785.dumps(_with(entrypoint="requirements.txt")),
        rfc8785.dumps(_with(entrypoint="verdict.json")),
        rfc8785.dumps(_with(entrypoint="check.js")),
        rfc8785.dumps(_with(source=None)),
        rfc8785.dumps(_with(timeout_s=0)),
        rfc8785.dumps(_with(timeout_s=True)),
        rfc8785.dumps(_with(runtime={"name": "cpython"})),
        rfc8785.dumps(_with(manifests=[{"filename": "package.json", "source": "{}"}])),
        rfc8785.dumps(
            _with(
                manifests=[
                    {"filename": "requirements.txt", "source": ""},
                    {"filename": "pyproject.toml", "source": ""},
                ]
            )
        ),
    ],
)
def test_decode_refuses_anything_but_a_canonical_well_formed_snapshot(data: bytes) -> None:
    with pytest.raises(Corrupt) as raised:
        snapshot.decode(data)

    assert raised.value.code == "SNAPSHOT_INVALID"


def test_encode_refuses_a_malformed_snapshot() -> None:
    with pytest.raises(InvalidInput) as raised:
        snapshot.encode(_with(mode="watch"))

    assert raised.value.code == "SNAPSHOT_INVALID"
