"""The breadcrumb's budget: whatever the summary, at most 2,048 UTF-8 bytes of whole lines
ending with the pointer to the full context (reference §12)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ithaca.delivery.breadcrumb import MAX_BYTES, POINTER, render, with_note

text = st.text(min_size=1, max_size=300)
summaries = st.fixed_dictionaries(
    {
        "change": st.none() | st.fixed_dictionaries({"id": text, "kind": text, "status": text}),
        "task": st.none() | st.fixed_dictionaries({"id": text, "title": text, "status": text}),
        "session": st.none()
        | st.fixed_dictionaries({"id": text, "lease_minutes": st.integers(0, 10**6)}),
        "checkpoints": st.lists(
            st.fixed_dictionaries(
                {"stage": text, "revision": st.integers(1, 10**9), "status": text}
            ),
            max_size=20,
        ),
        "decisions": st.fixed_dictionaries(
            {"accepted": st.integers(0, 10**9), "deferred": st.integers(0, 10**9)}
        ),
        "attention": st.lists(text, max_size=40),
    }
)


@given(summaries, st.none() | text)
def test_any_summary_fits_in_whole_lines_ending_with_the_pointer(summary, note):
    rendered = render(summary, note=note)
    assert len(rendered.encode("utf-8")) <= MAX_BYTES
    assert rendered.endswith("\n" + POINTER)
    assert rendered.startswith("[Ithaca delivery] ") or rendered == POINTER
    noted = with_note(rendered, "(note)")
    assert len(noted.encode("utf-8")) <= MAX_BYTES and noted.endswith(POINTER)


def test_many_attention_codes_are_counted_not_listed():
    summary = {"change": None, "attention": [f"CODE_{n}" for n in range(15)]}
    assert render(summary).splitlines()[1] == (
        "Attention: " + ", ".join(f"CODE_{n}" for n in range(12)) + " (+3 more)"
    )
