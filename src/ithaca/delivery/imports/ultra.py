"""An Ultra Builder Pro project: its ``.ultra/`` folder (0.24 layout).

Ultra Builder Pro's team checkpoint ``.ultra/tasks/tasks.json`` (``kind:
"ultra-team-task-ledger"``, ``schema_version`` ``"2.0"``; ``"1.0"`` lacks decisions and
checkpoints) holds its changes, task contracts and accepted stage checkpoints; the full
Decision Records are the files ``.ultra/decisions/baseline/<id>.json`` and
``.ultra/changes/active/<change>/decisions/<id>.json``. Ithaca's delivery model descends
from this one, so most fields carry over as they are:

- a change keeps its id (as a lowercase slug), kind, title, intent, contract (without
  ``unresolved_decisions``), classification and research disposition status; archived
  and cancelled changes are finished work, not imported;
- a task keeps its id, title, type, priority, dependencies, declared files, acceptance
  (a criterion's ``verification`` text appended to it), parent and change;
  ``verification_command`` runs as ``sh -c``; ``outcome``, ``public_seam``,
  ``slice_kind`` and ``trace_to`` go into the description; ``completed`` tasks are not
  imported; tasks of no change stay of no change;
- a decision becomes a Decision Record ``dec-<id>`` in the same scope, the superseded
  ones first, its Ultra file named in ``provenance.evidence_refs``;
- an accepted checkpoint of stage research, plan, dev, test, review or deliver becomes
  an accepted Ithaca checkpoint of the same scope; Ultra's ``init`` and ``change``
  stages have no counterpart, nor do its evidence files (they live in the Ultra tree).

Ultra's record digests are not re-verified: it hashes ``JSON.stringify`` output, whose
key order Ithaca cannot reproduce (a defect the delivery reference names).
"""

from __future__ import annotations

import os
from typing import Any

from ithaca.delivery import layout
from ithaca.delivery.contract import diagnostic
from ithaca.delivery.imports import shared
from ithaca.delivery.imports.shared import Checkpoint, Cuts, Decision, Source, Task, Unit
from ithaca.delivery.records import decisions as decision_records
from ithaca.kernel import canon
from ithaca.kernel.errors import InvalidInput, IthacaError

FORMAT = "ultra"
NAME = "Ultra Builder Pro"
LEDGER_KIND = "ultra-team-task-ledger"
VERSIONS = ("1.0", "2.0")
KINDS = ("quick", "standard", "major", "incident")
STAGES = ("research", "plan", "dev", "test", "review", "deliver")
NO_CHANGE = "(no change)"
DATA_BYTES = 32 * 1024


def locate(path: str, forced: bool = False) -> str | None:
    """The team checkpoint file ``.ultra/tasks/tasks.json`` at or under ``path``."""
    if shared.is_file(path):
        return path if forced or _sniff(path) else None
    base = os.path.basename(os.path.normpath(path))
    candidates = [os.path.join(path, ".ultra", "tasks", "tasks.json")]
    if base == ".ultra":
        candidates.insert(0, os.path.join(path, "tasks", "tasks.json"))
    for candidate in candidates:
        if shared.is_file(candidate):
            return candidate
    return None


def _sniff(path: str) -> bool:
    try:
        with open(path, "rb") as stream:
            return LEDGER_KIND.encode() in stream.read(4096)
    except OSError:
        return False


