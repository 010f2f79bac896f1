"""Ithaca's own verification runs: what makes a turn "verified".

An agent's word, its own test run and the exit status its host reports are all things
the agent can shape. So Ithaca runs the project's tests itself: ``runners`` finds the
project's runner from its files (or the team's configuration), ``run`` runs it in the
validator sandbox with Ithaca's own environment and reads the counts from a report it
asked the runner for, ``digest`` names the project it ran on by content, and
``records`` keeps each run with its journal event. ``turn`` and ``judgement`` hold a
turn to the tests and runner configuration it began with. The end-of-turn critic
(``protocols.critic``) passes a turn only on such a run of the project as it is at Stop.

The face below (the service, and the modules the critic uses in the hook) loads on first
use (PEP 562), so importing the package costs nothing.
"""

from __future__ import annotations

from ithaca.kernel import lazy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ithaca.verification import digest, judgement, records, run, runners, start, turn
    from ithaca.verification.service import VerificationService

_FACE = {
    "VerificationService": "ithaca.verification.service:VerificationService",
    "digest": "ithaca.verification.digest",
    "judgement": "ithaca.verification.judgement",
    "records": "ithaca.verification.records",
    "run": "ithaca.verification.run",
    "runners": "ithaca.verification.runners",
    "start": "ithaca.verification.start",
    "turn": "ithaca.verification.turn",
}
__all__ = [
    "VerificationService",
    "digest",
    "judgement",
    "records",
    "run",
    "runners",
    "start",
    "turn",
]
__getattr__ = lazy(__name__, _FACE)


# --- The manifest: what this part brings to the kernel's registries --------------------
# Plain data naming "module:attribute" targets (``ithaca.PARTS``).

MIGRATIONS = ((14, "verification.initial", "ithaca.verification.tables:VERIFICATION_V1"),)
MCP_TOOLS = ("ithaca.verification.tools:TOOLS",)
CLI_COMMANDS = {"verify": "ithaca.cli.commands.verify:group"}
