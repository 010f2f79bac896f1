"""What hooks call in-process (seed, LIMIT, GC, markers, progress, the host cap), session
resolution, ``list-others`` and adoption."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ithaca.kernel import clock, journal
from ithaca.kernel.errors import IthacaError
from ithaca.ultragoal import hostcap, lifecycle, marker, progress, records, sessions

HOURS_AGO_7 = "2000-01-01T00:00:00.000Z"


def refused(call: Any, *args: Any, **kwargs: Any) -> IthacaError:
    with pytest.raises(IthacaError) as caught:
        call(*args, **kwargs)
    return caught.value


def age(ug: Any, session_id: str, **columns: str) -> None:
    """Move a pursuit's clocks into the past (as if it had idled)."""
    sets = ", ".join(f"{name} = ?" for name in columns)
    with ug.service.store.write() as tx:
        tx.execute(
            f"UPDATE ultragoal_pursuit SET {sets} WHERE session_id = ?",
            (*columns.values(), session_id),
        )


# --- seed -------------------------------------------------------------------------------


def test_seed_creates_a_pristine_row_then_reports_what_exists(ug: Any) -> None:
    assert ug.service.seed(ug.SESSION, user_typed=True)["outcome"] == "seeded"
    state = ug.call("get")["state"]
    assert (state["pristine"], state["phase"], state["active"]) == (True, "planning", True)
    assert ug.service.seed(ug.SESSION, user_typed=True)["outcome"] == "pristine_exists"
    ug.pursue()
    again = ug.service.seed(ug.SESSION, user_typed=True)
    assert again == {
        "outcome": "active_pursuit_exists",
        "phase": "pursuing",
        "objective": ug.OUTCOME,
    }


def test_seed_over_a_complete_pursuit_starts_fresh(ug: Any) -> None:
    ug.complete()
    assert ug.service.seed(ug.SESSION, user_typed=False)["outcome"] == "seeded"
    assert ug.call("get")["state"]["pristine"] is True


def test_only_a_user_typed_invocation_authorises_a_fresh_start(ug: Any) -> None:
    ug.pursue()
    ug.call("set_blocked", reason="stuck")
    assert ug.service.seed(ug.SESSION, user_typed=False)["outcome"] == "paused"
    assert refused(ug.call, "set", phase="planning").code == "PURSUIT_PAUSED"
    assert ug.service.seed(ug.SESSION, user_typed=True)["outcome"] == "fresh_start_authorised"
    fresh = ug.call("set", phase="planning", outcome="Another objective")
    assert fresh["phase"] == "planning"
    state = ug.call("get")["state"]
    assert (state["iteration"], state["review_dispatch_used"], state["stories"]) == (0, 0, [])


# --- LIMIT, stop view, GC ---------------------------------------------------------------


def test_limit_budget_pauses_and_the_stop_view_reads_the_row(ug: Any) -> None:
    ug.pursue()
    view = lifecycle.stop_view(ug.service.store.connection(), ug.SESSION)
    assert view is not None
    assert (view["pristine"], view["current_story"]["id"]) == (False, "A")
    with ug.service.store.write() as tx:
        row = records.load(tx, ug.SESSION)
        assert row is not None
        lifecycle.limit_budget(tx, row, kind="iterations", actor="system", now=clock.now())
    state = ug.call("status")["state"]
    assert (state["phase"], state["active"], state["budget_limit_notified"]) == (
        "budget_limited",
        False,
        True,
    )
    assert state["ithaca"]["budget_kind"] == "iterations"
    assert lifecycle.stop_view(ug.service.store.connection(), "nobody") is None


