"""Content-addressed blobs: bytes stored under their own SHA-256.

Validator snapshots, recorded artifacts and other evidence are bound by digest in the
journal; the bytes live here. Naming a blob by its digest makes a second store of the
same bytes free, and re-hashing on every read turns any edit made behind Ithaca's back
into a ``BLOB_CORRUPT`` error instead of evidence silently changing meaning. Blobs are
fanned out by the first two hex digits (``ab/cdef…``) so no folder grows huge.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

from ithaca.kernel.canon import digest_bytes
from ithaca.kernel.errors import Corrupt, InvalidInput, NotFound
from ithaca.kernel.files import write_atomic

_DIGEST = re.compile(r"[0-9a-f]{64}")


class BlobStore:
    """Blobs under ``root`` (normally ``.ithaca/.runtime/blobs``)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root)

    def put(self, data: bytes) -> str:
        """Store ``data`` and return its digest; storing the same bytes again is a no-op."""
        digest = digest_bytes(data)
        if self._stored_bytes_match(digest):
            return digest
        write_atomic(self.root, _relpath(digest), data, mode=0o444)
        return digest

    def get(self, digest: str) -> bytes:
        """The bytes stored under ``digest``, re-verified against it."""
        data = self._read(digest)
        actual = digest_bytes(data)
        if actual != digest:
            raise Corrupt(
                "BLOB_CORRUPT",
                f"blob {digest} no longer matches its digest",
                {"digest": digest, "actual": actual},
            )
        return data

    def exists(self, digest: str) -> bool:
        """Whether a blob is stored under ``digest`` (its bytes are checked by ``get``)."""
        return self.path(digest).is_file()

    def path(self, digest: str) -> Path:
        """Where the blob for ``digest`` lives, whether or not it is stored."""
        _check_digest(digest)
        return self.root / _relpath(digest)

    def _read(self, digest: str) -> bytes:
        try:
            fd = os.open(self.path(digest), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError as exc:
            raise NotFound(
                "BLOB_NOT_FOUND", f"no blob is stored under {digest}", {"digest": digest}
            ) from exc
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise Corrupt(
                    "BLOB_CORRUPT",
                    f"blob {digest} was replaced by a symlink",
                    {"digest": digest, "actual": None},
                ) from exc
            raise
        with open(fd, "rb") as stream:
            return stream.read()

    def _stored_bytes_match(self, digest: str) -> bool:
        try:
            self.get(digest)
        except (NotFound, Corrupt):
            return False
        return True


def _relpath(digest: str) -> str:
    return f"{digest[:2]}/{digest[2:]}"


def _check_digest(digest: object) -> None:
    if not isinstance(digest, str) or _DIGEST.fullmatch(digest) is None:
        raise InvalidInput(
            "INVALID_DIGEST",
            f"{digest!r} is not a lowercase hex SHA-256 digest",
            {"digest": digest if isinstance(digest, str) else repr(digest)},
        )
