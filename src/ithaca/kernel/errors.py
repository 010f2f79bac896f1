"""Errors with stable codes.

Every refusal Ithaca makes carries an UPPER_SNAKE ``code`` that tests, agents and scripts
can rely on, a human ``message`` and JSON-able ``details``. Interfaces convert them at
their edge: the CLI maps them to exit codes, the MCP server to tool errors carrying the
same three fields, hooks to the host's deny answer.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class IthacaError(Exception):
    """Base of every error Ithaca raises on purpose."""

    exit_code = 1

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.details = details or {}

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidInput(IthacaError):
    """The caller sent something malformed; nothing was changed."""

    exit_code = 2


class NotFound(IthacaError):
    """The named thing does not exist."""


class Refused(IthacaError):
    """A gate or rule said no."""


class Conflict(IthacaError):
    """Concurrency or identity conflict (an id taken, a race lost)."""


class Corrupt(IthacaError):
    """Stored state failed an integrity check; it is never trusted as a wildcard."""


def invalid_field(pointer: str, problem: str, message: str | None = None) -> InvalidInput:
    """The shared schema-violation error: ``INVALID_INPUT`` with a JSON pointer."""
    return InvalidInput(
        "INVALID_INPUT",
        message or f"{pointer or '/'}: {problem.lower().replace('_', ' ')}",
        {"pointer": pointer, "problem": problem},
    )