def test_gc_reaps_idle_pursuits_by_their_ttl_and_reconciles_markers(ug: Any) -> None:
    runtime = ug.service.project.runtime
    ug.pursue()
    ug.session = "sess-done"
    ug.complete()
    ug.session = "sess-fresh"
    ug.service.seed(ug.session, user_typed=True)
    recent_complete = clock.format_ms(int(1000 * (_now_s() - 45 * 60)))
    age(ug, "sess-done", last_touched_at=recent_complete)
    marker.sync(runtime, "sess-stale", True)

    assert ug.service.collect_garbage() == ["sess-done"]
    assert not marker.exists(runtime, "sess-stale")
    assert marker.exists(runtime, ug.SESSION)

    age(ug, ug.SESSION, last_touched_at=HOURS_AGO_7)
    assert ug.service.collect_garbage() == [ug.SESSION]
    assert not marker.exists(runtime, ug.SESSION)
    events = journal.query(ug.service.store.connection(), kind="ultragoal.reaped")
    assert [event["subject"] for event in events] == ["sess-done", ug.SESSION]


def _now_s() -> float:
    from ithaca.ultragoal.ttl import epoch_s

    return epoch_s(clock.now())


# --- sessions ---------------------------------------------------------------------------


def see(ug: Any, session_id: str, last_seen: str | None = None, ended: str | None = None) -> None:
    now = last_seen or clock.now()
    with ug.service.store.write() as tx:
        tx.execute(
            "INSERT INTO host_sessions (host, host_session_id, first_seen_at, last_seen_at,"
            " ended_at) VALUES ('claude', ?, ?, ?, ?)",
            (session_id, now, now, ended),
        )


def status_with(ug: Any, env: dict[str, str], session: str | None = None) -> dict[str, Any]:
    arguments = (
        {"operation": "get"} if session is None else {"operation": "get", "session": session}
    )
    return dict(ug.service.perform(arguments, actor="agent", env=env))


def test_session_resolution_order(ug: Any) -> None:
    ug.service.seed("sess-live", user_typed=True)
    see(ug, "sess-old", last_seen=HOURS_AGO_7)
    see(ug, "sess-ended", ended=clock.now())
    see(ug, "sess-live")
    assert status_with(ug, {})["state"]["ithaca"]["session_id"] == "sess-live"
    assert status_with(ug, {"ITHACA_SESSION_ID": "sess-x"})["state"] is None
    assert status_with(ug, {"ITHACA_SESSION_ID": "sess-x"}, "sess-live")["state"] is not None
    assert refused(status_with, ug, {"ITHACA_SESSION_ID": "bad id"}).code == "SESSION_ID_INVALID"
    see(ug, "thread-2")
    ambiguous = refused(status_with, ug, {})
    assert ambiguous.code == "SESSION_AMBIGUOUS"
    assert sorted(ambiguous.details["candidates"]) == ["sess-live", "thread-2"]
    codex = status_with(ug, {"CODEX_THREAD_ID": "sess-live"})
    assert codex["state"]["ithaca"]["session_id"] == "sess-live"


def test_live_sessions_excludes_ended_and_old(ug: Any) -> None:
    see(ug, "a", last_seen=HOURS_AGO_7)
    see(ug, "b", ended=clock.now())
    see(ug, "c")
    assert sessions.live_sessions(ug.service.store.connection(), clock.now()) == ["c"]


# --- list-others and adoption -----------------------------------------------------------


def other_pursuit(ug: Any, session_id: str, phase: str = "pursuing") -> None:
    mine = ug.session
    ug.session = session_id
    ug.plan()
    if phase == "pursuing":
        ug.call("set", phase="pursuing")
    ug.session = mine


def test_list_others_shows_live_non_pristine_pursuits_of_other_sessions(ug: Any) -> None:
    other_pursuit(ug, "sess-other-1")
    other_pursuit(ug, "sess-idle")
    age(ug, "sess-idle", last_touched_at=HOURS_AGO_7)
    ug.service.seed("sess-pristine", user_typed=True)
    ug.plan()
    others = ug.call("list_others")["others"]
    assert [(o["short"], o["sid"], o["purpose"]) for o in others] == [
        ("sess-oth", "sess-other-1", ug.OUTCOME)
    ]
    assert others[0]["idle_seconds"] >= 0


