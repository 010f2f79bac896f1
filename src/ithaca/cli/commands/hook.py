"""``ithaca hook <host> <event>``: the hook entry point, also reachable through the CLI.

Hosts call the lighter ``ithaca-hook`` console script; this command exists so the same
behaviour can be driven from the main CLI (and from the demo) without a second binary.
"""

from __future__ import annotations

import sys

import click


@click.command("hook", context_settings={"ignore_unknown_options": True})
@click.argument("host")
@click.argument("event")
def command(host: str, event: str) -> None:
    """Answer one host hook call: host JSON on stdin, host JSON on stdout."""
    from ithaca.hosts.dispatch import main as hook_main

    sys.exit(hook_main([host, event]))
