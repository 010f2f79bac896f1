"""Which reviewer the host would start, and whether it is the one Ithaca installed.

The hook claims a review dispatch by the name the agent gives its subagent, but the host
starts whatever definition it resolves that name to, and those definitions are files an
agent can write. Measured in the pinned hosts (docs/ultragoal.md, "Who the reviewer is"):

- Claude Code 2.1.332 resolves ``subagent_type`` by the definitions' ``name:`` front
  matter (never the file name), an exact match first and otherwise case-insensitively
  (``Code-Reviewer`` starts ``code-reviewer``); it reads ``.claude/agents/`` recursively,
  and of two project files with the same name either may win. A project definition beats
  a user-level one (``~/.claude/agents``). A plugin's agents are ``<plugin>:<name>``
  (``ithaca:code-reviewer``, resolved case-insensitively too), and a project file cannot
  take that name. Hook payloads of the subagent's calls carry ``agent_id`` and
  ``agent_type``, the definition's own name (``code-reviewer`` whatever spelling started it).
- Codex 0.169.0 resolves ``spawn_agent``'s ``agent_type`` by the role files' ``name``,
  case-sensitively; another project role file with the same name wins over the installed
  one. The subagent's hook payloads carry ``agent_id`` (its thread) and ``agent_type``.

So every spelling the host could resolve to the reviewer is claimed (and started under
its canonical name), and the claim is refused when any definition other than the
installed one carries the reviewer's name (``REVIEWER_DEFINITION_SHADOWED``) or the
installed one is not as the install manifest records it (``REVIEWER_DEFINITION_CHANGED``).
Standard library and light modules only (hook path).
"""

from __future__ import annotations

import os

from ithaca.kernel import lightjson
from ithaca.kernel.canon import sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.kernel.gates import GateContext

SHIPPED = "code-reviewer"  # the reviewer Ithaca ships and installs
PLUGIN = "ithaca"  # the Ithaca plugin's name: Claude Code knows its agents as ``ithaca:…``
CLAUDE_AGENTS = ".claude/agents"
CODEX_AGENTS = ".codex/agents"


def resolves_to_reviewer(name: object, reviewer: str) -> bool:
    """Whether a delegate call's agent type can start the reviewer: its name or the
    plugin's, in any case (Claude Code matches case-insensitively)."""
    if not isinstance(name, str):
        return False
    wanted = {reviewer.casefold(), f"{PLUGIN}:{reviewer}".casefold()}
    return name.casefold() in wanted


def canonical(name: str, reviewer: str) -> str:
    """The spelling the reviewer is started under: the plugin's name when the agent named
    the plugin, else the installed name."""
    return f"{PLUGIN}:{reviewer}" if ":" in name else reviewer


def expected_agent_type(ctx: GateContext) -> str:
    """The ``agent_type`` the host puts in the reviewer's hook payloads: its definition's
    name, the plugin's spelling where Claude Code runs Ithaca as a plugin."""
    reviewer: str = ctx.config["ultragoal"]["reviewer_agent_type"]
    if ctx.host == "claude" and ctx.project is not None and _claude_mode(ctx) == "plugin":
        return f"{PLUGIN}:{reviewer}"
    return reviewer


def is_reviewer_caller(ctx: GateContext) -> bool:
    """Whether this hook call comes from inside the reviewer subagent, by the host's own
    identity in the payload (``agent_id`` and ``agent_type``), never by anything the agent
    wrote."""
    agent_id = ctx.payload.get("agent_id")
    if not isinstance(agent_id, str) or not agent_id:
        return False
    return ctx.payload.get("agent_type") == expected_agent_type(ctx)


def problem(ctx: GateContext, name: str) -> tuple[str, str] | None:
    """Why the definition the host would start for ``name`` may not be briefed as the
    reviewer: ``(code, message)``, or None when it is the one Ithaca installed."""
    assert ctx.project is not None
    reviewer: str = ctx.config["ultragoal"]["reviewer_agent_type"]
    if ctx.host == "codex":
        return _codex(ctx.project.root, ctx.project.runtime, reviewer)
    if ":" in name or _claude_mode(ctx) == "plugin":
        return _claude_plugin(ctx.project.root, reviewer)
    return _claude_install(ctx.project.root, ctx.project.runtime, reviewer)