def read(path: str) -> Source:
    ledger = locate(path, forced=True)
    if ledger is None:
        raise shared.nothing_found(
            path,
            NAME,
            "point at the project folder holding .ultra/, at .ultra/ or at its tasks/tasks.json",
        )
    value = shared.read_json(ledger, NAME)
    if not isinstance(value, dict) or value.get("kind") != LEDGER_KIND:
        raise shared.invalid(ledger, "kind", f"is not {LEDGER_KIND!r}", NAME)
    version = value.get("schema_version")
    if version not in VERSIONS:
        raise InvalidInput(
            "IMPORT_FORMAT_UNSUPPORTED",
            f"{ledger} is an Ultra Builder Pro ledger of schema_version {version!r}; this"
            f" import reads {' and '.join(VERSIONS)}. Migrate it with Ultra Builder Pro's"
            " `ultra sync migrate` first, or import an older copy",
            {"path": ledger, "schema_version": version},
        )
    folder = _ultra_folder(ledger)
    source = Source(FORMAT, NAME, ".ultra/tasks/tasks.json", global_task_ids=True)
    cuts = Cuts()
    units = {}
    for index, raw in enumerate(_list(ledger, value, "changes")):
        unit = _change(ledger, raw, f"changes[{index}]", cuts)
        if unit.peer_id in units:
            raise shared.invalid(ledger, f"changes[{index}].id", "appears twice", NAME)
        units[unit.peer_id] = unit
        source.units.append(unit)
    loose = Unit(NO_CHANGE, None, "", "")
    for index, raw in enumerate(_list(ledger, value, "tasks")):
        task, owner = _task(ledger, raw, f"tasks[{index}]", cuts)
        if owner is None:
            loose.tasks.append(task)
        elif owner in units:
            units[owner].tasks.append(task)
        else:
            raise shared.invalid(
                ledger,
                f"tasks[{index}].change_id",
                f"names change {owner!r}, not in the ledger",
                NAME,
            )
    if loose.tasks:
        source.units.append(loose)
    if folder is not None:
        source.decisions = _decisions(folder, units, source, cuts)
    else:
        source.notes.append(
            diagnostic(
                "IMPORT_DECISIONS_NOT_FOUND",
                "warning",
                f"{ledger} is not inside a .ultra/ folder, so its Decision Record files"
                " could not be read; import the project folder to bring the decisions too",
            )
        )
    if version == "2.0":
        source.checkpoints = _checkpoints(ledger, value, units, source, cuts)
    source.notes += cuts.note(NAME)
    return source


def _ultra_folder(ledger: str) -> str | None:
    tasks = os.path.dirname(os.path.abspath(ledger))
    folder = os.path.dirname(tasks)
    if os.path.basename(tasks) == "tasks" and os.path.basename(folder) == ".ultra":
        return folder
    return None


def _list(ledger: str, value: dict[str, Any], name: str) -> list[Any]:
    found = value.get(name, [])
    if not isinstance(found, list):
        raise shared.invalid(ledger, name, "is not a list", NAME)
    return found


def _text(raw: dict[str, Any], name: str) -> str | None:
    value = raw.get(name)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _required(ledger: str, raw: Any, where: str, name: str) -> str:
    if not isinstance(raw, dict):
        raise shared.invalid(ledger, where, "is not an object", NAME)
    value = _text(raw, name)
    if value is None:
        raise shared.invalid(ledger, f"{where}.{name}", "is missing", NAME)
    return value


# --- changes ---------------------------------------------------------------------------------


def _change(ledger: str, raw: Any, where: str, cuts: Cuts) -> Unit:
    peer_id = _required(ledger, raw, where, "id")
    title, _ = shared.title_and_rest(_text(raw, "title") or shared.humanize(peer_id))
    line = f"Imported from Ultra Builder Pro change `{peer_id}` (`.ultra/tasks/tasks.json`)."
    intent = cuts.cut(
        (_text(raw, "intent") or f"# {title}") + _unresolved(raw.get("contract")),
        shared.INTENT_CHARS - len(line) - 8,
        f"{peer_id} intent",
    )
    kind = raw.get("kind") if raw.get("kind") in KINDS else "standard"
    unit = Unit(peer_id, shared.change_id(peer_id), title, f"{intent}\n\n---\n{line}\n", kind)
    unit.contract = _contract(raw.get("contract"))
    unit.classification = _classification(raw.get("classification"))
    disposition = raw.get("research_disposition")
    if isinstance(disposition, dict) and disposition.get("status") in (
        "none",
        "bounded",
        "required",
    ):
        unit.research_disposition = disposition["status"]
    status = raw.get("status")
    if status in ("archived", "cancelled"):
        unit.finished = f"{status} in Ultra Builder Pro"
    return unit


