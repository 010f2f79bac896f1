"""Names that explain themselves: the rules a reader can rely on when opening a folder."""

from __future__ import annotations

import ast
from pathlib import Path

import click

import ithaca
from ithaca.cli.entry import COMMANDS

PACKAGE = Path(ithaca.__file__).parent


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_defines_a_function_or_class_of_its_own_name() -> None:
    """``archive.archive`` reads as a stutter and hides which one an import means."""
    clashes = []
    for path in modules():
        for node in ast.parse(path.read_text()).body:
            definitions = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            if isinstance(node, definitions) and node.name == path.stem:
                clashes.append(str(path.relative_to(PACKAGE)))
    assert clashes == []


def test_sql_table_modules_and_json_schema_folders_do_not_share_a_name() -> None:
    """SQL schemas live in ``tables.py`` modules; ``schemas/`` folders hold JSON Schemas."""
    assert [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("schema.py")] == []
    for folder in PACKAGE.rglob("schemas"):
        assert folder.is_dir() and not (folder.parent / "schemas.py").exists()


def test_each_command_module_holds_the_command_it_is_named_for() -> None:
    """``cli/commands/<name>.py`` defines ``ithaca <name>`` as ``command`` or ``group``,
    and the CLI lists every such module (a Python keyword takes PEP 8's trailing
    underscore: ``import_.py`` is ``ithaca import``)."""
    listed = {}
    for name, target in COMMANDS.items():
        module, _, attribute = target.partition(":")
        listed[module] = (name, attribute)
    for path in sorted((PACKAGE / "cli" / "commands").glob("*.py")):
        if path.name == "__init__.py":
            continue
        module = f"ithaca.cli.commands.{path.stem}"
        assert module in listed, f"{module} is not an ithaca command"
        name, attribute = listed[module]
        assert name == path.stem.rstrip("_").replace("_", "-")
        assert attribute == "group" or attribute == "command"
        command = getattr(__import__(module, fromlist=[attribute]), attribute)
        assert isinstance(command, click.Group if attribute == "group" else click.Command)
        assert command.name == name
