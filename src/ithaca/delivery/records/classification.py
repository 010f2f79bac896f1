"""Greenfield or brownfield: an advisory look at what the checkout already holds
(docs/delivery.md, "The record tool").

The files are those Git lists (tracked, plus untracked ones it does not ignore), else a
bounded walk; ``.ithaca/`` never counts. Any marker of an existing system (a package
manifest, a source folder, tests, CI, deployment, migrations, a workspace) or more than
five files makes the project brownfield. The mode decides nothing but which gaps are
suggested; the caller's ``mode`` overrides it, and the first 50 markers are kept as
evidence either way.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

from ithaca.kernel import git

MAX_MARKERS = 50
MAX_WALK_FILES = 10_000
GIT_TIMEOUT_S = 10

MANIFESTS = frozenset(
    {
        "package.json",
        "pyproject.toml",
        "setup.py",
        "setup.cfg",
        "requirements.txt",
        "Pipfile",
        "Cargo.toml",
        "go.mod",
        "pom.xml",
        "build.gradle",
        "build.gradle.kts",
        "Gemfile",
        "composer.json",
        "mix.exs",
        "deno.json",
        "CMakeLists.txt",
    }
)
SOURCE_FOLDERS = frozenset({"src", "lib", "app", "cmd", "pkg"})
TEST_FOLDERS = frozenset({"tests", "test", "__tests__", "spec", "specs"})
TEST_FILES = ("test_*.py", "*_test.py", "*_test.go", "*.test.*", "*.spec.*")
CI_FILES = frozenset(
    {
        ".gitlab-ci.yml",
        ".travis.yml",
        "Jenkinsfile",
        "azure-pipelines.yml",
        "bitbucket-pipelines.yml",
    }
)
CI_FOLDERS = (".github/workflows/", ".circleci/", ".buildkite/")
DEPLOY_FILES = frozenset(
    {
        "Dockerfile",
        "docker-compose.yml",
        "docker-compose.yaml",
        "compose.yaml",
        "compose.yml",
        "Procfile",
        "fly.toml",
        "vercel.json",
        "netlify.toml",
        "app.yaml",
    }
)
DEPLOY_FOLDERS = frozenset({"k8s", "kubernetes", "helm", "deploy", "terraform", "infra"})
MIGRATION_FOLDERS = frozenset({"migrations", "alembic", "migrate"})
WORKSPACE_FILES = frozenset(
    {"pnpm-workspace.yaml", "lerna.json", "go.work", "nx.json", "turbo.json", "rush.json"}
)

SUGGESTED_GAPS: dict[str, list[dict[str, Any]]] = {
    "greenfield": [
        {"id": "product-outcome", "category": "intent", "note": "What the first release must do."},
        {"id": "architecture", "category": "design", "note": "The first architecture choice."},
        {"id": "quality-bar", "category": "verification", "note": "How work will be verified."},
    ],
    "brownfield": [
        {"id": "current-behaviour", "category": "behaviour", "note": "What the system does now."},
        {"id": "test-baseline", "category": "verification", "note": "Which tests pass today."},
        {"id": "public-seams", "category": "interfaces", "note": "APIs others depend on."},
        {"id": "deployment", "category": "operations", "note": "How it ships and runs."},
    ],
}


def classify(root: str, state_root: str, requested_mode: str | None) -> dict[str, Any]:
    """``{mode, detected, file_count, markers, source, suggested_gaps}`` for the checkout."""
    files, source = _checkout_files(root, state_root)
    markers = sorted({marker for path in files for marker in markers_of(path)})
    detected = "brownfield" if markers or len(files) > 5 else "greenfield"
    mode = requested_mode or detected
    return {
        "mode": mode,
        "detected": detected,
        "file_count": len(files),
        "markers": markers[:MAX_MARKERS],
        "source": source,
        "suggested_gaps": [{**gap, "blocking": False} for gap in SUGGESTED_GAPS[mode]],
    }


def markers_of(path: str) -> list[str]:
    """The markers one checkout path carries, as ``category:where`` strings."""
    parts = path.split("/")
    name = parts[-1]
    folders = parts[:-1]
    found = []
    if name in MANIFESTS:
        found.append(f"manifest:{path}")
    if folders and folders[0] in SOURCE_FOLDERS:
        found.append(f"source:{folders[0]}/")
    test_folder = next((f for f in folders if f in TEST_FOLDERS), None)
    if test_folder is not None:
        found.append(f"tests:{'/'.join(folders[: folders.index(test_folder) + 1])}/")
    elif any(fnmatch.fnmatchcase(name, pattern) for pattern in TEST_FILES):
        found.append(f"tests:{path}")
    if name in CI_FILES or any(path.startswith(prefix) for prefix in CI_FOLDERS):
        found.append(f"ci:{path}")
    if name in DEPLOY_FILES or name.endswith(".tf"):
        found.append(f"deployment:{path}")
    if folders and folders[0] in DEPLOY_FOLDERS:
        found.append(f"deployment:{folders[0]}/")
    migration = next((f for f in folders if f in MIGRATION_FOLDERS), None)
    if migration is not None:
        found.append(f"migrations:{'/'.join(folders[: folders.index(migration) + 1])}/")
    if name in WORKSPACE_FILES:
        found.append(f"workspace:{path}")
    return found


def _checkout_files(root: str, state_root: str) -> tuple[list[str], str]:
    excluded = _state_prefix(root, state_root)
    listed = _git_files(root)
    source = "git"
    if listed is None:
        listed, source = _walk(root), "walk"
    return [path for path in listed if not _under(path, excluded)], source


def _git_files(root: str) -> list[str] | None:
    listing = ("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    try:
        done = git.run(listing, cwd=root, timeout=GIT_TIMEOUT_S)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.decode("utf-8", "replace").split("\0")
    return sorted({name for name in names if name})


def _walk(root: str) -> list[str]:
    """Up to ``MAX_WALK_FILES`` files below ``root``; symlinks and ``.git`` skipped."""
    found: list[str] = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = sorted(
            name
            for name in subfolders
            if name != ".git" and not os.path.islink(os.path.join(folder, name))
        )
        relative = os.path.relpath(folder, root)
        for name in sorted(names):
            path = name if relative == "." else f"{relative.replace(os.sep, '/')}/{name}"
            found.append(path)
            if len(found) >= MAX_WALK_FILES:
                return found
    return found


def _state_prefix(root: str, state_root: str) -> str | None:
    """The state root relative to ``root`` (``.ithaca``), or None when it lies outside."""
    relative = os.path.relpath(os.path.realpath(state_root), os.path.realpath(root))
    return None if relative.startswith("..") else relative.replace(os.sep, "/")


def _under(path: str, prefix: str | None) -> bool:
    return prefix is not None and (path == prefix or path.startswith(prefix + "/"))
