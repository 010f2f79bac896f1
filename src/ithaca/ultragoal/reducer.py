"""The review lane in code: the artifact schema and the reducer (docs/ultragoal.md, "Operations").

The reviewer's artifact is data, not a verdict: code decides what it means. A finding is
admitted only with scope evidence that names the approved contract; out-of-scope
findings become notes, uncertain ones go to the user for adjudication and are never
repaired, confirmed in-scope findings are repaired by priority (HIGH blocks and needs a
fresh review, MEDIUM is fixed and resolved with hash-bound evidence, LOW is a note).
The reducer reports one verdict — APPROVE, COMMENT or REQUEST_CHANGES — and, when the
artifact cannot be used at all, REQUEST_CHANGES with the reason, checked in a fixed
order so the same input always gives the same answer.
"""

from __future__ import annotations

from ithaca.kernel import canon
from ithaca.ultragoal.contract import SLOTS, scope_digest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

CLASSES = ("correctness", "regression", "cleanup", "requirement-gap")
LEVELS = ("HIGH", "MEDIUM", "LOW")
BASES = {
    "IN_SCOPE": ("requirement", "regression"),
    "OUT_OF_SCOPE": ("non_goal", "unrelated"),
    "UNKNOWN": ("uncertain",),
}
ASSESSMENT_KEYS = ("unfixed_cost", "exposure", "remedy", "added_cost", "rationale")
ARTIFACT_KEYS = frozenset(
    {
        "status",
        "scope_contract_sha256",
        "findings",
        "reviewer",
        "at",
        "findings_report",
        "files_read",
    }
)
MAX_FILES_READ = 2000
FINDING_KEYS = frozenset(
    {"class", "verdict", "impact", "priority", "assessment", "scope", "scope_evidence", "ref"}
)
# Which slots a basis may cite (a confirmed story id is accepted where ``True``).
BASIS_REFERENCES: dict[str, tuple[tuple[str, ...], bool]] = {
    "requirement": (("outcome", "verification_surface"), True),
    "regression": (("constraints", "boundaries", "outcome"), True),
    "non_goal": (("non_goals",), False),
    "unrelated": (("outcome",), False),
    "uncertain": (SLOTS, True),
}

# Reasons an artifact cannot be reduced, in the order they are checked, with the code the
# completion gate reports for each.
NOT_PURSUING = "no active pursuing parent"
MISSING = "missing or invalid review artifact"
STALE = "stale scope contract"
BAD_SCOPE_EVIDENCE = "invalid scope evidence"
INCONCLUSIVE = "inconclusive review"
REASON_CODES = {
    MISSING: "REVIEW_MISSING",
    STALE: "REVIEW_SCOPE_STALE",
    BAD_SCOPE_EVIDENCE: "REVIEW_SCOPE_EVIDENCE_INVALID",
    INCONCLUSIVE: "REVIEW_INCONCLUSIVE",
}


def artifact_problem(value: Any) -> tuple[str, str] | None:
    """``(json_pointer, problem)`` for the first schema violation, or None when valid."""
    if not isinstance(value, dict):
        return "", "the artifact must be an object"
    for key in value:
        if key not in ARTIFACT_KEYS:
            return f"/{key}", "unknown key"
    for key in ("status", "scope_contract_sha256", "findings", "reviewer", "at"):
        if key not in value:
            return f"/{key}", "required"
    if value["status"] not in ("COMPLETE", "INCONCLUSIVE"):
        return "/status", "must be COMPLETE or INCONCLUSIVE"
    if not is_sha256(value["scope_contract_sha256"]):
        return "/scope_contract_sha256", "must be 64 lowercase hex digits"
    if not _text(value["reviewer"]):
        return "/reviewer", "must be a non-blank string"
    if not isinstance(value["at"], str):
        return "/at", "must be a string"
    if "findings_report" in value and not isinstance(value["findings_report"], str):
        return "/findings_report", "must be a string"
    if not isinstance(value["findings"], list):
        return "/findings", "must be a list"
    complete = value["status"] == "COMPLETE"
    if complete and "files_read" not in value:
        return "/files_read", "required: a COMPLETE review cites the files it read"
    problem = _files_read_problem(value.get("files_read", []))
    if problem is not None:
        return problem
    for index, finding in enumerate(value["findings"]):
        problem = _finding_problem(finding, complete)
        if problem is not None:
            return f"/findings/{index}{problem[0]}", problem[1]
    return None


