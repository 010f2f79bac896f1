"""Each part's face: its package names its public API, and the rest uses only that.

``cli/``, ``mcp/``, ``hosts/`` and ``demo/`` (and ``app.py``, which opens the parts for
them) import a part only through ``ithaca.<part>``, and only names its ``__all__`` lists;
a part reaches another part the same way (the kernel's modules are every part's to use).
A part's modules are its own to rearrange.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import ithaca

PACKAGE = Path(ithaca.__file__).parent
PARTS = ("kernel", "protocols", "validators", "verification", "ulysses", "delivery", "ultragoal")
FACED = (*PARTS, "hosts")  # hosts is an adapter with a small face of its own
ADAPTERS = ("cli", "mcp", "hosts", "demo", "app.py")


def adapter_files() -> list[Path]:
    found = []
    for adapter in ADAPTERS:
        path = PACKAGE / adapter
        found += [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
    return found


def type_checking_imports(part: str) -> dict[str, str]:
    """The names the face's ``if TYPE_CHECKING:`` block imports, as face targets."""
    tree = ast.parse((PACKAGE / part / "__init__.py").read_text())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module
                if not statement.module.startswith("ithaca"):
                    continue  # the types the face's own code is annotated with
                for alias in statement.names:
                    module = f"{statement.module}.{alias.name}"
                    is_module = (PACKAGE.parent / (module.replace(".", "/") + ".py")).exists()
                    target = module if is_module else f"{statement.module}:{alias.name}"
                    found[alias.asname or alias.name] = target
    return found


@pytest.mark.parametrize("part", FACED)
def test_a_face_lists_what_it_offers_and_every_name_resolves(part: str) -> None:
    face = importlib.import_module(f"ithaca.{part}")
    # The face's lazy names in their order, and any name the package defines itself.
    assert [name for name in face.__all__ if name in face._FACE] == list(face._FACE)
    assert all(name in face._FACE or name in vars(face) for name in face.__all__)
    # The type checker reads the same names the lazy face loads.
    assert type_checking_imports(part) == face._FACE
    for name in face.__all__:
        assert getattr(face, name) is not None, name
    with pytest.raises(AttributeError):
        face.no_such_name  # noqa: B018 (the attribute access is what is tested)


def reaches_past_a_face(path: Path, reached: tuple[str, ...]) -> list[str]:
    """The imports in ``path`` of a room in ``reached`` that do not go through its face."""
    offenders = []
    modules: list[tuple[str, list[str] | None]]  # (module, the names imported from it)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules = [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, [alias.name for alias in node.names])]
        else:
            continue
        for module, names in modules:
            parts = module.split(".")
            if parts[0] != "ithaca" or len(parts) < 2 or parts[1] not in reached:
                continue
            if len(parts) > 2 or names is None:
                offenders.append(f"line {node.lineno}: {module}")
                continue
            offered = importlib.import_module(module).__all__
            offenders += [f"line {node.lineno}: {module}.{n}" for n in names if n not in offered]
    return offenders


@pytest.mark.parametrize("path", adapter_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_an_adapter_imports_parts_only_through_their_faces(path: Path) -> None:
    assert reaches_past_a_face(path, PARTS) == []


def part_files() -> list[tuple[str, Path]]:
    return [
        (part, path)
        for part in PARTS
        if part != "kernel"
        for path in sorted((PACKAGE / part).rglob("*.py"))
    ]


@pytest.mark.parametrize(
    ("part", "path"), part_files(), ids=lambda value: getattr(value, "name", str(value))
)
def test_a_part_reaches_another_part_only_through_its_face(part: str, path: Path) -> None:
    others = tuple(room for room in FACED if room not in (part, "kernel"))
    assert reaches_past_a_face(path, others) == []
