"""The scope contract a review is bound to, and the texts the reviewer receives
(docs/ultragoal.md, "Operations").

Review cannot enlarge the approved objective. So the reviewer is handed exactly the
approved scope — the five content slots and the confirmed stories — and its artifact must
name the SHA-256 of that contract; a contract that changed since (a re-plan, a revised
story, a new validator binding) makes the review stale. The digest is over RFC 8785
canonical JSON, so it does not depend on key order (unlike the original's
``JSON.stringify``, whose digests therefore differ from these).
"""

from __future__ import annotations

from ithaca.kernel import canon

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

SLOTS = ("outcome", "verification_surface", "constraints", "boundaries", "non_goals")
NONE_PROVIDED = "(none provided)"


def scope_contract(row: dict[str, Any], stories: list[dict[str, Any]]) -> dict[str, Any]:
    """The content slots and the confirmed stories, sorted by id (code-point order)."""
    confirmed = sorted(
        (story for story in stories if story["status"] == "confirmed"), key=lambda s: s["id"]
    )
    entries = []
    for story in confirmed:
        entry = {
            "id": story["id"],
            "story": story["story"],
            "acceptance_criteria": list(story["acceptance_criteria"]),
            "verification_surface": story["verification_surface"],
            "status": story["status"],
        }
        if story.get("validator"):
            entry["validator"] = story["validator"]["snapshot_sha256"]
        entries.append(entry)
    return {**{slot: row[slot] for slot in SLOTS}, "stories": entries}


def scope_digest(row: dict[str, Any], stories: list[dict[str, Any]]) -> str:
    return canon.digest(scope_contract(row, stories))


def requirements(row: dict[str, Any], stories: list[dict[str, Any]]) -> str:
    """One line per confirmed story, else one for the outcome, else nothing."""
    confirmed = [story for story in stories if story["status"] == "confirmed"]
    if confirmed:
        return "\n".join(
            f"[{story['id']}] {story['story']} — AC: {'; '.join(story['acceptance_criteria'])}"
            f" — verify: {story['verification_surface']}"
            for story in confirmed
        )
    outcome = row["outcome"]
    if not outcome.strip():
        return ""
    check = row["verification_surface"] if row["verification_surface"].strip() else outcome
    return f"[outcome] {outcome} — AC: {check} — verify: {check}"


def review_context(row: dict[str, Any], stories: list[dict[str, Any]]) -> dict[str, str]:
    """The five fields the reviewer receives, blanks as ``(none provided)``."""
    description = "\n\n".join(
        part
        for part in (row["resume_summary"], f"plan: {row['plan_path']}" if row["plan_path"] else "")
        if part.strip()
    )
    contract = scope_contract(row, stories)
    sealed = canon.canonical_text({**contract, "scope_contract_sha256": canon.digest(contract)})
    sealed_block = f"[SCOPE_CONTRACT]\n{sealed}\n[/SCOPE_CONTRACT]"
    project_context = "\n\n".join(
        part for part in (row["constraints"], row["boundaries"], sealed_block) if part.strip()
    )
    fields = {
        "what_was_implemented": row["outcome"],
        "description": description,
        "requirements": requirements(row, stories),
        "project_context": project_context,
        "non_goals": row["non_goals"],
    }
    return {name: value if value.strip() else NONE_PROVIDED for name, value in fields.items()}
