"""The Ulysses state machine: ``transition(state, command, facts) -> (state, events)``.

Why pure: the protocol's rules are the part of Ulysses that must never bend, so they live
in one function that reads nothing and writes nothing. The service gathers every fact
that needs the outside world (the clock, new ids, validator results, Git observations,
bindings) and stores what comes back; property tests drive the same function through
any sequence of operations and outcomes without a database or a subprocess.

A session is the dict ``ulysses.session`` describes. Every accepted command bumps
``version`` except ``note``; every refusal (``ulysses.refusals``) raises before anything
is computed, so it changes nothing and yields no event. Commands are validated input
(``ithaca.ulysses.inputs``) keyed by ``operation``.
"""

from __future__ import annotations

import copy
from typing import Any

from ithaca.kernel.errors import Refused
from ithaca.ulysses.refusals import check, restorable_checkpoint
from ithaca.ulysses.session import (
    PHASE_S,
    State,
    forbidden_key,
    is_active,
    is_tamper,
    step_role,
)

Event = dict[str, Any]


def transition(
    state: State | None, command: dict[str, Any], facts: dict[str, Any]
) -> tuple[State | None, list[Event]]:
    """The state after ``command`` given ``facts``, and the events that record it."""
    check(state, command)
    operation = command["operation"]
    if operation in ("status", "resume"):
        return state, []
    if operation == "init":
        return _init(state, command, facts)
    assert state is not None
    after = copy.deepcopy(state)
    if operation == "note":
        after["note_count"] += 1
        return after, [_noted(after, command, facts)]
    after["version"] += 1
    handler = _HANDLERS[operation]
    events = handler(after, command, facts)
    return after, events


def supersede(old: State, *, by: str, now: str) -> State:
    """The closed form of a session that a new ``init`` replaced."""
    closed = copy.deepcopy(old)
    if closed["active_step"] is not None:
        _close_step(closed, "abandoned")
    _terminate(closed, "superseded", now)
    closed["superseded_by"] = by
    closed["version"] += 1
    return closed


def _init(
    state: State | None, command: dict[str, Any], facts: dict[str, Any]
) -> tuple[State, list[Event]]:
    session_id = facts["session_id"]
    events = []
    if is_active(state):
        assert state is not None
        events.append(_event(state["session_id"], "ulysses.superseded", {"by": session_id}))
    checkpoint = facts["checkpoint"]
    session: State = {
        "session_id": session_id,
        "status": "active",
        "phase": "IDLE",
        "S": 0,
        "problem": command["problem"],
        "constraints": list(command["constraints"]),
        "checkpoints": [checkpoint],
        "hypotheses": [],
        "forbidden_moves": [],
        "active_step": None,
        "steps": [],
        "evidence": [],
        "finalValidator": None,
        "reflect_base": None,
        "note_count": 0,
        "version": 1,
        "created_at": facts["now"],
        "completed_at": None,
        "summary": None,
        "missing": None,
        "superseded_by": None,
    }
    events.append(
        _event(
            session_id,
            "ulysses.init",
            {
                "problem": session["problem"],
                "constraints": session["constraints"],
                "checkpoint": checkpoint,
            },
        )
    )
    return session, events


def _plan(state: State, command: dict[str, Any], facts: dict[str, Any]) -> list[Event]:
    bindings = facts["bindings"]
    step = {
        "step_id": facts["step_id"],
        "primary": command["primary"],
        "recovery": command["recovery"],
        "irreversible": command["irreversible"],
        "planned_at": facts["now"],
        "primaryValidator": bindings["primary"],
        "recoveryValidator": bindings["recovery"],
        "base": facts["base"],
    }
    state["active_step"] = step
    _enter(state, "PRIMARY")
    payload = {
        **{key: step[key] for key in ("step_id", "primary", "recovery", "irreversible", "base")},
        "primaryValidator": _trusted(bindings["primary"]),
        "recoveryValidator": _trusted(bindings["recovery"]),
    }
    return [_event(state["session_id"], "ulysses.planned", payload)]


