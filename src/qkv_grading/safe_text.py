"""Student-controlled text made safe to store and to show, wherever it goes.

Text that a submission controls (what its cells printed, its error messages, its own cells,
the values it answered, the names in its files) reaches the feedback page, the autograded
notebook, the gradebook, ``grades.csv`` and the instructor's terminal. Two functions make
it safe, and every writer of such text calls one of them:

- :func:`stored`: for every file and page. Lone surrogates (which no UTF-8 file can hold)
  become U+FFFD; control characters other than tab and newline (the terminal's escape
  sequences start with one), bidirectional controls (which reorder what a reader sees,
  as in "Trojan Source") and Unicode's line and paragraph separators become visible
  escapes such as ``\\x1b`` or ``\\u202e``. Text that holds none of them is returned as it
  is: letters of every script, emoji and combining marks pass.
- :func:`for_terminal`: for one line of the console. :func:`stored`, then every character
  that is not printable (tab and newline included) as its escape, so that no line can
  move the cursor, erase a line, change colours or look like two lines.

Neither ever raises, and both are idempotent: an escape is printable text.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL and C1 controls; bidirectional embeddings, overrides,
# isolates and marks; the line and paragraph separators. Each becomes a visible escape.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def stored(text) -> str:
    """``text`` (any object, as ``str``) safe for a file, a page, a notebook, a CSV cell or the gradebook."""
    if not isinstance(text, str):
        try:
            text = str(text)
        except Exception:  # a hostile __str__
            return f"<{type(text).__name__}>"
    text = _SURROGATE.sub("\ufffd", text)
    return _UNSAFE.sub(_escape, text)


def for_terminal(text) -> str:
    """``text`` as one line that a terminal shows as it is: :func:`stored`, then no unprintable character."""
    text = stored(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape_char(ch) for ch in text)


def _escape_char(ch: str) -> str:
    code = ord(ch)
    if ch == "\t":
        return "\\t"
    if ch == "\n":
        return "\\n"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"
