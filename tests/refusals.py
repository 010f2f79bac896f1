"""Reading a rendered refusal: the lead every host answer opens with, then the gate's own
reason, which is what most tests assert on."""

from __future__ import annotations

import re

LEAD = re.compile(
    r"(?:(?:Refused by Ithaca policy|Held by Ithaca policy"
    r"|Ithaca policy asks the user to confirm this call)"
    r"(?: \[\w+\])?, on purpose \(not a hook failure\)\."
    r"|Ithaca failed closed: it could not decide, so it refused\.)([ \n]|$)"
)


def gate_reason(text: str) -> str:
    """The reason after the lead; fails the test when the lead is missing."""
    opened = LEAD.match(text)
    assert opened, f"a refusal without Ithaca's lead: {text!r}"
    return text[opened.end() :]