def _files_read_problem(files: Any) -> tuple[str, str] | None:
    """``files_read``: ``[{path, sha256}]``, a sha256 or null (a deleted file) each."""
    if not isinstance(files, list) or len(files) > MAX_FILES_READ:
        return "/files_read", f"must be a list of at most {MAX_FILES_READ} {{path, sha256}}"
    for index, item in enumerate(files):
        at = f"/files_read/{index}"
        if not isinstance(item, dict) or set(item) != {"path", "sha256"}:
            return at, "must be an object with exactly path and sha256"
        path = item["path"]
        if not _text(path) or path.startswith("/") or "\0" in path:
            return f"{at}/path", "must be a path relative to the project root"
        if item["sha256"] is not None and not is_sha256(item["sha256"]):
            return f"{at}/sha256", "must be 64 lowercase hex digits, or null for a deleted file"
    return None


def _finding_problem(finding: Any, complete: bool) -> tuple[str, str] | None:
    if not isinstance(finding, dict):
        return "", "a finding must be an object"
    for key in finding:
        if key not in FINDING_KEYS:
            return f"/{key}", "unknown key"
    required = ["class", "verdict", "impact", "scope", "scope_evidence"]
    if complete:
        required += ["priority", "assessment"]
    for key in required:
        if key not in finding:
            return f"/{key}", "required"
    choices = {
        "class": CLASSES,
        "verdict": ("CONFIRMED", "PLAUSIBLE"),
        "impact": LEVELS,
        "scope": tuple(BASES),
    }
    if "priority" in finding:
        choices["priority"] = LEVELS
    for key, allowed in choices.items():
        if finding[key] not in allowed:
            return f"/{key}", f"must be one of {', '.join(allowed)}"
    if "assessment" in finding:
        assessment = finding["assessment"]
        if not isinstance(assessment, dict) or set(assessment) != set(ASSESSMENT_KEYS):
            return "/assessment", f"must be an object with exactly {', '.join(ASSESSMENT_KEYS)}"
        for key in ASSESSMENT_KEYS:
            if not _text(assessment[key]):
                return f"/assessment/{key}", "must be a non-blank string"
    evidence = finding["scope_evidence"]
    if not isinstance(evidence, dict) or set(evidence) != {"basis", "reference", "rationale"}:
        return "/scope_evidence", "must be an object with exactly basis, reference, rationale"
    if evidence["basis"] not in BASES[finding["scope"]]:
        return "/scope_evidence/basis", f"must be one of {', '.join(BASES[finding['scope']])}"
    for key in ("reference", "rationale"):
        if not _text(evidence[key]):
            return f"/scope_evidence/{key}", "must be a non-blank string"
    if "ref" in finding and not is_ref(finding["ref"]):
        return "/ref", "must be file:line"
    return None


def is_sha256(value: Any) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


def is_ref(value: Any) -> bool:
    """``file:line``: a non-blank file part and a line number."""
    if not isinstance(value, str):
        return False
    file_part, colon, line = value.rpartition(":")
    return bool(colon and file_part.strip() and line.isdigit())


def artifact_sha256(artifact: dict[str, Any]) -> str:
    return canon.digest(artifact)


