#!/bin/sh
# Every hook event of the Ithaca plugin runs this (hooks.json): Ithaca's hook from
# PATH, or, on a machine without Ithaca, a block (exit 2) that names the fix.
# Its arguments: the event, and --timeout with the seconds Claude Code waits for it.
command -v ithaca-hook >/dev/null 2>&1 || { echo 'ITHACA_NOT_INSTALLED: ithaca-hook is not on PATH on this machine, so Ithaca cannot check this call. Install Ithaca (uv tool install ithaca, or pipx install ithaca), and start Claude Code again: the Ithaca plugin runs it from PATH' >&2; exit 2; }
exec ithaca-hook claude "$@" --plugin
