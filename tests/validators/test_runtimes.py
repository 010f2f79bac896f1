import os
import shutil
import subprocess
import sys

import pytest
from tests import needs

from ithaca.kernel.config import defaults
from ithaca.kernel.errors import InvalidInput, Refused
from ithaca.validators import runtimes

NODE = shutil.which("node")


@pytest.fixture
def settings():
    return defaults()["validators"]


def fake_program(folder, name, answer):
    """An executable that prints ``answer`` whatever it is asked."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nprintf '%s\\n' '{answer}'\n")
    path.chmod(0o755)
    return path


def only_bin(tmp_path, **programs):
    """A PATH folder holding only the given programs (name -> answer, or a real path)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    for name, answer in programs.items():
        if os.path.isabs(answer):
            (folder / name).symlink_to(answer)
        else:
            fake_program(folder, name, answer)
    return str(folder)


def test_each_language_names_its_extensions_entrypoint_and_helpers():
    table = {
        name: (lang.extensions, lang.entrypoint, lang.helpers)
        for name, lang in runtimes.LANGUAGES.items()
    }
    assert table == {
        "python": ((".py",), "validate.py", ("tb_validate.py",)),
        "javascript": (
            (".js", ".mjs", ".cjs"),
            "validate.js",
            ("tb-validate.js", "tb-validate.cjs"),
        ),
        "typescript": (
            (".ts", ".mts", ".cts"),
            "validate.ts",
            ("tb-validate.js", "tb-validate.cjs"),
        ),
        "shell": ((".sh",), "validate.sh", ("tb-validate.sh",)),
    }


def test_python_defaults_to_the_running_interpreter(settings):
    assert runtimes.measure("python", settings) == {
        "name": sys.implementation.name,
        "version": sys.version,
    }
    assert runtimes.command("python", "/run/validate.py", settings) == [
        os.path.abspath(sys.executable),
        "-E",
        "-s",
        "-S",
        "-B",
        "/run/validate.py",
    ]


def test_python_site_keeps_site_packages(settings):
    settings["python_site"] = True
    assert runtimes.command("python", "/run/v.py", settings)[1:] == ["-E", "-s", "-B", "/run/v.py"]


def test_a_configured_interpreter_is_measured_and_cached_by_path_and_mtime(tmp_path, settings):
    python = fake_program(tmp_path, "python", "cpython\n3.99.0 (fake)")
    settings["python"] = str(python)
    assert runtimes.measure("python", settings) == {"name": "cpython", "version": "3.99.0 (fake)"}
    assert runtimes.command("python", "/run/v.py", settings)[0] == str(python)
    stamp = python.stat().st_mtime_ns
    fake_program(tmp_path, "python", "cpython\n3.99.1 (fake)")
    os.utime(python, ns=(stamp, stamp))
    assert runtimes.measure("python", settings)["version"] == "3.99.0 (fake)"
    os.utime(python, ns=(stamp + 10**9, stamp + 10**9))
    assert runtimes.measure("python", settings)["version"] == "3.99.1 (fake)"


def test_a_runtime_that_did_not_answer_in_time_is_asked_again(tmp_path, settings, monkeypatch):
    monkeypatch.setattr(runtimes, "PROBE_TIMEOUT_S", 0.3)
    busy = tmp_path / "busy"
    busy.touch()
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\nif [ -e {busy} ]; then sleep 5; fi\nprintf 'cpython\\n3.99.2'\n")
    python.chmod(0o755)
    settings["python"] = str(python)
    with pytest.raises(Refused):
        runtimes.measure("python", settings)
    busy.unlink()
    assert runtimes.measure("python", settings)["version"] == "3.99.2"


@needs.node
def test_javascript_runs_on_node_and_reports_its_version(settings):
    version = subprocess.run([NODE, "--version"], capture_output=True, text=True).stdout.strip()
    assert runtimes.measure("javascript", settings) == {"name": "node", "version": version}
    assert runtimes.command("javascript", "/run/validate.js", settings) == [
        os.path.abspath(NODE),
        "/run/validate.js",
    ]


def test_a_missing_runtime_is_refused(tmp_path, settings):
    settings["node"] = str(tmp_path / "no-node")
    settings["python"] = str(tmp_path / "no-python")
    for language in ("javascript", "python"):
        with pytest.raises(Refused) as caught:
            runtimes.measure(language, settings)
        assert caught.value.code == "VALIDATOR_RUNTIME_MISSING"
        with pytest.raises(Refused):
            runtimes.command(language, "/run/v", settings)


