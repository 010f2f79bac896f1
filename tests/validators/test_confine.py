"""A validator's view of the filesystem, through real bubblewrap runs: the project
read-only, Ithaca's state and the hosts' wiring out of sight, only the run folder
writable, and no way around that through ``/proc``; without bubblewrap, a refusal unless
the user opted out."""

import os
import shutil
import tempfile
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest
from tests import needs

from ithaca.kernel.errors import Refused
from ithaca.validators import runner
from ithaca.validators.runtimes import LANGUAGES

# Each attempt reports "done", the errno's name, or what it read.
ATTEMPTS = """\
import errno, os
from tb_validate import observed, pass_


def attempt(action):
    try:
        found = action()
    except OSError as exc:
        return errno.errorcode[exc.errno]
    return "done" if found is None else found


def write(path):
    def append():
        with open(path, "a") as handle:
            handle.write("x")
    return append


def read(path):
    def whole():
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    return whole
"""


@pytest.fixture(autouse=True)
def temp_root(monkeypatch):
    """Run folders in a short folder of this test's own, so leftovers can be seen."""
    root = Path(tempfile.mkdtemp(prefix="ith-", dir="/tmp"))
    monkeypatch.setattr("tempfile.tempdir", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def run(source, observed, settings, *, project_root, mode="judge"):
    cell = {
        "schema": "ithaca.validator-snapshot/1",
        "language": "python",
        "mode": mode,
        "entrypoint": LANGUAGES["python"].entrypoint,
        "source": dedent(source),
        "timeout_s": 10,
        "runtime": {"name": "any", "version": "any"},
        "manifests": [],
    }
    settings["timeout_s"] = 10
    return runner.run_snapshot(cell, observed, settings, project_root=project_root)


def tried(result):
    assert (result["pass"], result["reason"]) == (True, "tried"), result
    return result["evidence"]


PROJECT_CELL = ATTEMPTS + dedent(
    """\
    root = observed()["root"]
    at = lambda name: os.path.join(root, name)
    run_file = os.path.join(os.environ["ITHACA_RUN_DIR"], "temp", "scratch")
    pass_("tried", {
        "read a file": attempt(read(at("app.txt"))),
        "edit a file": attempt(write(at("app.txt"))),
        "make a file": attempt(write(at("new.txt"))),
        "make a folder": attempt(lambda: os.mkdir(at("made"))),
        "remove a file": attempt(lambda: os.remove(at("app.txt"))),
        "list .ithaca": os.listdir(at(".ithaca")),
        "write .ithaca": attempt(write(at(".ithaca/planted"))),
        "read the database": attempt(read(at(".ithaca/.runtime/state.db"))),
        "write the run folder": attempt(write(run_file)),
        "read it back": attempt(read(run_file)),
    })
    """
)


@needs.bubblewrap
@pytest.mark.parametrize("mode", ["probe", "judge"])
def test_a_cell_reads_the_project_and_writes_only_its_run_folder(settings, project, mode):
    root = Path(project.project.root)
    (root / "app.txt").write_text("one\n")
    before = sorted(path.relative_to(root) for path in root.rglob("*"))
    result = run(PROJECT_CELL, {"root": str(root)}, settings, project_root=str(root), mode=mode)
    assert tried(result) == {
        "read a file": "one\n",
        "edit a file": "EROFS",
        "make a file": "EROFS",
        "make a folder": "EROFS",
        "remove a file": "EROFS",
        "list .ithaca": [],
        "write .ithaca": "EROFS",
        "read the database": "ENOENT",
        "write the run folder": "done",
        "read it back": "x",
    }
    assert sorted(path.relative_to(root) for path in root.rglob("*")) == before
    assert (root / "app.txt").read_text() == "one\n"
    assert result["diagnostics"] == []


WIRING_CELL = ATTEMPTS + dedent(
    """\
    seen = {}
    for path in observed()["paths"]:
        if os.path.isdir(path):
            seen[path] = [os.listdir(path), attempt(write(os.path.join(path, "planted")))]
        else:
            seen[path] = [attempt(read(path)), attempt(write(path))]
    pass_("tried", seen)
    """
)


@needs.bubblewrap
def test_the_users_state_and_every_host_wiring_are_out_of_sight(
    settings, project, tmp_path, monkeypatch
):
    root = Path(project.project.root)
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    folders = [
        home / ".claude",
        home / ".codex",
        Path(os.environ["ITHACA_HOME"]),
        Path(os.environ["CODEX_HOME"]),
        root / ".claude",
        root / ".codex",
    ]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "settings.json").write_text('{"hooks": "ithaca-hook"}\n')
    (root / ".mcp.json").write_text('{"mcpServers": {"ithaca": {}}}\n')
    paths = [*map(str, folders), str(root / ".mcp.json")]
    result = run(WIRING_CELL, {"paths": paths}, settings, project_root=str(root))
    # A hidden folder is empty; a hidden file is a device that cannot be opened.
    assert tried(result) == {
        **{str(folder): [[], "EROFS"] for folder in folders},
        str(root / ".mcp.json"): ["EACCES", "EACCES"],
    }
    assert (root / ".mcp.json").read_text() == '{"mcpServers": {"ithaca": {}}}\n'


