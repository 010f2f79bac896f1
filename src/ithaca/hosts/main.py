"""``ithaca-hook <host> <event>``: the process a host starts for each hook call.

Reads the host's JSON on stdin, prints the host's JSON answer. Kept to the standard
library and Ithaca's light modules so that it starts in about the time of a bare
interpreter.
"""

from __future__ import annotations

import os
import sys

HOSTS = {"claude": "ithaca.hosts.claude"}
USAGE = "usage: ithaca-hook <host> <event>   (hosts: claude)"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in HOSTS:
        print(USAGE, file=sys.stderr)
        return 2
    host, event = args
    from importlib import import_module

    adapter = import_module(HOSTS[host])
    if event not in adapter.EVENTS:
        print(f"ithaca-hook: unknown {host} event {event!r}", file=sys.stderr)
        return 2
    from ithaca.hosts import dispatch

    stdin_text = sys.stdin.read()
    if event == "SessionStart":
        _export_session(stdin_text, getattr(adapter, "SESSION_ENV_FILE", None))
    out, code = dispatch.run(host, event, stdin_text)
    if code == 2:
        print(out, file=sys.stderr)
    elif out:
        print(out)
    return code


def _export_session(stdin_text: str, env_var: str | None) -> None:
    import json

    from ithaca.hosts.dispatch import write_session_env
    from ithaca.kernel.ids import is_session_id

    try:
        payload = json.loads(stdin_text)
    except ValueError:
        return
    session_id = payload.get("session_id") if isinstance(payload, dict) else None
    if is_session_id(session_id) and env_var:
        try:
            write_session_env(session_id, os.environ.get(env_var))
        except OSError:
            return


if __name__ == "__main__":
    sys.exit(main())
