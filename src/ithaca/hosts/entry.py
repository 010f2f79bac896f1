"""``ithaca-hook <host> <event>``: the process a host starts for each hook call.

Reads the host's JSON on stdin, prints the host's JSON answer. Kept to the standard
library and Ithaca's light modules so that it starts in about the time of a bare
interpreter. The command ``ithaca install`` writes calls ``run``, which also spares the
process the work a one-call process never needs (see there).
"""

from __future__ import annotations

import os
import sys

HOSTS = {"claude": "ithaca.hosts.claude", "codex": "ithaca.hosts.codex"}
USAGE = f"usage: ithaca-hook <host> <event>   (hosts: {', '.join(HOSTS)})"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] not in HOSTS:
        print(USAGE, file=sys.stderr)
        return 2
    host, event = args
    __import__(HOSTS[host])  # importlib.import_module, without importing importlib
    adapter = sys.modules[HOSTS[host]]
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


def run() -> None:
    """``main`` in a process that lives for exactly one hook call.

    The garbage collector is switched off: it would walk every object the imports create,
    several times over, and a hook makes no garbage worth collecting. Once the answer is
    flushed the process ends at once, skipping the interpreter's module-by-module
    tear-down (the store connection is already closed). Each saves milliseconds of every
    tool call on a slow machine.
    """
    import gc

    gc.disable()
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _export_session(stdin_text: str, env_var: str | None) -> None:
    from ithaca.hosts.dispatch import write_session_env
    from ithaca.kernel import is_session_id, lightjson

    try:
        payload = lightjson.loads(stdin_text)
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
