"""The per-record three-way merge (reference §8.2): properties over generated histories.

Branches that touch different records merge cleanly, in either order, and lose nothing;
records both branches changed differently conflict, and nothing of theirs is taken for
them; a record a session runs here never takes an incoming change."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ithaca.delivery.ledger.format import Key, Record, record
from ithaca.delivery.ledger.merge import ACTIVE_TASK, BOTH_CHANGED, three_way

IDS = [f"T-{n}" for n in range(8)]


def task(task_id: str, version: str) -> Record:
    return record("task", task_id, {"id": task_id, "title": version, "status": "pending"})


def records(versions: dict[str, str]) -> dict[Key, Record]:
    return {("task", task_id): task(task_id, version) for task_id, version in versions.items()}


def digests(found: dict[Key, Record]) -> dict[Key, str]:
    return {key: item.digest for key, item in found.items()}


def edited(base: dict[str, str], edits: dict[str, str | None]) -> dict[str, str]:
    """``base`` with each edit applied: a new version, or None to delete."""
    result = dict(base)
    for task_id, version in edits.items():
        if version is None:
            result.pop(task_id, None)
        else:
            result[task_id] = version
    return result


bases = st.dictionaries(st.sampled_from(IDS), st.just("base"))
edit_values = st.one_of(st.none(), st.text(min_size=1, max_size=3))


@st.composite
def disjoint_histories(
    draw: st.DrawFn,
) -> tuple[dict[str, str], dict[str, str | None], dict[str, str | None]]:
    base = draw(bases)
    owners = draw(
        st.lists(
            st.sampled_from(["ours", "theirs", "nobody"]), min_size=len(IDS), max_size=len(IDS)
        )
    )
    edits: dict[str, dict[str, str | None]] = {"ours": {}, "theirs": {}, "nobody": {}}
    for task_id, owner in zip(IDS, owners, strict=True):
        value = draw(edit_values)
        edits[owner][task_id] = value and f"{owner} {value}"
    return base, edits["ours"], edits["theirs"]


@given(disjoint_histories())
def test_disjoint_edits_merge_cleanly_in_either_order_and_lose_nothing(history):
    base, our_edits, their_edits = history
    base_records = records(base)
    ours = records(edited(base, our_edits))
    theirs = records(edited(base, their_edits))
    expected = digests(records(edited(edited(base, our_edits), their_edits)))

    merge = three_way(digests(base_records), ours, theirs)
    backwards = three_way(digests(base_records), theirs, ours)

    assert merge.clashes == [] and backwards.clashes == []
    assert digests(merge.merged(ours)) == expected
    assert digests(backwards.merged(theirs)) == expected
    their_changes = {
        ("task", task_id)
        for task_id in their_edits
        if base.get(task_id) != edited(base, their_edits).get(task_id)
    }
    assert set(merge.taken) == their_changes


@st.composite
def same_record_histories(draw):
    base = draw(bases)
    shared = draw(st.sets(st.sampled_from(IDS), min_size=1))
    ours = {task_id: draw(edit_values.map(lambda v: v and "ours " + v)) for task_id in shared}
    theirs = {task_id: "theirs" for task_id in shared}
    return base, ours, theirs


@given(same_record_histories())
def test_records_both_sides_changed_differently_conflict_and_take_nothing(history):
    base, our_edits, their_edits = history
    ours = records(edited(base, our_edits))
    theirs = records(edited(base, their_edits))
    merge = three_way(digests(records(base)), ours, theirs)
    changed_by_us = {
        task_id
        for task_id in our_edits
        if base.get(task_id) != edited(base, our_edits).get(task_id)
    }
    assert {clash.key[1] for clash in merge.clashes} == changed_by_us
    assert all(clash.reason == BOTH_CHANGED for clash in merge.clashes)
    assert not {key[1] for key in merge.taken} & changed_by_us
    assert (
        digests(merge.merged(ours)).items()
        >= {key: value for key, value in digests(ours).items() if key[1] in changed_by_us}.items()
    )


def test_resolve_chooses_a_side_for_a_clash():
    base, ours, theirs = (
        records({"T-1": "base"}),
        records({"T-1": "ours"}),
        records({"T-1": "theirs"}),
    )
    kept = three_way(digests(base), ours, theirs, resolve={"task:T-1": "ours"})
    taken = three_way(digests(base), ours, theirs, resolve={"task:T-1": "theirs"})
    assert (kept.clashes, kept.taken, kept.resolved) == ([], {}, {"task:T-1": "ours"})
    assert taken.taken == {("task", "T-1"): theirs[("task", "T-1")]}


def test_a_running_task_takes_no_incoming_change_even_when_resolved_for_theirs():
    base, theirs = records({"T-1": "base"}), records({"T-1": "theirs"})
    frozen = frozenset({("task", "T-1")})
    merge = three_way(digests(base), base, theirs, frozen=frozen, resolve={"task:T-1": "theirs"})
    assert [clash.reason for clash in merge.clashes] == [ACTIVE_TASK]
    assert merge.taken == {}
    kept = three_way(digests(base), base, theirs, frozen=frozen, resolve={"task:T-1": "ours"})
    assert kept.clashes == [] and kept.taken == {}


def test_delete_against_change_conflicts():
    base = records({"T-1": "base"})
    merge = three_way(digests(base), records({"T-1": "ours"}), {})
    assert [(clash.key, clash.theirs_digest) for clash in merge.clashes] == [
        (("task", "T-1"), None)
    ]
