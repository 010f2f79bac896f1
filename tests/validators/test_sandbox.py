import os
import resource
import signal
import stat
import sys

import pytest
from tests import needs

from ithaca.kernel.config import defaults
from ithaca.kernel.errors import Refused
from ithaca.validators import confine, sandbox
from ithaca.validators.sandbox import Confinement, Isolation

NOT_ISOLATED = Isolation((), network=False, pid_namespace=False)


def run(
    code,
    settings,
    tmp_path,
    *,
    timeout_s=2,
    language="python",
    require=False,
    confinement=None,
    **limits,
):
    chosen = sandbox.resource_limits(language, timeout_s, settings)
    chosen = [
        sandbox.Limit(lim.name, lim.resource, *limits[lim.name]) if lim.name in limits else lim
        for lim in chosen
    ]
    return sandbox.execute(
        [sys.executable, "-S", "-c", code],
        env={"PATH": os.environ["PATH"]},
        cwd=str(tmp_path),
        limits=chosen,
        timeout_s=timeout_s,
        grace_s=settings["grace_s"],
        max_output_bytes=settings["max_output_bytes"],
        require_network_isolation=require,
        confinement=confinement,
    )


def leave_a_straggler(record):
    """Code that starts a grandchild which leaves the process group (``setsid``) and
    records its pid as seen from outside any PID namespace, then returns."""
    straggler = (
        "import os, time\n"
        "os.setsid()\n"
        f"with open({str(record)!r} + '.tmp', 'w') as handle:\n"
        "    handle.write(os.readlink('/proc/self'))\n"
        f"os.rename({str(record)!r} + '.tmp', {str(record)!r})\n"
        "time.sleep(30)\n"
    )
    return (
        "import os, subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-S', '-c', {straggler!r}])\n"
        f"while not os.path.exists({str(record)!r}): pass\n"
    )


def test_the_environment_is_the_allow_list_and_nothing_else(monkeypatch):
    monkeypatch.setenv("ITHACA_TEST_SECRET", "s3cret")
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.delenv("TZ", raising=False)
    settings = defaults()["validators"]
    env = sandbox.environment("/r", language="python", settings=settings, project_root=None)
    assert env == {
        "PATH": os.environ["PATH"],
        "LANG": "C.UTF-8",
        "HOME": "/r/home",
        "TMPDIR": "/r/temp",
        "TB_OBSERVED_PATH": "/r/observed.json",
        "ITHACA_OBSERVED_PATH": "/r/observed.json",
        "TB_VERDICT_PATH": "/r/verdict.json",
        "ITHACA_VERDICT_PATH": "/r/verdict.json",
        "TB_VALIDATE": "1",
        "ITHACA_RUN_DIR": "/r",
    }
    settings["path"] = "/opt/bin"
    settings["limits"]["js_heap_mb"] = 300
    env = sandbox.environment("/r", language="typescript", settings=settings, project_root="/p")
    assert env["PATH"] == "/opt/bin"
    assert env["NODE_OPTIONS"] == "--max-old-space-size=300"
    assert env["ITHACA_PROJECT_ROOT"] == "/p"


def test_limits_follow_the_settings_and_the_language(settings):
    settings["limits"].update(address_space_mb=100, file_size_mb=2, open_files=64, processes=32)
    python = {
        lim.name: (lim.soft, lim.hard) for lim in sandbox.resource_limits("python", 2.5, settings)
    }
    assert python == {
        "cpu": (4, 5),
        "as": (100 * 2**20, 100 * 2**20),
        "fsize": (2 * 2**20, 2 * 2**20),
        "nofile": (64, 64),
        "core": (0, 0),
        "nproc": (32, 32),
    }
    assert "as" in {lim.name for lim in sandbox.resource_limits("shell", 2, settings)}
    for language in ("javascript", "typescript"):
        assert "as" not in {lim.name for lim in sandbox.resource_limits(language, 2, settings)}