@needs.node
def test_typescript_without_tsx_on_an_older_node_is_refused(tmp_path, settings):
    settings["path"] = only_bin(tmp_path, node=NODE)
    with pytest.raises(Refused) as caught:
        runtimes.measure("typescript", settings)
    assert caught.value.code == "VALIDATOR_RUNTIME_MISSING"
    assert "tsx" in caught.value.message


def test_typescript_prefers_tsx_and_reports_both_versions(tmp_path, settings):
    settings["path"] = only_bin(tmp_path, tsx="tsx v4.19.2\nnode v22.1.0", node="v22.1.0")
    tsx = os.path.join(settings["path"], "tsx")
    assert runtimes.measure("typescript", settings) == {
        "name": "tsx",
        "version": "tsx v4.19.2, node v22.1.0",
    }
    assert runtimes.command("typescript", "/run/validate.ts", settings) == [tsx, "/run/validate.ts"]


@pytest.mark.parametrize(
    ("version", "strips"),
    [
        ("v22.17.1", False),
        ("v22.18.0", True),
        ("v23.5.0", False),
        ("v23.6.0", True),
        ("v24.0.0", True),
    ],
)
def test_typescript_runs_on_a_node_that_strips_types(tmp_path, settings, version, strips):
    settings["path"] = only_bin(tmp_path, node=version)
    if strips:
        assert runtimes.measure("typescript", settings) == {"name": "node", "version": version}
        node = os.path.join(settings["path"], "node")
        assert runtimes.command("typescript", "/run/v.ts", settings) == [node, "/run/v.ts"]
    else:
        with pytest.raises(Refused):
            runtimes.command("typescript", "/run/v.ts", settings)


def test_shell_reports_its_resolved_path_and_version_line(tmp_path, settings):
    shell = os.path.realpath("/bin/sh")
    measured = runtimes.measure("shell", settings)
    assert measured["name"] == os.path.basename(shell)
    assert measured["version"].startswith(shell)
    assert runtimes.command("shell", "/run/validate.sh", settings) == [
        "/bin/sh",
        "/run/validate.sh",
    ]
    settings["shell"] = str(fake_program(tmp_path, "mysh", "MySh 1.2\nmore"))
    assert runtimes.measure("shell", settings) == {
        "name": "mysh",
        "version": f"{os.path.realpath(settings['shell'])} MySh 1.2",
    }


def test_an_unknown_language_is_unsupported(settings):
    with pytest.raises(InvalidInput) as caught:
        runtimes.measure("cobol", settings)
    assert caught.value.code == "LANGUAGE_UNSUPPORTED"


def test_a_runtime_asked_its_version_runs_confined(tmp_path, settings, monkeypatch):
    """The validator PATH can reach into the project (an activated ``.venv/bin``), where
    the agent writes: a planted interpreter is asked its version with the filesystem
    read-only and the user's Ithaca folder out of sight, as a validator would run."""
    home = tmp_path / "ithaca-home"
    home.mkdir()
    (home / "secret").write_text("key\n")
    monkeypatch.setenv("ITHACA_HOME", str(home))
    marker = tmp_path / "written-outside"
    python = tmp_path / "project" / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        f"#!/bin/sh\ntouch {marker}\nsecret=$(cat {home}/secret 2>/dev/null)\n"
        "printf 'cpython\\n3.99.3 %s' \"${secret:-hidden}\"\n"
    )
    python.chmod(0o755)
    settings["python"] = str(python)

    assert runtimes.measure("python", settings)["version"] == "3.99.3 hidden"
    assert not marker.exists()


def test_without_bubblewrap_a_runtime_is_not_asked_unconfined(tmp_path, settings, monkeypatch):
    monkeypatch.setattr(runtimes.confine, "bubblewrap", lambda: None)
    settings["python"] = str(fake_program(tmp_path, "python", "cpython\n3.99.4"))
    with pytest.raises(Refused) as refused:
        runtimes.measure("python", settings)
    assert refused.value.code == "VALIDATOR_ISOLATION_UNAVAILABLE"
    settings["require_filesystem_isolation"] = False
    assert runtimes.measure("python", settings)["version"] == "3.99.4"
