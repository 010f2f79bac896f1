"""Plan waves: layering by longest dependency path, and no two tasks of a wave touching
a common file (equal paths, folder prefixes, undeclared files)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ithaca.delivery.run_plan.waves import (
    DependencyCycle,
    Node,
    paths_overlap,
    split_into_waves,
    tasks_overlap,
)


def test_disjoint_files_share_a_wave() -> None:
    assert split_into_waves([Node("A", files=("a.py",)), Node("B", files=("b.py",))]) == [
        ["A", "B"]
    ]


def test_overlapping_files_take_consecutive_waves() -> None:
    found = split_into_waves(
        [Node("A", files=("x.py",)), Node("B", files=("x.py", "y.py")), Node("C", files=("z",))]
    )
    assert found == [["A", "C"], ["B"]]


def test_a_folder_overlaps_what_it_holds_only_with_a_trailing_slash() -> None:
    assert paths_overlap("src/", "src/app/login.py")
    assert paths_overlap("src/app/", "src/app")
    assert not paths_overlap("src", "src/app.py")
    assert not paths_overlap("src/ap", "src/app.py")
    assert split_into_waves([Node("A", files=("src/",)), Node("B", files=("src/a.py",))]) == [
        ["A"],
        ["B"],
    ]


def test_undeclared_files_overlap_everything() -> None:
    assert tasks_overlap(Node("A"), Node("B", files=("b.py",)))
    found = split_into_waves([Node("A"), Node("B", files=("b.py",)), Node("C", files=("c.py",))])
    assert found == [["A"], ["B", "C"]]


def test_layers_follow_the_longest_dependency_path() -> None:
    nodes = [
        Node("A", files=("a",)),
        Node("B", deps=("A",), files=("b",)),
        Node("C", deps=("B",), files=("c",)),
        Node("D", deps=("A", "C"), files=("d",)),
        Node("E", deps=("outside",), files=("e",)),
    ]
    assert split_into_waves(reversed(nodes)) == [["A", "E"], ["B"], ["C"], ["D"]]


def test_a_cycle_is_named() -> None:
    with pytest.raises(DependencyCycle) as caught:
        split_into_waves([Node("A", deps=("C",)), Node("B", deps=("A",)), Node("C", deps=("B",))])
    assert caught.value.cycle[0] == caught.value.cycle[-1]
    assert set(caught.value.cycle) == {"A", "B", "C"}
    with pytest.raises(DependencyCycle):
        split_into_waves([Node("A", deps=("A",))])


PATHS = st.sampled_from(["a", "a/", "a/b", "a/b/", "a/b/c", "b", "b/", "b/c", "c"])


@st.composite
def acyclic_tasks(draw: st.DrawFn) -> list[Node]:
    count = draw(st.integers(min_value=0, max_value=12))
    names = [f"T-{index:02d}" for index in range(count)]
    nodes = []
    for index, name in enumerate(names):
        deps = draw(st.lists(st.sampled_from(names[:index]), max_size=3)) if index else []
        files = draw(st.lists(PATHS, max_size=3, unique=True))
        nodes.append(Node(name, tuple(deps), tuple(files)))
    return draw(st.permutations(nodes))


@settings(max_examples=150, deadline=None)
@given(acyclic_tasks())
def test_waves_never_overlap_and_deps_come_first(nodes: list[Node]) -> None:
    found = split_into_waves(nodes)
    by_id = {node.id: node for node in nodes}
    assert sorted(task for wave in found for task in wave) == sorted(by_id)
    position = {task: index for index, wave in enumerate(found) for task in wave}
    for wave in found:
        for first in wave:
            for second in wave:
                if first != second:
                    assert not tasks_overlap(by_id[first], by_id[second])
    for node in nodes:
        for dep in node.deps:
            assert position[dep] < position[node.id]
    assert split_into_waves(list(reversed(nodes))) == found