def _unresolved(contract: Any) -> str:
    """Ultra's ``contract.unresolved_decisions``, which Ithaca's contract has no field
    for, as a section of the intent so that the open questions stay in sight."""
    items = contract.get("unresolved_decisions") if isinstance(contract, dict) else None
    lines = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and isinstance(item.get("summary"), str):
            blocking = " (blocking)" if item.get("blocking") is True else ""
            owner = f", owner {item['owner']}" if isinstance(item.get("owner"), str) else ""
            lines.append(f"- {item.get('id', '?')}: {item['summary'].strip()}{blocking}{owner}")
    if not lines:
        return ""
    return "\n\n## Unresolved decisions (from Ultra Builder Pro)\n\n" + "\n".join(lines)


def _strings(value: Any, limit: int, count: int = 100) -> list[str]:
    if not isinstance(value, list):
        return []
    return [item.strip()[:limit] for item in value if isinstance(item, str) and item.strip()][
        :count
    ]


def _contract(value: Any) -> dict[str, Any]:
    """Ultra's change contract in Ithaca's shape (the same fields but
    ``unresolved_decisions``)."""
    if not isinstance(value, dict):
        return {}
    found: dict[str, Any] = {}
    if isinstance(value.get("outcome"), str):
        found["outcome"] = value["outcome"][:4000]
    acceptance = []
    for index, item in enumerate(value.get("acceptance") or []):
        if (
            isinstance(item, dict)
            and isinstance(item.get("criterion"), str)
            and item["criterion"].strip()
        ):
            entry = {
                "id": str(item.get("id") or f"a{index + 1}")[:64],
                "criterion": item["criterion"].strip()[:2000],
            }
            if isinstance(item.get("verification"), str) and item["verification"].strip():
                entry["verification"] = item["verification"].strip()[:2000]
            acceptance.append(entry)
    if acceptance:
        found["acceptance"] = acceptance[:100]
    for name in ("non_goals", "public_seams"):
        if isinstance(value.get(name), list):
            found[name] = _strings(value[name], 1000)
    recovery = value.get("recovery")
    if isinstance(recovery, dict):
        kept = {
            name: recovery[name].strip()[:2000]
            for name in ("strategy", "verification")
            if isinstance(recovery.get(name), str) and recovery[name].strip()
        }
        if kept:
            found["recovery"] = kept
    return found


