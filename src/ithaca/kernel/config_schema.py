"""What Ithaca's configuration may hold, and how one file of it is merged.

Each part owns a section of keys, each with the types it accepts and its default; some
values pass a check of their own, a few keys (which choose an executable) are honoured
only from the user or local file, and the user's file alone may set ``user_id``. An
unknown section or key, a wrong type or a failed check is ``INVALID_CONFIG``, naming the
file and the key. ``kernel.config`` loads this module only when its cache cannot answer:
hooks, on every call, read the merged result from the cache. It parses the bytes
``kernel.config`` read, never the file again.
"""

from __future__ import annotations

from ithaca.kernel.errors import InvalidInput

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# Sub-keys of ``validators.limits``: each a positive whole number, merged key by key.
VALIDATOR_LIMITS: dict[str, int] = {
    "address_space_mb": 2048,
    "js_heap_mb": 1024,
    "file_size_mb": 64,
    "open_files": 256,
    "processes": 512,
}

# section -> key -> (accepted types, default)
SCHEMA: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "protocols": {
        "project_id": ((str,), None),
        "client_id": ((str,), None),
        "default_workflow": ((str,), None),
        "default_task": ((str,), None),
        "workflows": ((list,), []),
        "strict": ((bool,), True),
        "read_only_tools": ((list,), []),
        "approval_ttl_seconds": ((int,), 900),
        "store_prompts": ((bool,), False),
        "mcp_server_name": ((str,), "ithaca"),
    },
    "hooks": {
        "fail_closed": ((bool,), True),
    },
    "mcp": {
        "tool_timeout_s": ((int, float), 60),
    },
    "validators": {
        "timeout_s": ((int, float), 30),
        "grace_s": ((int, float), 2),
        "max_output_bytes": ((int,), 65536),
        "max_verdict_bytes": ((int,), 65536),
        "python": ((str,), None),  # None: the interpreter running Ithaca
        "node": ((str,), "node"),
        "shell": ((str,), "/bin/sh"),
        "path": ((str,), None),  # None: the inherited PATH
        "python_site": ((bool,), False),
        "require_network_isolation": ((bool,), False),
        "require_filesystem_isolation": ((bool,), True),
        "limits": ((dict,), VALIDATOR_LIMITS),
    },
    "ultragoal": {
        "strict_approval": ((bool,), True),
        "max_iterations_default": ((int,), 10),
        "reviewer_agent_type": ((str,), "code-reviewer"),
        "stop_error_block_max": ((int,), 5),
    },
    "delivery": {
        "lease_ttl_s": ((int,), 1800),
    },
    "verification": {
        "require": ((bool,), True),  # the end-of-turn critic (protocols.critic)
        "runner": ((str,), "auto"),  # or a runner's name (verification.runners)
        "commands": ((list,), []),  # empty: found from the project (its test runner)
        "skip": ((list,), []),  # folders the content digest leaves out
        "timeout_s": ((int, float), 600),
        "max_blocks": ((int,), 3),
    },
    "run_plan": {
        "worker": ((list,), []),  # argv of the worker command, run without a shell
        "env": ((dict,), {}),
        "timeout_s": ((int, float), 3600),
        "max_parallel": ((int,), 4),
    },
    "ulysses": {
        "require_plan_for_mutation": ((bool,), True),
        "tests_are_read_only": ((bool,), True),
        "read_only_commands": ((list,), []),
        "mutating_tools": ((list,), []),
        "coordinator_agent_types": ((list,), []),
        "checkpoint_snapshots": ((bool,), True),
        "checkpoint_max_file_mb": ((int, float), 50),
    },
}


def _selector_text(value: Any) -> bool:
    return 0 < len(value) <= 128 and value.isprintable()


def _is_name(value: str) -> bool:
    """A workflow or task name as markers spell it (the prompt parser, which tool hooks
    never load, owns the rule)."""
    from ithaca.kernel import markers

    return markers.is_name(value)


