"""``shlex.split`` for hook processes, without importing ``shlex`` (and its ``re``).

Command patterns in protocol constraints are split like a shell line every time a hook
checks them, and ``import shlex`` alone would bring ``re`` into every such hook. This is
the same POSIX-mode state machine ``shlex.split`` runs (whitespace splits words, no
comments, ``'…'`` literal, ``"…"`` honouring ``\\"`` and ``\\\\``, ``\\`` escaping any
character outside quotes), with the same words and the same errors.
"""

from __future__ import annotations

WHITESPACE = " \t\r\n"
_QUOTES = "'\""
_BETWEEN, _WORD, _ESCAPE = " ", "a", "\\"


def split(text: str) -> list[str]:
    """``shlex.split(text)``: the words of a shell-like line; ``ValueError`` when a quote
    is left open or the line ends in a lone backslash."""
    words: list[str] = []
    word = ""
    quoted = False  # the word had quotes, so it counts even when empty ('')
    state = _BETWEEN  # or _WORD, _ESCAPE, or the quote character we are inside
    after_escape = _WORD
    for char in text:
        if state in (_BETWEEN, _WORD):
            if char in WHITESPACE:
                if word or quoted:
                    words.append(word)
                    word, quoted = "", False
                state = _BETWEEN
            elif char == _ESCAPE:
                after_escape, state = _WORD, _ESCAPE
            elif char in _QUOTES:
                quoted, state = True, char
            else:
                word += char
                state = _WORD
        elif state == _ESCAPE:
            # Inside double quotes only the quote and the backslash itself are escaped.
            if after_escape in _QUOTES and char not in (_ESCAPE, after_escape):
                word += _ESCAPE
            word += char
            state = after_escape
        elif char == state:
            state = _WORD
        elif char == _ESCAPE and state == '"':
            after_escape, state = state, _ESCAPE
        else:
            word += char
    if state in _QUOTES:
        raise ValueError("No closing quotation")
    if state == _ESCAPE:
        raise ValueError("No escaped character")
    if word or quoted:
        words.append(word)
    return words