# --- Claude Code ---------------------------------------------------------------------------


def _claude_mode(ctx: GateContext) -> str:
    """``install`` where ``ithaca install claude`` recorded the reviewer, else ``plugin``."""
    assert ctx.project is not None
    listed = _manifest_agents(ctx.project.runtime, "claude")
    return "install" if listed else "plugin"


def _claude_install(root: str, runtime: str, reviewer: str) -> tuple[str, str] | None:
    named = _named(_claude_definitions(os.path.join(root, CLAUDE_AGENTS)), reviewer)
    installed = _manifest_agents(runtime, "claude").get(f"{CLAUDE_AGENTS}/{reviewer}.md")
    return _judge(root, named, installed, reviewer, f"{CLAUDE_AGENTS}/{reviewer}.md")


def _claude_plugin(root: str, reviewer: str) -> tuple[str, str] | None:
    """The plugin's reviewer: its copy must be the one this Ithaca makes, and no project or
    user definition may claim its name (or the bare name, which the hook also claims)."""
    folders = [os.path.join(root, CLAUDE_AGENTS), os.path.join(_claude_home(), "agents")]
    others = [path for folder in folders for path in _claude_definitions(folder)]
    taken = _named(others, reviewer) + _named(others, f"{PLUGIN}:{reviewer}")
    if taken:
        return _shadowed(root, taken, reviewer)
    copy = _plugin_copy(reviewer)
    if copy is None:
        return (
            "REVIEWER_DEFINITION_CHANGED",
            f"Ultragoal: no Ithaca install or plugin provides the reviewer {reviewer!r} here,"
            " so Ithaca cannot tell which definition the host would start. Ask the user to"
            " run `ithaca install claude` (or to install the Ithaca plugin).",
        )
    if reviewer != SHIPPED:
        return None  # a reviewer the user provides is theirs to protect
    from ithaca.hosts import agent_bytes

    with open(copy, "rb") as handle:
        if handle.read() != agent_bytes(reviewer):
            return _changed(copy)
    return None


def _plugin_copy(reviewer: str) -> str | None:
    """The Ithaca plugin's copy of the reviewer, from Claude Code's record of installed
    plugins, or None."""
    record = os.path.join(_claude_home(), "plugins", "installed_plugins.json")
    try:
        with open(record, encoding="utf-8") as handle:
            plugins = lightjson.loads(handle.read()).get("plugins", {})
    except (OSError, ValueError, AttributeError):
        return None
    for plugin_id, entries in plugins.items() if isinstance(plugins, dict) else ():
        if plugin_id.split("@", 1)[0] != PLUGIN or not isinstance(entries, list):
            continue
        for entry in entries:
            path = entry.get("installPath") if isinstance(entry, dict) else None
            if isinstance(path, str):
                found = os.path.join(path, "agents", f"{reviewer}.md")
                if os.path.isfile(found):
                    return found
    return None


def _claude_home() -> str:
    return os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")


def _claude_definitions(folder: str) -> list[tuple[str, str]]:
    """``(path, name)`` of each agent file under ``folder`` (recursively, as Claude Code
    reads it), its name from the front matter."""
    found = []
    for path in _files(folder, ".md"):
        found.append((path, _front_matter_name(path)))
    return found