# Values beyond their type: (check, what a good value looks like).
VALUE_CHECKS: dict[tuple[str, str], tuple[Any, str]] = {
    ("protocols", "approval_ttl_seconds"): (
        lambda v: 1 <= v <= 30 * 86400,
        "a number of seconds from 1 to 2592000",
    ),
    ("protocols", "workflows"): (
        lambda v: all(isinstance(w, str) and _is_name(w) for w in v),
        "a list of names like 'release' (lowercase letters, digits, '.', '_', '-')",
    ),
    ("protocols", "default_workflow"): (_is_name, "a workflow name like 'coding'"),
    ("protocols", "default_task"): (_is_name, "a task name like 'release-2'"),
    ("protocols", "project_id"): (_selector_text, "1 to 128 printable characters"),
    ("protocols", "client_id"): (_selector_text, "1 to 128 printable characters"),
    ("protocols", "read_only_tools"): (
        lambda v: all(isinstance(g, str) and g for g in v),
        "a list of tool-name globs",
    ),
    ("mcp", "tool_timeout_s"): (lambda v: 1 <= v <= 3600, "a number of seconds from 1 to 3600"),
    ("validators", "timeout_s"): (lambda v: 0 < v <= 3600, "a number of seconds from 1 to 3600"),
    ("validators", "grace_s"): (lambda v: 0 < v <= 60, "a number of seconds up to 60"),
    ("validators", "max_output_bytes"): (lambda v: 1024 <= v <= 2**26, "1024 to 67108864 bytes"),
    ("validators", "max_verdict_bytes"): (lambda v: 1024 <= v <= 2**24, "1024 to 16777216 bytes"),
    ("validators", "python"): (bool, "a path to a Python interpreter"),
    ("validators", "node"): (bool, "a Node executable name or path"),
    ("validators", "shell"): (bool, "a shell executable path"),
    ("validators", "limits"): (
        lambda v: all(k in VALIDATOR_LIMITS and type(n) is int and n > 0 for k, n in v.items()),
        f"a table of positive whole numbers named {', '.join(VALIDATOR_LIMITS)}",
    ),
    ("ultragoal", "max_iterations_default"): (lambda v: 1 <= v <= 1000, "1 to 1000"),
    ("ultragoal", "stop_error_block_max"): (lambda v: 1 <= v <= 100, "1 to 100"),
    ("ultragoal", "reviewer_agent_type"): (bool, "an agent type name"),
    ("ulysses", "read_only_commands"): (
        lambda v: all(isinstance(c, str) and c and "/" not in c for c in v),
        "a list of command names",
    ),
    ("ulysses", "mutating_tools"): (
        lambda v: all(isinstance(c, str) and c for c in v),
        "a list of tool names",
    ),
    ("ulysses", "coordinator_agent_types"): (
        lambda v: all(isinstance(c, str) and c for c in v),
        "a list of agent type names",
    ),
    ("delivery", "lease_ttl_s"): (lambda v: 60 <= v <= 7 * 86400, "60 to 604800 seconds"),
    ("run_plan", "worker"): (
        lambda v: all(isinstance(w, str) and w for w in v),
        "an argv list of non-empty strings, such as ['python3', 'worker.py']",
    ),
    ("run_plan", "env"): (
        lambda v: all(isinstance(k, str) and isinstance(w, str) for k, w in v.items()),
        "a table of environment variables with string values",
    ),
    ("run_plan", "timeout_s"): (lambda v: 0 < v <= 86400, "1 to 86400 seconds"),
    ("run_plan", "max_parallel"): (lambda v: 1 <= v <= 64, "1 to 64"),
    ("ulysses", "checkpoint_max_file_mb"): (lambda v: 0 < v <= 4096, "1 to 4096 megabytes"),
    ("protocols", "mcp_server_name"): (
        lambda v: 0 < len(v) <= 64 and all(c.isascii() and (c.isalnum() or c in "_-") for c in v),
        "1 to 64 letters, digits, '_' or '-'",
    ),
}