def reference_valid(finding: dict[str, Any], row: dict[str, Any], confirmed: set[str]) -> bool:
    """Whether a finding's scope evidence cites something the approved scope holds."""
    evidence = finding["scope_evidence"]
    reference = evidence["reference"]
    slots, story_ok = BASIS_REFERENCES[evidence["basis"]]
    if reference in slots:
        return finding["scope"] != "OUT_OF_SCOPE" or bool(row[reference].strip())
    return story_ok and reference in confirmed and finding["scope"] != "OUT_OF_SCOPE"


def classify(finding: dict[str, Any]) -> tuple[str, str]:
    """``(outcome, group)`` of an admitted, undismissed finding."""
    scope = finding["scope"]
    if scope == "OUT_OF_SCOPE":
        return "NOTE", "notes"
    if scope == "UNKNOWN":
        return "BLOCK", "adjudicate"
    if finding["verdict"] == "PLAUSIBLE":
        return "ADJUDICATE", "adjudicate"
    priority = finding.get("priority", finding["impact"])
    if priority == "HIGH":
        return "BLOCK", "repair"
    if priority == "MEDIUM":
        return "FIX", "repair"
    return "NOTE", "notes"


def is_dismissed(finding: dict[str, Any], sha: str, dismissed: set[tuple[str, str, str]]) -> bool:
    return (
        finding["scope"] == "IN_SCOPE"
        and finding["verdict"] == "CONFIRMED"
        and "ref" in finding
        and (sha, finding["ref"], finding["class"]) in dismissed
    )


def reduce(
    row: dict[str, Any] | None,
    stories: list[dict[str, Any]],
    review: dict[str, Any] | None,
    dismissals: list[dict[str, Any]],
    *,
    require_pursuing: bool = True,
) -> dict[str, Any]:
    """``{verdict, artifact_sha256, reason?, findings, resolution?}`` for the session."""
    sha = review["artifact_sha256"] if review else ""
    groups: dict[str, list[dict[str, Any]]] = {"repair": [], "adjudicate": [], "notes": []}
    reason = _unusable(row, stories, review, require_pursuing)
    if reason is not None or row is None or review is None:
        return {
            "verdict": "REQUEST_CHANGES",
            "artifact_sha256": sha,
            "reason": reason,
            "findings": groups,
        }
    dismissed = {(d["artifact_sha256"], d["ref"], d["class"]) for d in dismissals}
    for index, finding in enumerate(review["artifact"]["findings"]):
        if is_dismissed(finding, sha, dismissed):
            continue
        outcome, group = classify(finding)
        groups[group].append({"index": index, "outcome": outcome, **finding})
    blocking = groups["adjudicate"] or any(item["outcome"] == "BLOCK" for item in groups["repair"])
    if blocking:
        verdict = "REQUEST_CHANGES"
    elif any(groups.values()):
        verdict = "COMMENT"
    else:
        verdict = "APPROVE"
    result: dict[str, Any] = {"verdict": verdict, "artifact_sha256": sha, "findings": groups}
    resolution = row.get("review_resolution")
    if resolution and resolution.get("artifact_sha256") == sha:
        result["resolution"] = resolution
    return result


def _unusable(
    row: dict[str, Any] | None,
    stories: list[dict[str, Any]],
    review: dict[str, Any] | None,
    require_pursuing: bool,
) -> str | None:
    if require_pursuing and (row is None or row["phase"] != "pursuing" or not row["active"]):
        return NOT_PURSUING
    if row is None or review is None or artifact_problem(review["artifact"]) is not None:
        return MISSING
    if artifact_sha256(review["artifact"]) != review["artifact_sha256"]:
        return MISSING
    artifact = review["artifact"]
    if artifact["scope_contract_sha256"] != scope_digest(row, stories):
        return STALE
    confirmed = {story["id"] for story in stories if story["status"] == "confirmed"}
    if not all(reference_valid(f, row, confirmed) for f in artifact["findings"]):
        return BAD_SCOPE_EVIDENCE
    if artifact["status"] == "INCONCLUSIVE":
        return INCONCLUSIVE
    return None


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())