def _classification(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return {}
    found: dict[str, Any] = {}
    if isinstance(value.get("rationale"), str) and value["rationale"].strip():
        found["rationale"] = value["rationale"].strip()[:4000]
    if isinstance(value.get("risk_flags"), list):
        found["risk_flags"] = sorted(set(_strings(value["risk_flags"], 64, 50)))
    return found


# --- tasks -------------------------------------------------------------------------------------


def _task(ledger: str, raw: Any, where: str, cuts: Cuts) -> tuple[Task, str | None]:
    peer_id = _required(ledger, raw, where, "id")
    ithaca_id = peer_id if shared.TASK_ID.match(peer_id) else shared.task_id(None, peer_id)
    title, long_title = shared.title_and_rest(_required(ledger, raw, where, "title"))
    facts = [long_title]
    for name, label in (
        ("outcome", "Outcome"),
        ("public_seam", "Public seam"),
        ("slice_kind", "Slice"),
        ("trace_to", "Traces to"),
    ):
        if _text(raw, name):
            facts.append(f"{label}: {_text(raw, name)}")
    line = f"Imported from Ultra Builder Pro task {peer_id}."
    body = cuts.cut(
        "\n".join(fact for fact in facts if fact),
        shared.DESCRIPTION_CHARS - len(line) - 2,
        f"task {peer_id} description",
    )
    command = _text(raw, "verification_command")
    status = _text(raw, "status") or "pending"
    deps = raw.get("deps") or []
    if not isinstance(deps, list) or not all(isinstance(dep, str) for dep in deps):
        raise shared.invalid(ledger, f"{where}.deps", "is not a list of task ids", NAME)
    task = Task(
        peer_id=peer_id,
        id=ithaca_id,
        title=title,
        description=f"{body}\n\n{line}" if body else line,
        deps=list(deps),
        parent=_text(raw, "parent_id"),
        status=status,
        finished=status == "completed",
        acceptance=_acceptance(raw.get("acceptance"), peer_id, cuts),
        verification=["sh", "-c", command]
        if command
        else shared.placeholder_verification(NAME, ithaca_id),
        files=_files(raw.get("files_modified")),
        type=(_text(raw, "type") or "")[:40] or None,
        priority=(_text(raw, "priority") or "")[:32] or None,
    )
    return task, _text(raw, "change_id")


def _acceptance(value: Any, peer_id: str, cuts: Cuts) -> list[tuple[str, str]]:
    found = []
    for index, item in enumerate(value if isinstance(value, list) else []):
        if not isinstance(item, dict) or not isinstance(item.get("criterion"), str):
            continue
        criterion = item["criterion"].strip()
        if isinstance(item.get("verification"), str) and item["verification"].strip():
            criterion = f"{criterion} — verify: {item['verification'].strip()}"
        found.append(
            (
                str(item.get("id") or f"a{index + 1}")[:64],
                cuts.cut(criterion, shared.CRITERION_CHARS, f"task {peer_id} acceptance"),
            )
        )
    return found[: shared.MAX_ACCEPTANCE]


def _files(value: Any) -> list[str]:
    if not isinstance(value, list):
        return []
    found = set()
    for item in value:
        if isinstance(item, str):
            found.update(shared.paths_in(item) if " " in item.strip() else _safe(item.strip()))
    return sorted(found)[: shared.MAX_FILES]


def _safe(path: str) -> list[str]:
    try:
        return [layout.relative(path, "")]
    except IthacaError:
        return []


# --- decisions ---------------------------------------------------------------------------------


def _decisions(folder: str, units: dict[str, Unit], source: Source, cuts: Cuts) -> list[Decision]:
    files: list[tuple[str, str | None]] = [
        (os.path.join(folder, "decisions", "baseline", name), None)
        for name in _json_files(os.path.join(folder, "decisions", "baseline"))
    ]
    active = os.path.join(folder, "changes", "active")
    for name in shared.sorted_dirs(active):
        inner = os.path.join(active, name, "decisions")
        files += [(os.path.join(inner, file), name) for file in _json_files(inner)]
    found: dict[str, Decision] = {}
    for path, change in files:
        decision = _decision(folder, path, change, units, source, cuts)
        if decision is not None:
            found[decision.peer_id] = decision
    for decision in found.values():
        if decision.supersedes is not None and decision.supersedes not in found:
            source.notes.append(
                diagnostic(
                    "IMPORT_SUPERSEDES_DROPPED",
                    "info",
                    f"decision {decision.peer_id} supersedes {decision.supersedes}, which is"
                    " not imported (its change is finished or its file is missing); it is"
                    " recorded without the link",
                    decision.id,
                )
            )
            decision.supersedes = None
    return _supersession_order(found)


def _json_files(folder: str) -> list[str]:
    try:
        return sorted(name for name in os.listdir(folder) if name.endswith(".json"))
    except OSError:
        return []


def _decision(
    folder: str,
    path: str,
    change: str | None,
    units: dict[str, Unit],
    source: Source,
    cuts: Cuts,
) -> Decision | None:
    relative = ".ultra/" + os.path.relpath(path, folder).replace(os.sep, "/")
    raw = shared.read_json(path, NAME)
    peer_id = _required(path, raw, "the record", "id")
    if change is not None:
        unit = units.get(change)
        if unit is None:
            raise shared.invalid(
                path,
                "the record",
                f"belongs to change {change!r}, which the ledger does not hold",
                NAME,
            )
        if unit.finished is not None:
            source.skipped.append(
                {"kind": "decision", "peer_id": peer_id, "reason": f"its change is {unit.finished}"}
            )
            return None
    where = f"decision {peer_id}"
    question = cuts.cut_bytes(
        _required(path, raw, "the record", "question"),
        decision_records.QUESTION_BYTES,
        f"{where} question",
    )
    recommendation = cuts.cut_bytes(
        _required(path, raw, "the record", "recommendation"),
        decision_records.RECOMMENDATION_BYTES,
        f"{where} recommendation",
    )
    selection = raw.get("selection")
    choice = selection if isinstance(selection, str) else None
    if isinstance(selection, dict):
        choice = selection.get("choice") if isinstance(selection.get("choice"), str) else None
    if not choice or not choice.strip():
        raise shared.invalid(
            path, "selection", "is missing (an accepted decision names its choice)", NAME
        )
    provenance = raw.get("provenance") if isinstance(raw.get("provenance"), dict) else {}
    rationale = (
        provenance.get("rationale") if isinstance(provenance.get("rationale"), str) else None
    )
    if isinstance(selection, dict) and isinstance(selection.get("rationale"), str):
        rationale = selection["rationale"]
    supersedes = raw.get("supersedes_id") or raw.get("supersedes")
    return Decision(
        peer_id=peer_id,
        id=_decision_id(peer_id),
        unit=change,
        question=question,
        recommendation=recommendation,
        choice=cuts.cut(choice.strip(), 1000, f"{where} selection"),
        rationale=cuts.cut((rationale or recommendation).strip(), 4000, f"{where} rationale"),
        owner=(_text(raw, "owner") or "unknown")[:200],
        source=_source(_text(raw, "source") or ""),
        effects=_effects(raw.get("effects"), cuts, where),
        non_goals=[
            cuts.cut_bytes(item, decision_records.ITEM_BYTES, f"{where} non-goal")
            for item in _strings(raw.get("non_goals"), 100000, 50)
        ],
        applied_refs=_applied(raw.get("applied_refs")),
        evidence_refs=[relative],
        supersedes=supersedes if isinstance(supersedes, str) and supersedes else None,
    )


def _decision_id(peer_id: str) -> str:
    slug = shared.ascii_slug(peer_id[4:] if peer_id.lower().startswith("dec-") else peer_id)
    slug = slug or shared.short_hash(peer_id)
    if len(slug) > 60:
        slug = f"{slug[:53].rstrip('-')}-{shared.short_hash(peer_id)}"
    return f"dec-{slug}"


def _source(value: str) -> str:
    """Ultra's free-text decision source as Ithaca's ``owner | delegated | agent``."""
    lowered = value.lower()
    if "delegat" in lowered:
        return "delegated"
    if any(word in lowered for word in ("owner", "user", "question", "human")):
        return "owner"
    return "agent"


def _effects(value: Any, cuts: Cuts, where: str) -> list[str]:
    if isinstance(value, list):
        items = _strings(value, 100000, 50)
    elif isinstance(value, dict):
        items = [
            f"{key}: {item if isinstance(item, str) else canon.canonical_text(item)}"
            for key, item in sorted(value.items())
        ][:50]
    else:
        items = []
    return [cuts.cut_bytes(item, decision_records.ITEM_BYTES, f"{where} effect") for item in items]


def _applied(value: Any) -> list[str]:
    found = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, str) and item.strip():
            found.append(item.strip()[:1000])
        elif isinstance(item, dict) and isinstance(item.get("ref"), str):
            ref = item["ref"] + (f"#{item['field']}" if isinstance(item.get("field"), str) else "")
            found.append(ref[:1000])
    return found[:50]