PROC_CELL = dedent(
    """\
    import os
    from tb_validate import observed, pass_
    root = observed()["root"]
    reached = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        for link in ("root", "cwd"):
            target = f"/proc/{pid}/{link}{root}/escaped-{pid}-{link}"
            try:
                open(target, "w").close()
            except OSError:
                continue
            reached.append(target)
    pass_("tried", reached)
    """
)


@needs.bubblewrap
def test_proc_leads_to_no_other_process_and_its_writable_filesystem(settings, project):
    """The host's /proc would hand over the root of every process of Ithaca's user."""
    root = Path(project.project.root)
    result = run(PROC_CELL, {"root": str(root)}, settings, project_root=str(root))
    assert tried(result) == []
    assert list(root.glob("escaped-*")) == []


WRITER = """\
from tb_validate import observed, pass_
open(observed()["path"], "w").close()
pass_("wrote")
"""


@pytest.mark.parametrize("no_bubblewrap", ["missing", "failing"], indirect=True)
def test_without_bubblewrap_a_run_is_refused_unless_the_user_opted_out(
    settings, project, temp_root, no_bubblewrap
):
    root = Path(project.project.root)
    written = root / "written"
    with pytest.raises(Refused) as caught:
        run(WRITER, {"path": str(written)}, settings, project_root=str(root), mode="probe")
    assert caught.value.code == "VALIDATOR_ISOLATION_UNAVAILABLE"
    assert caught.value.details == {"isolation": "filesystem"}
    assert "bubblewrap" in caught.value.message
    assert "validators.require_filesystem_isolation = false" in caught.value.message
    assert (written.exists(), os.listdir(temp_root)) == (False, [])

    settings["require_filesystem_isolation"] = False
    result = run(WRITER, {"path": str(written)}, settings, project_root=str(root), mode="probe")
    assert (result["pass"], result["reason"]) == (True, "wrote")
    assert [d["code"] for d in result["diagnostics"]] == ["filesystem_not_confined"]
    assert written.exists()  # as the diagnostic says: unconfined


def _doctor_and_status(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    import json

    from click.testing import CliRunner

    from ithaca.cli.entry import cli

    doctor = CliRunner().invoke(cli, ["--project", str(root), "doctor", "--json"])
    status = CliRunner().invoke(cli, ["--project", str(root), "status", "--json"])
    return json.loads(doctor.output), json.loads(status.output)


def test_status_and_doctor_say_when_validators_cannot_be_confined(project_dir, no_bubblewrap):
    doctor, status = _doctor_and_status(project_dir)
    assert "VALIDATOR_ISOLATION_UNAVAILABLE" in {f["code"] for f in doctor["findings"]}
    assert status["validators"].startswith("refused")
    (project_dir / ".ithaca" / "config.toml").write_text(
        "[validators]\nrequire_filesystem_isolation = false\n"
    )
    doctor, status = _doctor_and_status(project_dir)
    assert "VALIDATORS_UNCONFINED" in {f["code"] for f in doctor["findings"]}
    assert status["validators"].startswith("UNCONFINED")


@needs.bubblewrap
def test_with_bubblewrap_validators_are_confined_and_the_doctor_is_silent(project_dir):
    doctor, status = _doctor_and_status(project_dir)
    assert not {"VALIDATOR_ISOLATION_UNAVAILABLE", "VALIDATORS_UNCONFINED"} & {
        f["code"] for f in doctor["findings"]
    }
    assert status["validators"] == "confined"