def _front_matter_name(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(65536)
    except OSError:
        return ""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return ""
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, colon, value = line.partition(":")
        if colon and key.strip() == "name":
            return value.strip().strip("'\"")
    return ""


# --- Codex ---------------------------------------------------------------------------------


def _codex(root: str, runtime: str, reviewer: str) -> tuple[str, str] | None:
    home = os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")
    roles = [
        *_codex_roles(os.path.join(root, CODEX_AGENTS)),
        *_codex_roles(os.path.join(home, "agents")),
    ]
    named = _named(roles, reviewer)
    for config in (os.path.join(root, ".codex", "config.toml"), os.path.join(home, "config.toml")):
        if reviewer.casefold() in {name.casefold() for name in _config_roles(config)}:
            named.append(config)
    installed = _manifest_agents(runtime, "codex").get(f"{CODEX_AGENTS}/{reviewer}.toml")
    return _judge(root, named, installed, reviewer, f"{CODEX_AGENTS}/{reviewer}.toml")


def _codex_roles(folder: str) -> list[tuple[str, str]]:
    import tomllib

    found = []
    for path in _files(folder, ".toml"):
        try:
            with open(path, "rb") as handle:
                name = tomllib.load(handle).get("name")
        except (OSError, ValueError):
            name = None
        stem = os.path.splitext(os.path.basename(path))[0]
        found.append((path, name if isinstance(name, str) else stem))
    return found


def _config_roles(path: str) -> list[str]:
    """The roles a Codex config file defines itself (``[agents.<name>]``)."""
    import tomllib

    try:
        with open(path, "rb") as handle:
            agents = tomllib.load(handle).get("agents")
    except (OSError, ValueError):
        return []
    return (
        [name for name, value in agents.items() if isinstance(value, dict)]
        if isinstance(agents, dict)
        else []
    )


# --- shared --------------------------------------------------------------------------------


def _judge(
    root: str,
    named: list[str],
    installed: str | None,
    reviewer: str,
    relpath: str,
) -> tuple[str, str] | None:
    """Exactly one definition may carry the reviewer's name: the installed file, with the
    digest the install manifest recorded (a reviewer the user provides: any one file)."""
    path = os.path.join(root, relpath)
    others = [found for found in named if not _same(found, path)]
    if others:
        return _shadowed(root, others, reviewer)
    if installed is None:
        if reviewer == SHIPPED or not named:
            return (
                "REVIEWER_DEFINITION_CHANGED",
                f"Ultragoal: the install manifest records no reviewer {reviewer!r} for this"
                " host, so Ithaca cannot tell which definition the host would start. Ask the"
                " user to run `ithaca install` for this host.",
            )
        return None  # a reviewer the user provides is theirs to protect
    try:
        with open(path, "rb") as handle:
            digest = sha256(handle.read()).hexdigest()
    except OSError:
        digest = None
    if digest != installed:
        return _changed(relpath)
    return None


def _shadowed(root: str, paths: list[str], reviewer: str) -> tuple[str, str]:
    shown = ", ".join(_shown(root, path) for path in sorted(paths))
    return (
        "REVIEWER_DEFINITION_SHADOWED",
        f"Ultragoal: {shown} also defines a subagent named {reviewer!r} (names match in any"
        " case), so the host might start it instead of the reviewer Ithaca installed. The"
        " review dispatch is refused: ask the user to remove or rename that definition.",
    )


def _changed(path: str) -> tuple[str, str]:
    return (
        "REVIEWER_DEFINITION_CHANGED",
        f"Ultragoal: the reviewer definition {path} is not the one Ithaca installed, so the"
        " review dispatch is refused. Ask the user to restore it (`ithaca install` again).",
    )


def _named(found: list[tuple[str, str]], name: str) -> list[str]:
    return [path for path, named in found if named.casefold() == name.casefold()]


def _same(one: str, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _shown(root: str, path: str) -> str:
    inside = os.path.relpath(path, root)
    return path if inside.startswith("..") else inside


def _files(folder: str, suffix: str) -> list[str]:
    found = []
    for top, folders, names in os.walk(folder, followlinks=True):
        folders.sort()
        found += [os.path.join(top, n) for n in sorted(names) if n.lower().endswith(suffix)]
    return found


def _manifest_agents(runtime: str, host: str) -> dict[str, str]:
    """``{relpath: sha256}`` of the agent files the host's install manifest records."""
    path = os.path.join(runtime, "installs", f"{host}.json")
    try:
        with open(path, encoding="utf-8") as handle:
            listed = lightjson.loads(handle.read()).get("agents", [])
    except (OSError, ValueError, AttributeError):
        return {}
    return (
        {
            str(item["path"]): str(item["sha256"])
            for item in listed
            if isinstance(item, dict) and "path" in item and "sha256" in item
        }
        if isinstance(listed, list)
        else {}
    )