def test_a_run_folder_is_private_and_removable_even_when_locked(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    folder = sandbox.make_run_folder()
    assert os.path.basename(folder).startswith("ithaca-run-")
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    locked = os.path.join(folder, "locked")
    os.makedirs(os.path.join(locked, "inner"))
    open(os.path.join(locked, "inner", "file"), "w").close()
    os.chmod(os.path.join(locked, "inner"), 0)
    os.chmod(locked, 0o500)
    sandbox.remove_run_folder(folder)
    assert not os.path.exists(folder)


def test_isolation_is_off_without_unshare(monkeypatch):
    monkeypatch.setattr(sandbox, "system_tool", lambda name: None)
    assert sandbox.isolation.__wrapped__() == NOT_ISOLATED


def test_exit_code_output_and_duration_are_reported(settings, tmp_path):
    outcome = run(
        "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)", settings, tmp_path
    )
    assert (outcome.exit_code, outcome.signal, outcome.timed_out) == (3, None, False)
    assert (outcome.stdout, outcome.stderr) == ("out\n", "err\n")
    assert outcome.duration_ms >= 0


def test_under_bubblewrap_an_exit_code_above_128_is_the_signal_it_stands_for(settings, tmp_path):
    """bubblewrap exits 128 + n for a child killed by signal n, as a shell does; so does a
    program that exits 139 itself under it, which then reads as SIGSEGV."""
    needs.require("bubblewrap")
    confined = Confinement(confine.prefix(confine.bubblewrap(), str(tmp_path), []))
    segfault = "import ctypes; ctypes.string_at(0)"
    outcomes = {
        (code, bool(confinement)): run(code, settings, tmp_path, confinement=confinement)
        for code in (segfault, "raise SystemExit(139)", "raise SystemExit(3)")
        for confinement in (None, confined)
    }
    assert {key: (out.exit_code, out.signal) for key, out in outcomes.items()} == {
        (segfault, False): (None, signal.SIGSEGV),
        (segfault, True): (None, signal.SIGSEGV),
        ("raise SystemExit(139)", False): (139, None),
        ("raise SystemExit(139)", True): (None, signal.SIGSEGV),
        ("raise SystemExit(3)", False): (3, None),
        ("raise SystemExit(3)", True): (3, None),
    }


def test_each_stream_keeps_its_first_bytes_and_counts_the_rest(settings, tmp_path):
    settings["max_output_bytes"] = 1024
    code = "import sys; sys.stdout.write('a' * 5000); sys.stderr.write('é' * 3000)"
    outcome = run(code, settings, tmp_path)
    assert outcome.stdout == "a" * 1024 + "\n[ithaca: truncated 3976 bytes]"
    assert outcome.stderr == "é" * 512 + "\n[ithaca: truncated 4976 bytes]"


def test_wall_timeout_sends_sigterm_then_sigkill(settings, tmp_path):
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    outcome = run(code, settings, tmp_path, timeout_s=0.5)
    assert outcome.timed_out
    assert outcome.signal == signal.SIGKILL


def test_the_cpu_limit_kill_is_reported_as_cpu_exhaustion(settings, tmp_path):
    code = "import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\nwhile True: pass"
    outcome = run(code, settings, tmp_path, timeout_s=10, cpu=(0, 1))
    assert not outcome.timed_out
    assert outcome.signal == signal.SIGKILL and outcome.exit_code is None
    assert outcome.cpu_exhausted
    assert "sigprocmask" not in outcome.stderr  # the namespace wrapper's complaint is dropped


def test_a_supervisor_that_fails_leaves_no_validator_running(settings, tmp_path, monkeypatch, gone):
    def broken(capture, chunk):
        raise RuntimeError("the supervisor broke")

    monkeypatch.setattr(sandbox._Capture, "add", broken)
    record = tmp_path / "pid"
    code = (
        "import os, time\n"
        f"with open({str(record)!r}, 'w') as handle:\n"
        "    handle.write(os.readlink('/proc/self'))\n"
        "print('output', flush=True)\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(RuntimeError, match="supervisor broke"):
        run(code, settings, tmp_path, timeout_s=30)
    assert gone(int(record.read_text()))


def test_a_spawn_the_system_refuses_is_an_error(settings, tmp_path):
    with pytest.raises(Refused) as caught:
        run("pass", settings, tmp_path / "missing")
    assert caught.value.code == "VALIDATOR_SPAWN_FAILED"


def test_without_isolation_the_run_is_reported_or_refused(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "isolation", lambda: NOT_ISOLATED)
    outcome = run("pass", settings, tmp_path)
    assert outcome.network_isolated is False
    assert [d["code"] for d in outcome.diagnostics] == ["network_not_isolated"]
    with pytest.raises(Refused) as caught:
        run("pass", settings, tmp_path, require=True)
    assert caught.value.code == "VALIDATOR_ISOLATION_UNAVAILABLE"


def test_without_prlimit_limits_are_set_after_the_spawn(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "isolation", lambda: NOT_ISOLATED)
    monkeypatch.setattr(sandbox, "system_tool", lambda name: None)
    code = (
        "import resource, sys, time\n"
        "time.sleep(0.2)\n"
        "print(resource.getrlimit(resource.RLIMIT_NOFILE)[1])"
    )
    outcome = run(code, settings, tmp_path, nofile=(40, 40))
    assert outcome.stdout == "40\n"
    assert [d["code"] for d in outcome.diagnostics] == ["network_not_isolated"]


def test_without_any_limit_mechanism_the_run_says_so(settings, tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "system_tool", lambda name: None)
    monkeypatch.delattr(resource, "prlimit")
    outcome = run("pass", settings, tmp_path)
    assert outcome.exit_code == 0
    assert "limits_not_enforced" in [d["code"] for d in outcome.diagnostics]


def test_a_straggler_holding_the_pipes_is_drained_briefly_then_left(
    settings, tmp_path, monkeypatch
):
    """Without a PID namespace a descendant that left the group outlives the run (the
    documented limit); the run still ends."""
    monkeypatch.setattr(sandbox, "isolation", lambda: NOT_ISOLATED)
    monkeypatch.setattr(sandbox, "DRAIN_S", 0.2)
    record = tmp_path / "pid"
    code = leave_a_straggler(record)
    try:
        outcome = run(code, settings, tmp_path)
        assert (outcome.exit_code, outcome.timed_out) == (0, False)
    finally:
        os.kill(int(record.read_text()), signal.SIGKILL)


@needs.pid_namespace
def test_in_a_pid_namespace_a_descendant_that_left_the_group_dies_too(settings, tmp_path, gone):
    record = tmp_path / "pid"
    code = leave_a_straggler(record)
    outcome = run(code, settings, tmp_path)
    assert outcome.exit_code == 0
    assert gone(int(record.read_text()))
