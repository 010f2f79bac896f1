"""Run many ``ithaca`` command lines in one process, as ``ithaca`` itself would (its
``main``, with the last-resort handler), and print what each answered as JSON.

Used by ``test_every_command.py``: one process per situation instead of one per command
line keeps the walk over every command fast. Reads ``{"lines": [[arg, ...], ...]}`` on
standard input.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys

from ithaca.cli import entry


def answer(argv: list[str]) -> dict[str, object]:
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["ithaca", *argv]
    code: object = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            entry.main()
        except SystemExit as exc:
            code = exc.code if exc.code is not None else 0
        except BaseException as exc:  # noqa: BLE001 - what escaped main is the finding
            code = f"escaped: {type(exc).__name__}: {exc}"
    return {"argv": argv, "code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main() -> None:
    lines = json.loads(sys.stdin.read())["lines"]
    real = sys.stdout  # each answer redirects it
    results = [answer(argv) for argv in lines]
    real.write(json.dumps(results))


if __name__ == "__main__":
    main()
