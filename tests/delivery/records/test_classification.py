"""Which checkout paths mark a project as brownfield."""

from __future__ import annotations

import pytest

from ithaca.delivery.records.classification import markers_of


@pytest.mark.parametrize(
    ("path", "markers"),
    [
        ("package.json", ["manifest:package.json"]),
        ("src/app/main.py", ["source:src/"]),
        ("tests/unit/test_x.py", ["tests:tests/"]),
        ("pkg/store/store_test.go", ["source:pkg/", "tests:pkg/store/store_test.go"]),
        (".github/workflows/ci.yml", ["ci:.github/workflows/ci.yml"]),
        ("Dockerfile", ["deployment:Dockerfile"]),
        ("infra/main.tf", ["deployment:infra/main.tf", "deployment:infra/"]),
        ("db/migrations/001.sql", ["migrations:db/migrations/"]),
        ("pnpm-workspace.yaml", ["workspace:pnpm-workspace.yaml"]),
        ("README.md", []),
        ("notes/ideas.txt", []),
    ],
)
def test_markers(path: str, markers: list[str]) -> None:
    assert markers_of(path) == markers
