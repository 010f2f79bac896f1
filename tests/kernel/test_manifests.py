"""The parts' manifests: what each part brings reaches the kernel, and the kernel names
no part itself."""

from __future__ import annotations

import ast
import inspect
import re
import sqlite3
from pathlib import Path
from types import ModuleType

import click
import pytest

import ithaca
import ithaca as manifests
from ithaca import PARTS
from ithaca.app import open_project

# mypy holds these gate modules to the typed contract; the tests below hold every gate
# the manifests list, including any added later.
from ithaca.delivery import gate as delivery_gate
from ithaca.hosts import effects, profile_gate
from ithaca.kernel import guard
from ithaca.kernel.gate_contract import CommittingGate, Gate
from ithaca.kernel.migrations import MIGRATIONS
from ithaca.kernel.tools import ToolSpec
from ithaca.protocols import critic
from ithaca.protocols import gate as protocols_gate
from ithaca.ultragoal import gate as ultragoal_gate
from ithaca.ulysses import gate as ulysses_gate

TYPED_GATES: tuple[Gate, ...] = (
    guard,
    effects,
    profile_gate,
    protocols_gate,
    critic,
    ulysses_gate,
    delivery_gate,
    ultragoal_gate,
)
HOOK_EVENTS = {
    "SessionStart",
    "UserPromptSubmit",
    "UserPromptExpansion",
    "PreToolUse",
    "PostToolUse",
    "PreCompact",
    "Stop",
    "SubagentStop",
    "SessionEnd",
}
PACKAGE = Path(ithaca.__file__).parent


def listed_gates() -> list[tuple[str, tuple[str, ...], ModuleType]]:
    return [
        (name, events, __import__(name, fromlist=["EVENTS"]))
        for name, events in manifests.collected("GATES")
    ]


def test_every_listed_part_declares_its_manifest_and_every_gate_module_is_listed() -> None:
    assert [m.__name__ for m in manifests.all_manifests()] == [f"ithaca.{p}" for p in PARTS]
    listed = {name for name, _, _ in listed_gates()}
    on_disk = {
        "ithaca." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        for path in PACKAGE.rglob("gate.py")
    }
    assert on_disk <= listed
    assert {gate.__name__ for gate in TYPED_GATES if isinstance(gate, ModuleType)} == listed


@pytest.mark.parametrize("name", [name for name, _ in manifests.collected("GATES")])
def test_a_listed_gate_keeps_the_gate_contract(name: str) -> None:
    events = dict(manifests.collected("GATES"))[name]
    module = __import__(name, fromlist=["EVENTS"])
    assert isinstance(module, Gate)
    # The manifest names the events the dispatcher imports the gate for: the same ones.
    assert tuple(events) == tuple(module.EVENTS)
    assert set(events) <= HOOK_EVENTS
    assert list(inspect.signature(module.decide).parameters) == ["call", "ctx"]
    if hasattr(module, "commit"):
        assert isinstance(module, CommittingGate)
        assert list(inspect.signature(module.commit).parameters) == ["call", "final", "ctx"]


def test_migrations_number_one_to_latest_and_each_is_sql() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
    assert len({m.name for m in MIGRATIONS}) == len(MIGRATIONS)
    conn = sqlite3.connect(":memory:")
    for migration in MIGRATIONS:
        conn.executescript(migration.sql())  # each applies on the ones before it


def test_state_predicates_and_doctor_providers_resolve_to_functions() -> None:
    targets = [
        *manifests.mapping("STATES").values(),
        *manifests.collected("DOCTOR_CHECKS"),
        *manifests.collected("DOCTOR_REPAIRS"),
        *manifests.collected("DOCTOR_REBUILDS"),
    ]
    assert targets
    for target in targets:
        assert inspect.isfunction(manifests.resolve(target)), target


def test_cli_commands_and_mcp_tools_resolve(project_dir: Path) -> None:
    for name, target in manifests.mapping("CLI_COMMANDS").items():
        assert isinstance(manifests.resolve(target), click.Command), name
    specs = [spec for t in manifests.collected("MCP_TOOLS") for spec in manifests.resolve(t)]
    assert len({spec.name for spec in specs}) == len(specs) == 14
    project = open_project(project_dir)
    try:
        for spec in specs:
            assert isinstance(spec, ToolSpec)
            assert callable(getattr(getattr(project, spec.service), spec.method)), spec.name
    finally:
        project.close()


def test_a_name_declared_by_two_parts_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    first, second = manifests.all_manifests()[:2]
    monkeypatch.setattr(first, "CLI_COMMANDS", {"twice": "a:b"}, raising=False)
    monkeypatch.setattr(second, "CLI_COMMANDS", {"twice": "c:d"}, raising=False)
    with pytest.raises(RuntimeError, match="declared by two parts"):
        manifests.mapping("CLI_COMMANDS")


MANIFEST = {"MIGRATIONS", "GATES", "STATES", "CLI_COMMANDS", "MCP_TOOLS"} | {
    f"DOCTOR_{kind}" for kind in ("CHECKS", "REPAIRS", "REBUILDS")
}


def test_the_kernel_names_no_part_above_it() -> None:
    """No import of a part, and no ``"module:attribute"`` target in one; the kernel's
    own manifest is its declaration, like every part's, and prose may mention parts."""
    above = "|".join(p for p in (*PARTS, "cli", "mcp", "demo", "app") if p != "kernel")
    part_module = re.compile(rf"ithaca\.({above})(\.|$)")
    offenders = []
    for path in sorted((PACKAGE / "kernel").glob("*.py")):
        tree = ast.parse(path.read_text())
        tree.body = [
            node
            for node in tree.body
            if not (
                isinstance(node, ast.Assign)
                and {getattr(target, "id", "") for target in node.targets} <= MANIFEST
            )
        ]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                named = [node.module or ""]
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = [node.value.partition(":")[0]] if ":" in node.value else []
            else:
                continue
            offenders += [f"{path.name}:{node.lineno} {n}" for n in named if part_module.match(n)]
    assert offenders == []