def _outcome(state: State, command: dict[str, Any], facts: dict[str, Any]) -> list[Event]:
    validation = facts["validation"]
    before = state["phase"]
    role = step_role(state)
    step = state["active_step"]
    binding = step[f"{role}Validator"]
    _add_evidence(state, role, binding, validation)
    if is_tamper(validation):
        return [_tamper(state, role, binding, validation, facts)]
    payload: dict[str, Any] = {
        "step_id": step["step_id"],
        "role": role,
        "pass": validation["pass"],
        "assessment": "expected" if validation["pass"] else "unexpected-unfavorable",
        "reason": validation["reason"],
        "cause": validation["cause"],
        "evidenceDigest": validation["evidenceDigest"],
        "from": before,
    }
    if not validation["pass"] and facts.get("problem") and not state.get("problem_observed"):
        state["problem_observed"] = facts["problem"]  # the first failing outcome's data
    if validation["pass"]:
        checkpoint = facts["checkpoint"]
        state["checkpoints"].append(checkpoint)
        _close_step(state, f"passed_{role}")
        _enter(state, "IDLE")
        payload["checkpoint"] = checkpoint
    elif before == "PRIMARY":
        _enter(state, "RECOVERY")
    else:
        payload["forbidden_added"] = _forbid(state, step, "failed")
        _close_step(state, "failed")
        _enter_reflect(state, facts["reflect_base"])
        payload["reflect_base"] = facts["reflect_base"]
    payload["to"] = state["phase"]
    if command.get("details") is not None:
        payload["details"] = command["details"]
    return [_event(state["session_id"], "ulysses.outcome", payload)]


def _tamper(
    state: State,
    role: str,
    binding: dict[str, Any],
    validation: dict[str, Any],
    facts: dict[str, Any],
) -> Event:
    """A failed snapshot check: the open step (if any) closes ``tampered`` with its moves
    forbidden, and the session must reflect."""
    payload: dict[str, Any] = {"role": role}
    step = state["active_step"]
    forbidden_added: list[dict[str, Any]] = []
    if step is not None:
        payload["step_id"] = step["step_id"]
        forbidden_added = _forbid(state, step, "tampered")
        _close_step(state, "tampered")
    _enter_reflect(state, facts["reflect_base"])
    payload.update(
        expected=binding["snapshotHash"],
        kind=validation["cause"],
        forbidden_added=forbidden_added,
        reflect_base=facts["reflect_base"],
    )
    return _event(state["session_id"], "ulysses.validator_tampering", payload)


def _reflect(state: State, command: dict[str, Any], facts: dict[str, Any]) -> list[Event]:
    seq = len(state["hypotheses"]) + 1
    state["hypotheses"].append(
        {
            "seq": seq,
            "hypothesis": command["hypothesis"],
            "falsification": command["falsification"],
            "at": facts["now"],
        }
    )
    state["reflect_base"] = None
    _enter(state, "IDLE")
    payload = {
        "hypothesis_seq": seq,
        "hypothesis": command["hypothesis"],
        "falsification": command["falsification"],
        "worktree_digest": facts["worktree_digest"],
    }
    return [_event(state["session_id"], "ulysses.reflected", payload)]


def _bind_final(state: State, command: dict[str, Any], facts: dict[str, Any]) -> list[Event]:
    """``bind_final_validator`` (the agent's) and ``replace_final_validator`` (the user's):
    either way the validator must first be seen failing on the problem as it stands."""
    shown = facts["demonstration"]  # the validator run on the problem as it stands
    if shown["pass"]:
        raise Refused(
            "FINAL_VALIDATOR_CANNOT_FAIL",
            f"the final validator passes on the problem as it stands ({shown['reason']}), so"
            " its pass would prove nothing; bind one that fails here and passes once the"
            " problem is fixed",
            {"validation": shown},
        )
    replaced = state["finalValidator"]
    binding = facts["binding"]
    state["finalValidator"] = binding
    if facts.get("problem") is not None:
        state["problem_observed"] = facts["problem"]
    payload = {
        **_trusted(binding),
        "failsOnProblem": {"evidenceDigest": shown["evidenceDigest"], "reason": shown["reason"]},
    }
    if replaced is not None:
        payload["replaced"] = replaced["binding_id"]
    actor = "user" if command["operation"] == "replace_final_validator" else "agent"
    return [_event(state["session_id"], "ulysses.final_validator_bound", payload, actor=actor)]


