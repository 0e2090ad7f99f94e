"""Text from a model or a tool, made safe to print on a terminal.

A terminal obeys the control characters in what it prints: ESC starts the sequences that move the cursor,
recolour or hide text, retitle the window, make links or write the clipboard (OSC 52); a carriage return or a
backspace writes over what is already on the line; the bidirectional overrides reorder what is shown. An
answer, or a tool's result a web page put words in, could so show `specexec chat`'s user one thing while
saying another, or hide a tool call's real arguments behind the question that asks to allow it. On a
terminal these characters are shown as what they are; text written to a file or a pipe stays exact.
"""

from __future__ import annotations

import re
from typing import TextIO

# C0 controls but tab and newline, DEL, C1 controls; bidirectional embeddings, overrides and isolates
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_CONTROL_PICTURES = 0x2400  # U+2400-U+241F: a visible symbol for each C0 control (U+241B is ␛)


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code == 0x0D or code >= 0x202A:  # a carriage return (\r\n ends a line as \n does), bidi marks
        return ""
    if code < 0x20:
        return chr(_CONTROL_PICTURES + code)
    return "\u2421" if code == 0x7F else "\ufffd"  # DEL's picture; a C1 control has none


def shown_on_terminal(text: str) -> str:
    """`text` with every control character a terminal would obey shown as a symbol (ESC as ␛), carriage
    returns and bidirectional overrides left out; tab and newline kept."""
    return _UNSAFE.sub(_shown, text)


def for_stream(text: str, stream: TextIO) -> str:
    """`text` as `stream` should get it: made safe on a terminal, exact in a file or a pipe."""
    isatty = getattr(stream, "isatty", None)
    return shown_on_terminal(text) if isatty is not None and isatty() else text
