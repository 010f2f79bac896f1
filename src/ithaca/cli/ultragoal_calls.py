"""How an ``ithaca ultragoal`` subcommand calls the ultragoal service and reads its flags.

Every subcommand is one ``perform`` of the service, under the session given on the
subcommand, else on the group, else resolved from the environment. JSON-valued flags take
inline JSON or ``-`` for standard input; lists are comma-separated. Answers print as text,
or as JSON with ``--json`` (every subcommand takes it); refusals print ``error CODE: …``
on standard error.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from ithaca.cli.opening import opened
from ithaca.cli.output import errors_to_exit, render_tree, show
from ithaca.kernel import invalid_field
from ithaca.ultragoal import UltragoalService


def chosen_session(ctx: click.Context, session: str | None) -> str | None:
    """The subcommand's ``--session``, else the group's."""
    return session if session is not None else ctx.obj.get("ultragoal_session")


def wants_json(ctx: click.Context) -> bool:
    """Whether the subcommand was given ``--json``."""
    return bool((ctx.obj or {}).get("ultragoal_json"))


def remember_json(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """The ``--json`` flag's callback: every subcommand takes it (``wants_json``)."""
    if value:
        ctx.ensure_object(dict)["ultragoal_json"] = True


def call(
    ctx: click.Context,
    operation: str,
    session: str | None,
    fields: dict[str, Any],
    *,
    actor: str = "agent",
    as_json: bool | None = None,
) -> dict[str, Any]:
    """The service's answer to ``operation``; a refusal exits with its code."""
    as_json = wants_json(ctx) if as_json is None else as_json
    service = _service(ctx, as_json)
    arguments = {"operation": operation, **fields}
    chosen = chosen_session(ctx, session)
    if chosen is not None:
        arguments["session"] = chosen
    with errors_to_exit(as_json):
        return service.perform(arguments, actor=actor, base_dir=os.getcwd())
    raise AssertionError("unreachable")  # errors_to_exit exits


def write(ctx: click.Context, operation: str, session: str | None, **fields: Any) -> None:
    """Perform ``operation`` with the fields given and print its answer."""
    show(call(ctx, operation, session, present(fields)), wants_json(ctx), render_tree)


def present(fields: dict[str, Any]) -> dict[str, Any]:
    """The fields whose flags were given."""
    return {name: value for name, value in fields.items() if value is not None}


def json_flag(flag: str, text: str | None) -> Any:
    """``--<flag>``'s JSON value (``-`` reads standard input), or None when not given."""
    if text is None:
        return None
    if text == "-":
        text = sys.stdin.read()
    with errors_to_exit(wants_json(click.get_current_context())):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise invalid_field(f"/{flag}", "INVALID_JSON", f"--{flag} is not JSON: {exc}") from exc


def comma_list(text: str | None) -> list[str] | None:
    """A comma-separated flag's items, or None when not given."""
    if text is None:
        return None
    return [part.strip() for part in text.split(",") if part.strip()]


def _service(ctx: click.Context, as_json: bool = True) -> UltragoalService:
    project = opened(ctx, as_json)
    return UltragoalService(project.project, project.store, project.config)