def _complete(state: State, command: dict[str, Any], facts: dict[str, Any]) -> list[Event]:
    terminal = command["terminalState"]
    payload: dict[str, Any] = {"terminalState": terminal}
    if terminal == "resolved":
        validation = facts["validation"]
        binding = state["finalValidator"]
        if not validation["pass"] and not is_tamper(validation):
            raise Refused(
                "FINAL_VALIDATOR_FAILED",
                f"the final validator did not pass: {validation['reason']}",
                {"validation": validation},
            )
        _add_evidence(state, "final", binding, validation)
        if is_tamper(validation):
            return [_tamper(state, "final", binding, validation, facts)]
        payload["final"] = {
            "snapshotHash": binding["snapshotHash"],
            "evidenceDigest": validation["evidenceDigest"],
        }
    if state["active_step"] is not None:
        _close_step(state, "abandoned")
    summary = command.get("summary")
    if summary is not None and summary.strip():
        state["summary"] = payload["summary"] = summary
    if command.get("missing"):
        state["missing"] = payload["missing"] = list(command["missing"])
    _terminate(state, terminal, facts["now"])
    return [_event(state["session_id"], "ulysses.completed", payload)]


def _rollback(state: State, command: dict[str, Any], facts: dict[str, Any]) -> list[Event]:
    checkpoint = restorable_checkpoint(state, command["label"])
    pre_rollback = facts["pre_rollback"]
    state["checkpoints"].append(pre_rollback)
    payload = {"checkpoint": checkpoint, "pre_rollback": pre_rollback}
    return [_event(state["session_id"], "ulysses.rolled_back", payload, actor="user")]


def _noted(state: State, command: dict[str, Any], facts: dict[str, Any]) -> Event:
    payload: dict[str, Any] = {
        "note_seq": state["note_count"],
        "kind": command["kind"],
        "thought": command["thought"],
    }
    if facts.get("data_digest") is not None:
        payload["data_digest"] = facts["data_digest"]
    return _event(state["session_id"], "ulysses.noted", payload)


_HANDLERS = {
    "plan": _plan,
    "outcome": _outcome,
    "reflect": _reflect,
    "bind_final_validator": _bind_final,
    "replace_final_validator": _bind_final,
    "complete": _complete,
    "rollback": _rollback,
}


# --- pieces -------------------------------------------------------------------------


def _enter(state: State, phase: str) -> None:
    state["phase"] = phase
    state["S"] = PHASE_S[phase]


def _enter_reflect(state: State, reflect_base: dict[str, Any]) -> None:
    _enter(state, "REFLECT")
    state["reflect_base"] = reflect_base


def _terminate(state: State, status: str, now: str) -> None:
    state["status"] = status
    state["phase"] = None
    state["S"] = None
    state["reflect_base"] = None
    state["completed_at"] = now


def _close_step(state: State, result: str) -> None:
    step = state["active_step"]
    hypotheses = state["hypotheses"]
    closed = dict(step, result=result, hypothesis_seq=hypotheses[-1]["seq"] if hypotheses else None)
    state["steps"].append(closed)
    state["active_step"] = None


def _forbid(state: State, step: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    """Forbid the step's two moves (once per key); returns the entries added."""
    known = {forbidden_key(entry["text"]) for entry in state["forbidden_moves"]}
    added = []
    for field in ("primary", "recovery"):
        key = forbidden_key(step[field])
        if key in known:
            continue
        known.add(key)
        added.append(
            {"text": step[field], "key": key, "step_id": step["step_id"], "reason": reason}
        )
    state["forbidden_moves"].extend(added)
    return added


def _add_evidence(
    state: State, role: str, binding: dict[str, Any], validation: dict[str, Any]
) -> None:
    state["evidence"].append(
        {
            "role": role,
            "snapshotHash": binding["snapshotHash"],
            "evidenceDigest": validation["evidenceDigest"],
            "pass": validation["pass"],
        }
    )


def _trusted(binding: dict[str, Any]) -> dict[str, Any]:
    """The part of a binding a journal event pins: its id and the trusted digest."""
    return {
        key: binding[key]
        for key in ("binding_id", "notebookId", "cellId", "cellVersion", "snapshotHash")
    }


def _event(subject: str, kind: str, payload: dict[str, Any], *, actor: str = "agent") -> Event:
    return {"actor": actor, "kind": kind, "subject": subject, "payload": payload}
