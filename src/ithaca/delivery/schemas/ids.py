"""The id formats delivery accepts, as schema fragments.

Change ids name folders and appear in branch names, so they are lowercase slugs; task ids
follow the seed's ``T-1`` style; decision ids carry their ``dec-`` prefix into the file
name; idempotency keys are whatever a client can generate, within a safe alphabet.
"""

from __future__ import annotations

from ithaca.delivery.schemas.dialect import Schema

CHANGE_ID: Schema = {"type": "string", "pattern": r"^[a-z0-9][a-z0-9-]{1,62}$"}
TASK_ID: Schema = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
DECISION_ID: Schema = {"type": "string", "pattern": r"^dec-[a-z0-9-]{1,60}$"}
IDEMPOTENCY_KEY: Schema = {"type": "string", "pattern": r"^[A-Za-z0-9._:-]{1,128}$"}
DIGEST: Schema = {"type": "string", "pattern": r"^[0-9a-f]{64}$"}
# A Ulysses session id (``uly_`` + ULID), kept loose so a later id format still links.
DEBUG_SESSION_ID: Schema = {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,200}$"}
