"""Whether an override may replace a base protocol: it must apply wherever the base does.

Base protocols are Ithaca's guarantees, so a user's override (from the CLI, the Python API
or a protocol file) may change what a base record says but not where it applies: it stays
enabled, and its selector covers every event the base's covers. Both records are already
valid (``validate``); this judges the pair and refuses with ``BASE_LOCKED`` or
``OVERRIDE_NARROWS_SELECTOR``.
"""

from __future__ import annotations

from ithaca.kernel.errors import Refused

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def check_override(seed: dict[str, Any], override: dict[str, Any]) -> None:
    """Refuse an override of a base record that would apply to fewer events, or none.

    Its selector must cover every event the seed's covers: each key it sets must also be
    set by the seed, and the seed's values for that key must all be among its own. An
    override is also always enabled.
    """
    if not override.get("enabled", True):
        raise Refused(
            "BASE_LOCKED",
            f"{override.get('id')}: an override of a base protocol cannot be disabled",
            {"id": override.get("id")},
        )
    seed_selector = seed["selector"]
    for key, value in override["selector"].items():
        wanted = _as_set(value)
        if key not in seed_selector:
            raise _narrows(key, None, value, f"the base protocol matches any {key}")
        missing = _as_set(seed_selector[key]) - wanted
        if missing:
            raise _narrows(
                key,
                seed_selector[key],
                value,
                f"the base protocol also matches {key} {sorted(missing)}",
            )


def _narrows(key: str, seed_value: Any, override_value: Any, why: str) -> Refused:
    return Refused(
        "OVERRIDE_NARROWS_SELECTOR",
        f"/selector/{key}: an override may not narrow the base selector; {why}",
        {"pointer": f"/selector/{key}", "seed": seed_value, "override": override_value},
    )


def _as_set(value: str | list[str]) -> set[str]:
    return {value} if isinstance(value, str) else set(value)
