"""``context`` bounds: adversarial data still fits, cuts are marked, cursors page the rest
and go stale when the authority moves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.app import IthacaProject
from ithaca.delivery.context import bounds as context_bounds
from ithaca.delivery.context.tool import context
from ithaca.kernel import canon
from ithaca.kernel.errors import Conflict

Record = Callable[..., dict[str, Any]]

# Wide characters: each is one character for the schema's caps, 6 or 4 bytes in canonical JSON.
HEAVY = "\u0001\U0001f600"


def heavy(length: int) -> str:
    return (HEAVY * length)[:length]


def read(project: IthacaProject, **arguments: Any) -> dict[str, Any]:
    return context(project.project, project.store, project.config, arguments)


@pytest.fixture
def adversarial(project: IthacaProject, record: Record) -> None:
    """Every field the record service accepts, at or near its cap, in the worst encoding."""
    record(
        "baseline",
        "initialize",
        {"project_name": heavy(200), "scope": {"paths": [heavy(1024) for _ in range(50)]}},
    )
    refs = [{"path": f"spec/{index}/{heavy(1000)}"} for index in range(60)]
    gaps = [
        {"id": heavy(64), "category": heavy(64), "blocking": True, "note": heavy(2000)}
        for _ in range(40)
    ]
    record("baseline", "observe", {"specs": refs, "evidence": refs[:30], "gaps": gaps})
    contract = {
        "outcome": heavy(4000),
        "acceptance": [
            {"id": heavy(64), "criterion": heavy(2000), "verification": heavy(2000)}
            for _ in range(12)
        ],
        "non_goals": [heavy(1000) for _ in range(30)],
        "public_seams": [heavy(1000) for _ in range(30)],
        "recovery": {"strategy": heavy(2000), "verification": heavy(2000)},
    }
    record(
        "change_contract",
        "open",
        {
            "id": "big-change",
            "kind": "major",
            "title": heavy(200),
            "intent": heavy(20000),
            "contract": contract,
            "classification": {"rationale": heavy(4000), "risk_flags": [heavy(64)]},
        },
    )
    for index in range(32):  # just over the full detail's cap of 30
        record(
            "decision",
            "defer" if index % 2 else "accept",
            {
                "scope": {"change_id": "big-change"} if index % 3 else {"baseline": True},
                "question": f"{index} " + heavy(200),
                "recommendation": heavy(300),
                "owner": heavy(100),
                **(
                    {"consequence": heavy(800)}
                    if index % 2
                    else {"selection": {"choice": heavy(500), "rationale": heavy(800)}}
                ),
            },
        )
    for index in range(32):  # just over the full detail's cap of 30
        record(
            "artifact",
            "bind",
            {
                "kind": "research",
                "scope": {"change_id": "big-change"},
                "path": f"research/{index}-{'x' * 200}.md",
                "content": "body",
                "role": heavy(64),
            },
        )
    record(
        "task_contract",
        "define",
        {
            "id": "T-" + "9" * 62,
            "change_id": "big-change",
            "title": heavy(200),
            "description": heavy(8000),
            "deps": [f"D-{index}-{'y' * 50}" for index in range(1000)],  # the cap
            "files_modified": [f"{index}/{heavy(900)}" for index in range(40)],
            "acceptance": [{"id": heavy(64), "criterion": heavy(2000)} for _ in range(20)],
            "verification": {"argv": [heavy(4096) for _ in range(10)], "cwd": heavy(1024)},
            "type": heavy(40),
            "priority": heavy(32),
        },
    )


@pytest.mark.slow
@pytest.mark.usefixtures("adversarial")
def test_adversarial_data_fits_both_budgets(project: IthacaProject) -> None:
    for detail, limit in (("summary", 16_384), ("full", 65_536)):
        found = read(project, detail=detail)
        assert context_bounds.size(found) <= limit
        assert found["digest"] == read(project, detail=detail)["digest"]
        assert set(found["cursors"]) == {"decisions", "evidence"}
        for name, cursor in found["cursors"].items():
            seen = 0
            while cursor:
                answer = read(project, detail=detail, cursor=cursor)
                assert context_bounds.size(answer) <= limit
                assert answer["section"] == name and answer["offset"] == seen
                seen += len(answer["items"])
                cursor = answer.get("cursor")
            assert seen == answer["total"] == 32


def test_small_envelopes_are_not_cut(project: IthacaProject, record: Record) -> None:
    record("baseline", "initialize", {"project_name": "shop"})
    found = read(project)
    assert "cursors" not in found
    assert "…[+" not in canon.canonical_text(found)


def test_cursors_page_a_list_and_go_stale(project: IthacaProject, record: Record) -> None:
    record("change_contract", "open", {"id": "c-1", "kind": "quick", "title": "t", "intent": "x"})
    for index in range(12):
        record(
            "decision",
            "accept",
            {
                "scope": {"change_id": "c-1"},
                "question": f"Question {index} " + "q" * 900,
                "recommendation": "r" * 3000,
                "owner": "o",
                "selection": {"choice": "c" * 900, "rationale": "why " * 900},
            },
        )
    found = read(project)
    assert context_bounds.size(found) <= 16_384
    cursor = found["cursors"]["decisions"]
    section, offset, digest = context_bounds.decode_cursor(cursor)
    assert (section, digest) == ("decisions", found["digest"])
    page = read(project, cursor=cursor)
    assert page["offset"] == offset and page["items"]
    record("event", "append", {"type": "seen", "payload": {}})
    assert read(project, cursor=cursor)["offset"] == offset  # events are not authority
    record(
        "task_contract",
        "define",
        {"id": "T-1", "change_id": "c-1", "title": "t", "verification": {"argv": ["x"]}},
    )
    with pytest.raises(Conflict) as caught:
        read(project, cursor=cursor)
    assert caught.value.code == "CURSOR_STALE"


def test_cut_strings_end_with_the_count_left_out() -> None:
    assert context_bounds.cut_string("abcdef", 10) == "abcdef"
    assert context_bounds.cut_string("abcdefghijkl", 4) == "abcd…[+8]"
    assert context_bounds.cut_string("\u0001" * 10, 12) == "\u0001\u0001…[+8]"


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | st.text(max_size=600),
        lambda children: (
            st.lists(children, max_size=30)
            | st.dictionaries(st.sampled_from("abcdefgh"), children, max_size=8)
        ),
        max_leaves=100,
    )
)
def test_every_cut_is_within_its_limits(value: Any) -> None:
    rule = context_bounds.BUDGETS["summary"].passes[-1]
    cut = context_bounds._cut(value, 1, rule)

    def check(item: Any, level: int) -> None:
        if isinstance(item, str):
            assert len(canon.canonical(item)) - 2 <= rule.chars + len("…[+]") + 6
        elif isinstance(item, dict):
            assert level <= rule.depth
            for child in item.values():
                check(child, level + 1)
        elif isinstance(item, list):
            assert level <= rule.depth and len(item) <= rule.items + 1
            for child in item:
                check(child, level + 1)

    check(cut, 1)
