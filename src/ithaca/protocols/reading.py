"""``protocols {operation, ...}``: reading the project's protocols, as the tool asks.

The one place that knows which fields each read operation takes: the MCP tool hands the
raw arguments here through ``ProtocolsService.read``. The answers are the CLI's
``--json`` answers (a listing under a ``protocols`` key, since a tool answers with an
object). Like every CLI command, a read first brings seeds and protocol files into the
store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ithaca.kernel.arguments import check_arguments
from ithaca.kernel.errors import invalid_field
from ithaca.kernel.tools import with_session
from ithaca.protocols.explanation import explain
from ithaca.protocols.tools import PROTOCOLS_SCHEMA

if TYPE_CHECKING:
    from ithaca.protocols.service import ProtocolsService

# The fields each operation reads, and the one it cannot do without.
OPERATION_FIELDS = {
    "list": frozenset({"scope", "source", "enabled", "tag"}),
    "get": frozenset({"id"}),
    "explain": frozenset({"eventId"}),
}
OPERATION_REQUIRES = {"get": "id", "explain": "eventId"}
COMMON_FIELDS = frozenset({"operation", "session"})
_ACCEPTED = with_session(PROTOCOLS_SCHEMA)


def read(service: ProtocolsService, arguments: dict[str, Any]) -> dict[str, Any]:
    """The answer to one read request, after checking its fields for its operation."""
    check_arguments(arguments, _ACCEPTED)
    operation = arguments["operation"]
    for name in arguments:
        if name not in COMMON_FIELDS and name not in OPERATION_FIELDS[operation]:
            raise invalid_field(
                f"/{name}", "NOT_FOR_OPERATION", f"{name} does not apply to operation {operation}"
            )
    needed = OPERATION_REQUIRES.get(operation)
    if needed is not None and needed not in arguments:
        raise invalid_field(f"/{needed}", "REQUIRED", f"operation {operation} needs {needed}")
    service.reconcile()
    if operation == "explain":
        return explain(service, arguments["eventId"])
    if operation == "get":
        return service.get_protocol(arguments["id"])
    filters = {key: arguments.get(key) for key in OPERATION_FIELDS["list"]}
    return {"protocols": service.list_protocols(**filters)}
