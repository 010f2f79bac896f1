from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ithaca.kernel.blobs import BlobStore
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound


@pytest.fixture
def store(tmp_path: Path) -> BlobStore:
    return BlobStore(tmp_path / ".ithaca" / ".runtime" / "blobs")


def _stored_files(store: BlobStore) -> list[Path]:
    return sorted(path for path in store.root.rglob("*") if path.is_file())


def _tamper(path: Path, data: bytes) -> None:
    path.chmod(0o644)
    path.write_bytes(data)


@given(data=st.binary(max_size=2048))
def test_put_then_get_returns_the_same_bytes_under_their_sha256(tmp_path_factory, data) -> None:
    store = BlobStore(tmp_path_factory.mktemp("blobs"))

    digest = store.put(data)

    assert digest == hashlib.sha256(data).hexdigest()
    assert store.get(digest) == data
    assert store.exists(digest)


def test_blob_is_stored_under_its_fanned_out_digest(store: BlobStore) -> None:
    digest = store.put(b"hello")

    assert store.path(digest) == store.root / digest[:2] / digest[2:]
    assert store.path(digest).read_bytes() == b"hello"


def test_putting_the_same_bytes_twice_stores_one_blob(store: BlobStore) -> None:
    first = store.put(b"same")
    second = store.put(b"same")

    assert first == second
    assert _stored_files(store) == [store.path(first)]


def test_tampered_blob_is_reported_corrupt(store: BlobStore) -> None:
    digest = store.put(b"validator source v1")
    _tamper(store.path(digest), b"validator source v2")

    with pytest.raises(Corrupt) as excinfo:
        store.get(digest)

    assert excinfo.value.code == "BLOB_CORRUPT"
    assert excinfo.value.details == {
        "digest": digest,
        "actual": hashlib.sha256(b"validator source v2").hexdigest(),
    }


def test_blob_replaced_by_a_symlink_is_reported_corrupt(store: BlobStore, tmp_path: Path) -> None:
    digest = store.put(b"artifact")
    lookalike = tmp_path / "lookalike"
    lookalike.write_bytes(b"artifact")
    store.path(digest).unlink()
    store.path(digest).symlink_to(lookalike)

    with pytest.raises(Corrupt) as excinfo:
        store.get(digest)

    assert excinfo.value.code == "BLOB_CORRUPT"


def test_putting_the_original_bytes_again_repairs_a_tampered_blob(store: BlobStore) -> None:
    digest = store.put(b"original")
    _tamper(store.path(digest), b"edited")

    assert store.put(b"original") == digest
    assert store.get(digest) == b"original"


def test_missing_blob_is_not_found(store: BlobStore) -> None:
    digest = hashlib.sha256(b"never stored").hexdigest()

    with pytest.raises(NotFound) as excinfo:
        store.get(digest)

    assert excinfo.value.code == "BLOB_NOT_FOUND"
    assert excinfo.value.details == {"digest": digest}
    assert not store.exists(digest)


@pytest.mark.parametrize(
    "digest",
    [
        "",
        "abc",
        "A" * 64,
        "g" * 64,
        "0" * 63,
        "0" * 65,
        "../" + "0" * 61,
        "00/" + "0" * 61,
        "0" * 64 + "\n",
        None,
    ],
)
def test_malformed_digest_is_refused_by_every_lookup(store: BlobStore, digest: object) -> None:
    for lookup in (store.get, store.exists, store.path):
        with pytest.raises(InvalidInput) as excinfo:
            lookup(digest)  # type: ignore[arg-type]  # malformed on purpose
        assert excinfo.value.code == "INVALID_DIGEST"