# Top-level keys accepted only in the user's own file.
USER_KEYS: dict[str, tuple[tuple[type, ...], Any]] = {"user_id": ((str,), None)}
# Keys that pick an executable: never taken from the tracked team file.
EXECUTABLE_KEYS: frozenset[tuple[str, str]] = frozenset(
    {
        ("validators", "python"),
        ("validators", "node"),
        ("validators", "shell"),
        ("validators", "path"),
        ("run_plan", "worker"),
        ("run_plan", "env"),
    }
)
# A validator must end before the host abandons the tool call that runs it.
BUDGET_MARGIN_S = 5


def defaults() -> dict[str, Any]:
    """Every section and key at its default, in fresh containers."""
    config: dict[str, Any] = {
        section: {key: _fresh(spec[1]) for key, spec in keys.items()}
        for section, keys in SCHEMA.items()
    }
    config.update({key: spec[1] for key, spec in USER_KEYS.items()})
    return config


def merged(files: list[tuple[str, str, bytes]]) -> dict[str, Any]:
    """The defaults overlaid by each ``(path, layer, bytes)``, lowest first, checked. The
    bytes are what ``kernel.config`` read (and keyed its cache by): a file is never opened
    twice, so what is merged is what was digested."""
    config = defaults()
    for path, layer, data in files:
        _overlay(config, _read(path, data), path, layer)
    _check_budget(config, files[-1][0])
    return config


def _fresh(value: Any) -> Any:
    if isinstance(value, dict):
        return dict(value)
    return list(value) if isinstance(value, list) else value


def _read(path: str, data: bytes) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(data.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _invalid(path, "", f"cannot be read as TOML: {exc}") from exc


def _overlay(config: dict[str, Any], data: dict[str, Any], path: str, layer: str) -> None:
    for section, values in data.items():
        if section in USER_KEYS and layer == "user":
            _check_type(path, section, values, USER_KEYS[section][0])
            config[section] = values
            continue
        if section not in SCHEMA or not isinstance(values, dict):
            raise _invalid(path, section, "unknown section")
        for key, value in values.items():
            spec = SCHEMA[section].get(key)
            if spec is None:
                raise _invalid(path, f"{section}.{key}", "unknown key")
            if (section, key) in EXECUTABLE_KEYS and layer == "team":
                raise _invalid(
                    path, f"{section}.{key}", "chooses an executable; set it in the local file"
                )
            _check_type(path, f"{section}.{key}", value, spec[0])
            check = VALUE_CHECKS.get((section, key))
            if check is not None and not check[0](value):
                raise _invalid(path, f"{section}.{key}", f"must be {check[1]}")
            if isinstance(value, dict):
                config[section][key] = {**config[section][key], **value}
            else:
                config[section][key] = value


def _check_budget(config: dict[str, Any], path: str) -> None:
    validators = config["validators"]
    budget = validators["timeout_s"] + validators["grace_s"] + BUDGET_MARGIN_S
    if budget >= config["mcp"]["tool_timeout_s"]:
        raise _invalid(
            path,
            "validators.timeout_s",
            f"plus grace_s and {BUDGET_MARGIN_S} s must stay under mcp.tool_timeout_s "
            f"({config['mcp']['tool_timeout_s']} s), so a validator ends before the host "
            "abandons the tool call",
        )


def _check_type(path: str, name: str, value: Any, types: tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in types:
        raise _invalid(path, name, "wrong type")
    if not isinstance(value, types):
        raise _invalid(path, name, f"must be {' or '.join(t.__name__ for t in types)}")


def _invalid(path: str, name: str, problem: str) -> InvalidInput:
    return InvalidInput(
        "INVALID_CONFIG", f"{path}: {name or 'file'} {problem}", {"path": str(path), "key": name}
    )