def test_adopt_moves_the_pursuit_and_tombstones_the_source(ug: Any) -> None:
    runtime = ug.service.project.runtime
    other_pursuit(ug, "sess-src")
    ug.service.seed(ug.SESSION, user_typed=True)
    answer = ug.call("adopt", src="sess-src")
    assert (answer["session_id"], answer["phase"]) == (ug.SESSION, "pursuing")
    state = ug.call("get")["state"]
    assert (state["outcome"], [s["id"] for s in state["stories"]]) == (ug.OUTCOME, ["A"])
    assert marker.exists(runtime, ug.SESSION) and not marker.exists(runtime, "sess-src")
    (event,) = journal.query(ug.service.store.connection(), kind="ultragoal.adopted")
    assert (event["payload"]["src"], event["payload"]["dst"], event["payload"]["relayed"]) == (
        "sess-src",
        ug.SESSION,
        True,
    )
    ug.session = "sess-src"
    assert refused(ug.call, "set", phase="planning").code == "SESSION_ADOPTED_AWAY"
    assert ug.service.seed("sess-src", user_typed=True)["outcome"] == "adopted_away"


@pytest.mark.parametrize(
    ("prepare", "code"),
    [
        ("not_live", "ADOPT_SOURCE_NOT_LIVE"),
        ("inactive", "ADOPT_SOURCE_NOT_LIVE"),
        ("pristine", "ADOPT_SOURCE_PRISTINE"),
    ],
)
def test_adopt_refuses_a_source_that_is_not_worth_adopting(
    ug: Any, prepare: str, code: str
) -> None:
    if prepare == "pristine":
        ug.service.seed("sess-src", user_typed=True)
    else:
        other_pursuit(ug, "sess-src")
    if prepare == "not_live":
        age(ug, "sess-src", last_touched_at=HOURS_AGO_7)
    if prepare == "inactive":
        ug.session = "sess-src"
        ug.call("set_blocked", reason="stuck")
        ug.session = ug.SESSION
    before = ug.digest()
    assert refused(ug.call, "adopt", src="sess-src").code == code
    assert ug.digest() == before


# --- progress and the host cap ----------------------------------------------------------


def test_progress_counts_commits_with_changes_stories_evidence(ug: Any) -> None:
    root = ug.root
    (root / "app.txt").write_text("one\n")
    ug.git("add", "app.txt")
    ug.git("commit", "-qm", "one")
    ug.pursue()
    conn = ug.service.store.connection()

    def moved() -> list[str]:
        row = ug.row()
        return progress.what_moved(
            row, progress.fingerprint(conn, str(root), ug.SESSION), str(root)
        )

    assert progress.read_head(str(root)) == ug.git("rev-parse", "HEAD")
    assert ug.row()["last_seen_head"] == ug.git("rev-parse", "HEAD")
    assert moved() == []
    ug.git("commit", "-q", "--allow-empty", "-m", "empty")
    assert moved() == []
    (root / "app.txt").write_text("two\n")
    ug.git("commit", "-qam", "two")
    assert moved() == ["commit"]
    ug.approve_stories()  # runs each story's validator, then approves it with evidence
    assert moved() == ["commit", "evidence", "validator"]
    ug.call("add_story", story={**ug.STORY_B, "id": "C"}, evidence="e", rationale="r")
    assert moved() == ["commit", "stories", "evidence", "validator"]
    ug.git("pack-refs", "--all")
    assert progress.read_head(str(root)) == ug.git("rev-parse", "HEAD")


def test_no_baseline_means_no_progress(ug: Any) -> None:
    ug.plan()
    row = ug.row()
    seen = progress.fingerprint(ug.service.store.connection(), str(ug.root), ug.SESSION)
    assert progress.what_moved(row, seen, str(ug.root)) == []


def test_stop_cap_comes_from_the_environment_then_settings(tmp_path: Any) -> None:
    assert hostcap.stop_cap(str(tmp_path), {}) == 8
    (tmp_path / ".claude").mkdir()
    (tmp_path / ".claude" / "settings.json").write_text(
        json.dumps({"env": {hostcap.VARIABLE: "12"}})
    )
    assert hostcap.stop_cap(str(tmp_path), {}) == 12
    assert hostcap.stop_cap(str(tmp_path), {hostcap.VARIABLE: "0"}) == 0
    assert not hostcap.below_budget(10, 0)
    assert hostcap.below_budget(10, 8) and not hostcap.below_budget(10, 12)