def _supersession_order(found: dict[str, Decision]) -> list[Decision]:
    """The decisions with each after the one it supersedes (else by id)."""
    ordered: list[Decision] = []
    placed: set[str] = set()

    def place(decision: Decision, seen: set[str]) -> None:
        if decision.peer_id in placed or decision.peer_id in seen:
            return
        seen.add(decision.peer_id)
        if decision.supersedes is not None:
            place(found[decision.supersedes], seen)
        placed.add(decision.peer_id)
        ordered.append(decision)

    for peer_id in sorted(found):
        place(found[peer_id], set())
    return ordered


# --- checkpoints ----------------------------------------------------------------------------------


def _checkpoints(
    ledger: str, value: dict[str, Any], units: dict[str, Unit], source: Source, cuts: Cuts
) -> list[Checkpoint]:
    found = []
    dropped_evidence = 0
    for index, raw in enumerate(_list(ledger, value, "checkpoints")):
        stage = _required(ledger, raw, f"checkpoints[{index}]", "stage")
        scope_type = _required(ledger, raw, f"checkpoints[{index}]", "scope_type")
        scope_id = _text(raw, "scope_id")
        peer_id = f"{stage}:{scope_type}:{scope_id or ''}"
        why = _no_counterpart(stage, scope_type, scope_id, units)
        if why is not None:
            source.skipped.append({"kind": "checkpoint", "peer_id": peer_id, "reason": why})
            continue
        payload = raw.get("payload") if isinstance(raw.get("payload"), dict) else {}
        evidence = raw.get("evidence") if isinstance(raw.get("evidence"), list) else []
        revision = raw.get("revision")
        summary = (
            _text(payload, "summary") or f"{stage} checkpoint of {scope_type} {scope_id or ''}"
        )
        tag = f" [imported from Ultra Builder Pro checkpoint {peer_id} r{revision}]"
        summary = cuts.cut_bytes(summary, 4096 - len(tag.encode()), f"checkpoint {peer_id} summary")
        data, kept = _stage_data(stage, payload, evidence, revision)
        dropped_evidence += 0 if kept else len(evidence)
        scope: tuple[str, str | None] = (scope_type, scope_id)
        found.append(Checkpoint(peer_id, stage, scope, summary + tag, data))
    if dropped_evidence:
        source.notes.append(
            diagnostic(
                "IMPORT_EVIDENCE_NOT_BOUND",
                "info",
                f"{dropped_evidence} evidence reference(s) of Ultra Builder Pro checkpoints"
                " name files of the Ultra tree; they are not bound as Ithaca evidence (bind"
                " them with `ithaca record artifact bind` where you need them)",
            )
        )
    return found


