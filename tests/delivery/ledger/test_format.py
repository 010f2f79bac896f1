"""The team ledger's bytes and checks (reference §8.1, §2): the vector, deterministic
bytes, any layout verifying, edits detected, and the C encoder agreeing with ``canon``."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.delivery.ledger import canonical as ledger_json
from ithaca.delivery.ledger.format import (
    MAX_ANCESTORS,
    Stamp,
    document,
    parse,
    record,
    render,
    revised,
    state_digest,
)
from ithaca.kernel import canon
from ithaca.kernel.errors import Corrupt, InvalidInput

VECTOR_BODY = (
    '{"acceptance":[{"criterion":"valid credentials reach /home","id":"A1"}],'
    '"change_id":"add-login","deps":[],"files_modified":["src/auth.py","src/views/login.py"],'
    '"id":"T-1","status":"pending","title":"Add login form",'
    '"verification":{"argv":["pytest","-q","tests/test_auth.py"]}}'
)


def task(task_id: str, title: str = "a task", **extra: object):
    return record("task", task_id, {"id": task_id, "title": title, "status": "pending", **extra})


def ledger_of(*records, generation: int = 0, ancestors: tuple[str, ...] = ()):
    return document(
        "prj-3f2a9c1e", records, generation=generation, parent_digest=None, ancestors=ancestors
    )


def test_the_reference_vector_gives_its_record_and_state_digests():
    body = json.loads(VECTOR_BODY)
    assert len(VECTOR_BODY.encode()) == 276
    found = record("task", "T-1", body)
    assert found.digest == "32d2c0055130c90699faf799ecdef1581bedf9ddf62d94e43b5930c816899cad"
    assert found.text == VECTOR_BODY
    assert (
        state_digest("prj-3f2a9c1e", (found,))
        == "9af578b51230b9beb1bcfde84c841182658b8418beeefbddf484a7aa4e5baaba"
    )


def test_equal_state_gives_equal_bytes_whatever_the_order_records_came_in():
    records = [task(f"T-{n}") for n in range(20)] + [
        record("change", "add-login", {"id": "add-login"})
    ]
    shuffled = list(records)
    random.Random(4).shuffle(shuffled)
    first, second = render(ledger_of(*records)), render(ledger_of(*shuffled))
    assert first == second
    assert first.endswith(b"}\n")
    types = [item["type"] for item in json.loads(first)["records"]]
    assert types == ["change"] + ["task"] * 20


def test_a_rendered_ledger_reads_back_as_the_same_state():
    written = ledger_of(task("T-1"), task("T-2", deps=["T-1"]), generation=3, ancestors=("a" * 64,))
    found = parse(render(written))
    assert found.state_digest == written.state_digest
    assert [item.as_dict() for item in found.records] == [
        item.as_dict() for item in written.records
    ]
    assert (found.generation, found.ancestors) == (3, ("a" * 64,))


def test_any_layout_and_key_order_still_verifies():
    data = render(ledger_of(task("T-1", files_modified=["b.py", "a.py"]), task("T-2")))

    def reversed_keys(value):
        if isinstance(value, dict):
            return {key: reversed_keys(value[key]) for key in reversed(list(value))}
        if isinstance(value, list):
            return [reversed_keys(item) for item in value]
        return value

    relaid = json.dumps(reversed_keys(json.loads(data)), indent=4).encode()
    assert relaid != data
    assert parse(relaid).state_digest == parse(data).state_digest


def test_an_edited_body_or_state_is_a_digest_mismatch():
    data = json.loads(render(ledger_of(task("T-1", title="before"))))
    data["records"][0]["body"]["title"] = "after"
    with pytest.raises(Corrupt) as caught:
        parse(json.dumps(data).encode())
    assert caught.value.code == "LEDGER_DIGEST_MISMATCH"
    assert caught.value.details["record"] == "task:T-1"

    data = json.loads(render(ledger_of(task("T-1"))))
    data["state_digest"] = "0" * 64
    with pytest.raises(Corrupt) as caught:
        parse(json.dumps(data).encode())
    assert caught.value.code == "LEDGER_DIGEST_MISMATCH"


def test_git_conflict_markers_are_unparseable_and_point_at_the_merge_driver():
    data = render(ledger_of(task("T-1")))
    marked = b"<<<<<<< HEAD\n" + data + b"=======\n" + data + b">>>>>>> other\n"
    with pytest.raises(Corrupt) as caught:
        parse(marked)
    assert caught.value.code == "LEDGER_UNPARSEABLE"
    assert "merge driver" in caught.value.message


@pytest.mark.parametrize(
    "change",
    [
        {"kind": "something-else"},
        {"schema_version": 2},
        {"records": [{"type": "task", "id": "T-1"}]},
        {
            "records": [
                {
                    "type": "ghost",
                    "id": "x",
                    "revision": 1,
                    "parent_digest": None,
                    "digest": "0" * 64,
                    "body": {},
                }
            ]
        },
        {"ancestors": ["not a digest"]},
    ],
)
def test_documents_that_are_not_ledgers_are_unparseable(change):
    data = {**json.loads(render(ledger_of(task("T-1")))), **change}
    with pytest.raises(Corrupt) as caught:
        parse(json.dumps(data).encode())
    assert caught.value.code == "LEDGER_UNPARSEABLE"


def test_revisions_count_from_the_record_replaced():
    first = task("T-1", title="one")
    assert revised(first, None).stamp == Stamp(first.digest, 1, None)
    kept = revised(first, Stamp(first.digest, 4, "p" * 64))
    assert (kept.revision, kept.parent_digest) == (4, "p" * 64)
    changed = revised(task("T-1", title="two"), Stamp(first.digest, 4, "p" * 64))
    assert (changed.revision, changed.parent_digest) == (5, first.digest)


def test_ancestors_are_deduplicated_and_capped():
    many = tuple(f"{n:064x}" for n in range(100))
    found = ledger_of(task("T-1"), ancestors=(many[0], *many))
    assert found.ancestors == many[:MAX_ANCESTORS]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values, st.booleans())
def test_the_c_encoder_is_used_only_where_it_writes_canonical_json(value, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    reader = ledger_json.Reader()
    loaded = reader.load(text)
    try:
        expected = canon.canonical_text(loaded)
    except InvalidInput:
        assert not reader.exact
        return
    assert ledger_json.canonical_text(loaded, reader.exact) == expected


@given(st.lists(st.dictionaries(st.sampled_from("abcxyz"), st.text(max_size=5)), max_size=5))
def test_the_state_digest_is_the_digest_of_project_schema_and_records(bodies):
    records = tuple(record("task", f"T-{n}", body) for n, body in enumerate(bodies))
    expected = canon.digest(
        {
            "project_id": "prj-000000000000",
            "schema_version": 1,
            "records": [item.as_dict() for item in records],
        }
    )
    assert state_digest("prj-000000000000", records) == expected
