"""Ithaca as a user installs it: the wheel and the sdist build with complete metadata, the
wheel installs into a fresh environment, and `ithaca demo` plays to its end from there."""

from __future__ import annotations

import ast
import email.parser
import os
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from email.message import Message
from pathlib import Path

import pytest

import ithaca

ROOT = Path(__file__).resolve().parents[1]
# The import name of each declared dependency, where it differs from the distribution's.
IMPORT_NAMES = {"pyicu-wheels": "icu"}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--wheel", "--sdist", "-o", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    yield out


def wheel_of(out: Path) -> Path:
    return next(out.glob("ithaca-*-py3-none-any.whl"))


def metadata(out: Path) -> Message:
    with zipfile.ZipFile(wheel_of(out)) as wheel:
        name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(wheel.read(name).decode())


def test_the_wheel_carries_complete_metadata(built: Path) -> None:
    found = metadata(built)
    assert found["Version"] == ithaca.__version__
    assert found["License-Expression"] == "MIT"
    assert found["License-File"] == "LICENSE"
    assert found["Requires-Python"] == ">=3.11"
    assert any(
        c.startswith("Programming Language :: Python :: 3.11")
        for c in found.get_all("Classifier", [])
    )
    urls = dict(url.split(", ", 1) for url in found.get_all("Project-URL", []))
    assert {"Homepage", "Changelog", "Issues"} <= set(urls)
    assert str(found.get_payload()).lstrip().startswith("# Ithaca")
    with zipfile.ZipFile(wheel_of(built)) as wheel:
        names = wheel.namelist()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "ithaca/py.typed" in names


def test_the_sdist_holds_the_sources_the_license_and_the_changelog(built: Path) -> None:
    sdist = next(built.glob("ithaca-*.tar.gz"))
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {
        "LICENSE",
        "CHANGELOG.md",
        "README.md",
        "pyproject.toml",
        "scripts/ithaca-hook",
    } <= names
    assert "src/ithaca/__init__.py" in names
    assert not any(name.startswith(("tools/node_modules", ".venv")) for name in names)


def test_every_declared_dependency_is_imported(built: Path) -> None:
    declared = [
        requirement.split(";")[0].split(">")[0].split("<")[0].split("=")[0].strip()
        for requirement in metadata(built).get_all("Requires-Dist", [])
        if "extra ==" not in requirement
    ]
    imported: set[str] = set()
    for path in (ROOT / "src" / "ithaca").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                imported.add(node.module.split(".")[0])
    unused = [name for name in declared if IMPORT_NAMES.get(name, name) not in imported]
    assert declared and not unused, f"declared but never imported: {unused}"


@pytest.mark.slow
def test_the_wheel_installs_into_a_fresh_environment_and_runs_the_demo(
    built: Path, tmp_path: Path
) -> None:
    env_dir = tmp_path / "fresh"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, timeout=120)
    binaries = env_dir / "bin"
    install = subprocess.run(
        [
            str(binaries / "pip"),
            "install",
            "-q",
            "--disable-pip-version-check",
            str(wheel_of(built)),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    shebang = (binaries / "ithaca-hook").read_text().splitlines()[0]
    assert Path(shebang.removeprefix("#!")).parent == binaries  # the fresh interpreter
    version = subprocess.run(
        [str(binaries / "ithaca"), "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.stdout.strip() == f"ithaca, version {ithaca.__version__}"
    # Nothing of this checkout on the way: the hosts find both commands on PATH.
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("PYTHONPATH", "VIRTUAL_ENV", "ITHACA_DIR")
    }
    env["PATH"] = os.pathsep.join([str(binaries), "/usr/local/bin", "/usr/bin", "/bin"])
    demo = subprocess.run(
        [str(binaries / "ithaca"), "demo"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=env,
    )
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    assert demo.stdout.rstrip().endswith("Demo complete: every step behaved as Ithaca promises.")
