import json
import os
import shutil
import socket
import tempfile
import time
from pathlib import Path
from textwrap import dedent

import pytest
from tests import needs

from ithaca.kernel import canon
from ithaca.kernel.config import defaults
from ithaca.kernel.errors import InvalidInput, Refused
from ithaca.validators import runner, sandbox
from ithaca.validators.runtimes import LANGUAGES
from ithaca.validators.sandbox import Isolation

NODE = shutil.which("node")
NOT_ISOLATED = Isolation((), network=False, pid_namespace=False)

PY_PASS = "from tb_validate import observed, pass_, fail\n"
SEED_TYPESCRIPT = """\
import { observed, pass, fail } from "./tb-validate.js";

interface Observed {
  errorCount: number;
  status: "ok" | "degraded" | "down";
}

const d = observed<Observed>();
if (d.status === "ok" && d.errorCount === 0) {
  pass("system healthy");
} else {
  fail(`status=${d.status}, errors=${d.errorCount}`, d);
}
"""


@pytest.fixture(autouse=True)
def temp_root(monkeypatch):
    """Run folders go under this test's own temp folder, so leftovers can be seen (a short
    one: a runtime's sockets inside a run folder must fit in 104 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="ith-", dir="/tmp"))
    monkeypatch.setattr("tempfile.tempdir", str(root))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_temp_folder_too_deep_for_sockets_gives_way_to_tmp(monkeypatch, tmp_path):
    deep = tmp_path / ("d" * 70)
    deep.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(deep))
    assert sandbox.run_root() == "/tmp"
    monkeypatch.setattr("tempfile.tempdir", "/tmp/short")
    assert sandbox.run_root() == "/tmp/short"


def snapshot(language, source, *, mode="judge", timeout_s=2, manifests=(), entrypoint=None):
    return {
        "schema": "ithaca.validator-snapshot/1",
        "language": language,
        "mode": mode,
        "entrypoint": entrypoint or LANGUAGES[language].entrypoint,
        "source": dedent(source),
        "timeout_s": timeout_s,
        "runtime": {"name": "any", "version": "any"},
        "manifests": list(manifests),
    }


def run(language, source, observed=None, settings=None, *, project_root=None, **shape):
    return runner.run_snapshot(
        snapshot(language, source, **shape),
        observed,
        settings or defaults()["validators"],
        project_root=project_root,
    )


def summary(result):
    return result["pass"], result["reason"], result["cause"]


# --- pass and fail in each language ------------------------------------------------------


def test_python_pass_and_fail(settings):
    source = (
        PY_PASS + "d = observed()\npass_('clean', d) if d['errors'] == 0 else fail('dirty', d)\n"
    )
    passed = run("python", source, {"errors": 0}, settings)
    failed = run("python", source, {"errors": 2}, settings)
    assert summary(passed) == (True, "clean", None)
    assert passed["evidence"] == {"errors": 0}
    assert (passed["exitCode"], passed["signal"], passed["hashMatched"]) == (0, None, True)
    assert summary(failed) == (False, "dirty", None)
    assert failed["evidence"] == {"errors": 2}


@needs.node
def test_javascript_pass_and_fail_with_the_seed_helper(settings):
    source = """\
        import { observed, pass, fail } from "./tb-validate.js";
        const d = observed();
        d.errors === 0 ? pass("clean run") : fail(`${d.errors} errors`, d);
    """
    assert summary(run("javascript", source, {"errors": 0}, settings)) == (True, "clean run", None)
    failed = run("javascript", source, {"errors": 3}, settings)
    assert summary(failed) == (False, "3 errors", None)
    assert failed["evidence"] == {"errors": 3}


@needs.node
def test_a_commonjs_package_requires_the_cjs_helper(settings):
    source = """\
        const { observed, pass } = require("./tb-validate.cjs");
        pass(`type ${require("./package.json").type}`, observed());
    """
    manifest = {"filename": "package.json", "source": '{"type": "commonjs"}'}
    result = run("javascript", source, [1], settings, manifests=[manifest])
    assert summary(result) == (True, "type commonjs", None)
    assert result["evidence"] == [1]


@needs.node
def test_the_package_manifest_becomes_an_es_module_package(settings):
    source = """\
        import { readFileSync } from "node:fs";
        import { pass } from "./tb-validate.js";
        pass("package", JSON.parse(readFileSync("package.json", "utf8")));
    """
    manifest = {"filename": "package.json", "source": '{"name": "checks", "private": true}'}
    result = run("javascript", source, None, settings, manifests=[manifest])
    assert result["evidence"] == {"name": "checks", "private": True, "type": "module"}
    assert run("javascript", source, None, settings)["evidence"] == {"type": "module"}


def test_shell_pass_and_fail(settings):
    source = """\
        . "$ITHACA_RUN_DIR/tb-validate.sh"
        if grep -q '"errors":0' "$TB_OBSERVED_PATH"; then
          tb_pass "clean" "$(cat "$TB_OBSERVED_PATH")"
        else
          tb_fail "dirty \\"quoted\\""
        fi
    """
    passed = run("shell", source, {"errors": 0}, settings)
    assert summary(passed) == (True, "clean", None)
    assert passed["evidence"] == {"errors": 0}
    assert summary(run("shell", source, {"errors": 1}, settings)) == (False, 'dirty "quoted"', None)


@needs.node
def test_typescript_without_a_runner_is_refused(settings, tmp_path):
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "node").symlink_to(NODE)
    settings["path"] = str(folder)
    with pytest.raises(Refused) as caught:
        run("typescript", SEED_TYPESCRIPT, {"errorCount": 0, "status": "ok"}, settings)
    assert caught.value.code == "VALIDATOR_RUNTIME_MISSING"


@needs.tsx
def test_typescript_runs_the_seed_example_verbatim(settings):
    settings["timeout_s"] = 20
    healthy = run(
        "typescript", SEED_TYPESCRIPT, {"errorCount": 0, "status": "ok"}, settings, timeout_s=20
    )
    assert summary(healthy) == (True, "system healthy", None), healthy
    down = {"errorCount": 4, "status": "down"}
    failed = run("typescript", SEED_TYPESCRIPT, down, settings, timeout_s=20)
    assert summary(failed) == (False, "status=down, errors=4", None)
    assert failed["evidence"] == down


# --- the classification table ------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "cause"),
    [
        (PY_PASS + "pass_('looked fine')\nraise SystemExit(1)\n", "crash"),
        ("print('no verdict')\n", "no_verdict"),
        (
            "import os\nopen(os.environ['TB_VERDICT_PATH'], 'w')"
            '.write(\'{"verdict": "pass", "reason": NaN}\')\n',
            "bad_json",
        ),
        (
            "import os\nopen(os.environ['TB_VERDICT_PATH'], 'w')"
            '.write(\'{"verdict": "pass", "reason": ["not", "a string"]}\')\n',
            "bad_json",
        ),
        (PY_PASS + "pass_('huge', 'x' * 70000)\n", "too_large"),
        ("import ctypes\nctypes.string_at(0)\n", "signal"),
        ("hoard = bytearray(64 * 1024 ** 3)\n", "oom"),
    ],
    ids=["pass-then-exit-1", "no-verdict", "nan", "wrong-type", "oversize", "signal", "oom"],
)
def test_each_failure_is_malformed_with_its_cause(settings, source, cause):
    result = run("python", source, None, settings)
    assert summary(result) == (False, "malformed_verdict", cause)
    assert result["evidence"] is None


def test_a_signalled_run_reports_the_signal_not_an_exit_code(settings):
    result = run("python", "import ctypes\nctypes.string_at(0)\n", None, settings)
    assert (result["exitCode"], result["signal"]) == (None, "SIGSEGV")


def test_a_fail_reason_is_passed_through_whatever_the_exit(settings):
    result = run(
        "python",
        PY_PASS + "fail('the cache is cold', {'hits': 0})\nraise SystemExit(7)\n",
        None,
        settings,
    )
    assert summary(result) == (False, "the cache is cold", None)
    assert (result["evidence"], result["exitCode"]) == ({"hits": 0}, 7)


# --- the wall clock and the limits -------------------------------------------------------


TRAPPING_CELL = """\
import os, signal, subprocess, sys, time
from tb_validate import observed
run_folder = os.environ["ITHACA_RUN_DIR"]
grandchild = '''
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
if sys.argv[2] == "setsid":
    os.setsid()
print("holding stdout", flush=True)
time.sleep(60)
'''
signal.signal(signal.SIGTERM, signal.SIG_IGN)
print(run_folder, flush=True)
subprocess.Popen([sys.executable, "-S", "-c", grandchild, run_folder, observed()["mode"]])
time.sleep(60)
"""


@pytest.mark.parametrize(
    "mode",
    ["same-group", "setsid"],
)
def test_a_timeout_ends_the_validator_and_every_descendant(settings, left_running, mode):
    """Both processes trap SIGTERM and name the run folder on their command lines; the
    grandchild says it started by holding stdout."""
    if mode == "setsid":
        needs.require("pid_namespace")
    settings["timeout_s"] = 1
    result = run("python", TRAPPING_CELL, {"mode": mode}, settings)
    assert summary(result) == (False, "malformed_verdict", "timeout")
    assert result["exitCode"] is None
    run_folder, *said = result["stdout"].splitlines()
    assert said == ["holding stdout"]
    assert left_running(run_folder) == [], "processes of the run outlived it"


def test_a_spinning_cell_times_out_at_the_configured_limit_not_its_own(settings):
    settings["timeout_s"] = 0.5
    result = run("python", "while True: pass\n", None, settings, timeout_s=30)
    assert summary(result) == (False, "malformed_verdict", "timeout")


@pytest.mark.parametrize(
    ("limit", "source", "expected"),
    [
        ("address_space_mb", "hoard = bytearray(300 * 1024 * 1024)\n", "oom"),
        (
            "file_size_mb",
            "with open('big', 'wb') as handle:\n    handle.write(b'x' * (2 * 1024 * 1024))\n",
            "crash",
        ),
    ],
)
def test_memory_and_file_size_limits_end_the_run(settings, limit, source, expected):
    settings["limits"][limit] = 1 if limit == "file_size_mb" else 200
    result = run("python", source, None, settings)
    assert summary(result) == (False, "malformed_verdict", expected)
    if limit == "file_size_mb":
        assert "File too large" in result["stderr"]


def test_descriptor_exhaustion_stops_at_the_limit(settings):
    settings["limits"]["open_files"] = 32
    source = PY_PASS + dedent(
        """\
        held = []
        try:
            while True:
                held.append(open('/dev/null'))
        except OSError as exc:
            count = len(held)
            for handle in held:
                handle.close()
            fail(f'{count} files', {'errno': exc.errno})
        """
    )
    result = run("python", source, None, settings)
    assert result["pass"] is False and result["cause"] is None
    assert int(result["reason"].split()[0]) < 32
    assert result["evidence"] == {"errno": 24}


@pytest.mark.slow
def test_a_fork_loop_is_stopped(settings, left_running):
    """The process limit refuses forks (root is exempt from it, so there the clock ends it),
    and no child outlives the run: every child holds the run folder on its command line."""
    settings["timeout_s"] = 1
    settings["limits"]["processes"] = 40
    source = PY_PASS + dedent(
        """\
        import os, time
        os.write(1, (os.environ['ITHACA_RUN_DIR'] + '\\n').encode())
        for count in range(200):
            try:
                pid = os.fork()
            except OSError:
                fail(f'fork refused after {count}')
                break
            if pid == 0:
                if count < 3:
                    os.write(1, b'child\\n')
                time.sleep(60)
                os._exit(0)
        else:
            time.sleep(60)
        """
    )
    result = run("python", source, None, settings)
    if os.geteuid() == 0:
        assert summary(result) == (False, "malformed_verdict", "timeout")
    else:
        assert result["reason"].startswith("fork refused")
    run_folder, *children = result["stdout"].splitlines()
    assert children == ["child"] * 3
    assert left_running(run_folder) == [], "children outlived the run"


# --- environment, isolation and forged verdicts --------------------------------------------


ENVIRONMENT_CELL = (
    PY_PASS + "import os\npass_('env', {'env': dict(os.environ), 'cwd': os.getcwd()})\n"
)


def test_the_parent_environment_stays_outside(settings, monkeypatch):
    monkeypatch.setenv("ITHACA_TEST_SECRET", "hunter2")
    result = run("python", ENVIRONMENT_CELL, None, settings)
    env = result["evidence"]["env"]
    assert "ITHACA_TEST_SECRET" not in env
    assert "hunter2" not in json.dumps(result)
    allowed = {
        "PATH", "LANG", "TZ", "HOME", "TMPDIR", "TB_OBSERVED_PATH", "ITHACA_OBSERVED_PATH",
        "TB_VERDICT_PATH", "ITHACA_VERDICT_PATH", "TB_VALIDATE", "ITHACA_RUN_DIR",
    }  # fmt: skip
    # Without LANG the interpreter coerces the C locale by setting LC_CTYPE itself (PEP 538).
    assert set(env) - {"LC_CTYPE"} <= allowed
    assert env.get("LC_CTYPE", "C.UTF-8").lower().replace("-", "") in ("c.utf8", "utf8")


def test_home_and_temp_are_inside_the_run_folder(settings, temp_root):
    result = run("python", ENVIRONMENT_CELL, None, settings)
    env, cwd = result["evidence"]["env"], result["evidence"]["cwd"]
    run_folder = env["ITHACA_RUN_DIR"]
    assert os.path.dirname(run_folder) == str(temp_root)
    assert (env["HOME"], env["TMPDIR"]) == (f"{run_folder}/home", f"{run_folder}/temp")
    assert env["TB_OBSERVED_PATH"] == env["ITHACA_OBSERVED_PATH"] == f"{run_folder}/observed.json"
    assert env["TB_VALIDATE"] == "1"
    assert cwd == run_folder
    assert not os.path.exists(run_folder)


def test_observed_data_is_canonical_and_read_only(settings):
    source = PY_PASS + dedent(
        """\
        import os, stat
        path = os.environ['TB_OBSERVED_PATH']
        mode = oct(stat.S_IMODE(os.stat(path).st_mode))
        pass_(open(path).read(), {'mode': mode, 'value': observed()})
        """
    )
    observed = {"b": [1.5, "é"], "a": None}
    result = run("python", source, observed, settings)
    assert result["reason"] == '{"a":null,"b":[1.5,"é"]}'
    assert result["evidence"] == {"mode": "0o400", "value": observed}
    assert result["observedDigest"] == canon.digest(observed)


CONNECT_CELL = PY_PASS + dedent(
    """\
    import socket
    try:
        socket.create_connection(('127.0.0.1', observed()['port']), timeout=2).close()
    except OSError as exc:
        pass_('no network', {'error': str(exc)})
    else:
        fail('connected to the host')
    """
)


@pytest.fixture
def listener():
    with socket.create_server(("127.0.0.1", 0)) as server:
        yield server.getsockname()[1]


@needs.network_namespace
def test_with_isolation_the_host_loopback_is_out_of_reach(settings, listener):
    result = run("python", CONNECT_CELL, {"port": listener}, settings)
    assert summary(result) == (True, "no network", None)
    assert result["network_isolated"] is True
    assert result["diagnostics"] == []


def test_without_unshare_the_run_says_so_or_is_refused(settings, listener, monkeypatch):
    monkeypatch.setattr(sandbox, "isolation", lambda: NOT_ISOLATED)
    result = run("python", CONNECT_CELL, {"port": listener}, settings)
    assert summary(result) == (False, "connected to the host", None)
    assert result["network_isolated"] is False
    assert [d["code"] for d in result["diagnostics"]] == ["network_not_isolated"]
    settings["require_network_isolation"] = True
    with pytest.raises(Refused) as caught:
        run("python", CONNECT_CELL, {"port": listener}, settings)
    assert caught.value.code == "VALIDATOR_ISOLATION_UNAVAILABLE"


def test_verdicts_planted_outside_the_run_folder_are_ignored(settings, tmp_path):
    forged = {"verdict": "pass", "reason": "forged"}
    project = tmp_path / "project"
    project.mkdir()
    (project / "verdict.json").write_text(json.dumps(forged))
    silent = "import os\nprint(os.environ['ITHACA_RUN_DIR'])\n"
    first = run("python", silent, forged, settings, mode="probe", project_root=str(project))
    assert summary(first) == (False, "malformed_verdict", "no_verdict")
    previous = first["stdout"].strip()
    os.makedirs(previous)
    with open(os.path.join(previous, "verdict.json"), "w") as handle:
        json.dump(forged, handle)
    again = run("python", silent, forged, settings)
    assert summary(again) == (False, "malformed_verdict", "no_verdict")
    assert again["stdout"].strip() != previous


def test_ten_megabytes_of_output_neither_block_nor_overflow(settings, temp_root):
    source = PY_PASS + "import sys\nsys.stdout.write('y' * 10_000_000)\npass_('loud')\n"
    result = run("python", source, None, settings)
    assert summary(result) == (True, "loud", None)
    cap = settings["max_output_bytes"]
    assert result["stdout"] == "y" * cap + f"\n[ithaca: truncated {10_000_000 - cap} bytes]"
    assert os.listdir(temp_root) == []


def test_a_probe_runs_in_the_project_root_still_without_network(settings, tmp_path, listener):
    project = tmp_path / "project"
    project.mkdir()
    (project / "build.log").write_text("0 errors\n")
    source = PY_PASS + dedent(
        """\
        import os, socket
        try:
            socket.create_connection(('127.0.0.1', observed()['port']), timeout=2).close()
            online = True
        except OSError:
            online = False
        pass_(open('build.log').read().strip(), {
            'cwd': os.getcwd(), 'root': os.environ['ITHACA_PROJECT_ROOT'], 'online': online})
        """
    )
    result = run(
        "python", source, {"port": listener}, settings, mode="probe", project_root=str(project)
    )
    assert summary(result) == (True, "0 errors", None)
    assert result["evidence"]["cwd"] == result["evidence"]["root"] == str(project)
    assert result["evidence"]["online"] is not result["network_isolated"]


def test_a_probe_needs_a_project_root(settings):
    with pytest.raises(InvalidInput) as caught:
        run("python", "pass\n", None, settings, mode="probe")
    assert caught.value.details["pointer"] == "/project_root"


def test_a_probe_in_a_missing_folder_could_not_be_spawned(settings, tmp_path):
    with pytest.raises(Refused) as caught:
        run("python", "pass\n", None, settings, mode="probe", project_root=str(tmp_path / "gone"))
    assert caught.value.code == "VALIDATOR_SPAWN_FAILED"


def test_observed_data_without_a_canonical_form_is_refused(settings):
    with pytest.raises(InvalidInput) as caught:
        run("python", "pass\n", {"n": [float("nan")]}, settings)
    assert caught.value.details["pointer"] == "/observed/n/0"


# --- digests and the result's shape ------------------------------------------------------


def test_a_dry_run_names_the_snapshot_by_its_own_digest(settings):
    """The golden vector for the bytes and digest is in test_snapshot.py."""
    dry = snapshot("python", PY_PASS + "pass_('dry ✓')\n")
    result = runner.run_snapshot(dry, None, settings, project_root=None)
    assert summary(result) == (True, "dry ✓", None)
    assert result["snapshotHash"] == canon.digest(dry)


def test_the_result_has_exactly_the_reference_keys_and_a_checkable_evidence_digest(settings):
    result = runner.run_snapshot(
        snapshot("python", PY_PASS + "pass_('fine', [1, 2])\n"),
        {"x": 1},
        settings,
        project_root=None,
        snapshot_hash="f" * 64,
        diagnostics=[{"code": "runtime_drift", "message": "bound to a, running on b"}],
    )
    assert set(result) == {
        "pass", "reason", "cause", "evidence", "snapshotHash", "hashMatched", "exitCode",
        "signal", "durationMs", "stdout", "stderr", "network_isolated", "diagnostics",
        "observedDigest", "evidenceDigest",
    }  # fmt: skip
    assert result["snapshotHash"] == "f" * 64
    assert result["diagnostics"][0]["code"] == "runtime_drift"
    assert result["evidenceDigest"] == canon.digest(
        {
            "snapshotHash": "f" * 64,
            "observedDigest": canon.digest({"x": 1}),
            "pass": True,
            "reason": "fine",
            "cause": None,
            "evidence": [1, 2],
            "exitCode": 0,
        }
    )
    assert isinstance(result["durationMs"], int)


def test_a_mismatch_result_says_nothing_ran():
    result = runner.mismatch_result("a" * 64, "blob_missing")
    assert summary(result) == (False, "snapshot_hash_mismatch", "blob_missing")
    assert (result["hashMatched"], result["exitCode"], result["signal"]) == (False, None, None)
    assert (result["stdout"], result["stderr"], result["diagnostics"]) == ("", "", [])
    assert result["evidenceDigest"] == canon.digest(
        {
            "snapshotHash": "a" * 64,
            "observedDigest": None,
            "pass": False,
            "reason": "snapshot_hash_mismatch",
            "cause": "blob_missing",
            "evidence": None,
            "exitCode": None,
        }
    )


def test_stale_run_folders_are_removed(temp_root):
    old, fresh = temp_root / "ithaca-run-old", temp_root / "ithaca-run-fresh"
    other = temp_root / "somebody-else-old"
    for folder in (old, fresh, other):
        folder.mkdir()
        (folder / "observed.json").write_text("{}")
    two_hours_ago = time.time() - 7200
    for folder in (old, other):
        os.utime(folder, (two_hours_ago, two_hours_ago))
    link = temp_root / "ithaca-run-link"
    link.symlink_to(other)
    os.utime(link, (two_hours_ago, two_hours_ago), follow_symlinks=False)
    assert runner.remove_stale_run_folders() == 1
    assert sorted(os.listdir(temp_root)) == [
        "ithaca-run-fresh",
        "ithaca-run-link",
        "somebody-else-old",
    ]
    assert os.listdir(other) == ["observed.json"]