def _no_counterpart(
    stage: str, scope_type: str, scope_id: str | None, units: dict[str, Unit]
) -> str | None:
    if stage not in STAGES:
        return f"Ithaca has no {stage!r} stage (its stages: {', '.join(STAGES)})"
    if scope_type not in ("project", "baseline", "change", "task"):
        return f"Ithaca has no {scope_type!r} checkpoint scope"
    if stage == "plan" and scope_type != "change":
        return "Ithaca plans only changes"
    if scope_type in ("change", "task") and not scope_id:
        return f"the {scope_type} scope names no id"
    if scope_type == "change":
        unit = units.get(scope_id or "")
        if unit is None:
            return f"change {scope_id} is not in the ledger"
        if unit.finished is not None:
            return f"its change is {unit.finished}"
    return None


def _stage_data(
    stage: str, payload: dict[str, Any], evidence: list[Any], revision: Any
) -> tuple[dict[str, Any] | None, bool]:
    """The checkpoint's ``data``: the fields Ithaca's stage schema knows (test, review,
    research), else Ultra's payload and evidence kept as they are; and whether the
    evidence references were kept."""
    if stage == "test":
        found: dict[str, Any] = {}
        if payload.get("result") in ("pass", "fail", "partial"):
            found["result"] = payload["result"]
        if isinstance(payload.get("command"), str) and payload["command"].strip():
            found["command"] = payload["command"].strip()[:4000]
        counts = payload.get("counts")
        if isinstance(counts, dict):
            kept = {
                name: counts[name]
                for name in ("passed", "failed", "skipped", "errors")
                if isinstance(counts.get(name), int)
                and not isinstance(counts[name], bool)
                and counts[name] >= 0
            }
            if kept:
                found["counts"] = kept
        return found or None, False
    if stage == "review":
        found = {}
        if payload.get("verdict") in ("approve", "changes_requested", "comment"):
            found["verdict"] = payload["verdict"]
        findings = _findings(payload.get("findings"))
        if findings:
            found["findings"] = findings
        return found or None, False
    if stage == "research":
        found = {}
        findings = _findings(payload.get("findings"))
        if findings:
            found["findings"] = findings
        if payload.get("disposition") in ("none", "bounded", "required"):
            found["disposition"] = payload["disposition"]
        return found or None, False
    rest = {name: item for name, item in payload.items() if name != "summary"}
    kept_all = {"ultra": {"payload": rest, "evidence": evidence, "revision": revision}}
    try:
        if len(canon.canonical(kept_all)) <= DATA_BYTES:
            return kept_all, True
    except IthacaError:
        pass
    return {"ultra": {"revision": revision}}, False


def _findings(value: Any) -> list[Any]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, (str, dict))][:200]
