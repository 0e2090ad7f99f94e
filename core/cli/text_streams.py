"""The command line's standard streams in UTF-8, whatever the system's code page.

On Windows, Python reads and writes a redirected stream (a file, a pipe, the app or a script that runs
`specexec`) in the "ANSI" code page, cp1252 in the West, and writes strictly: an answer holding an emoji,
Chinese (Qwen's) or a mathematical sign ended in a UnicodeEncodeError's traceback halfway through, once sent
to a file or another program; and a UTF-8 prompt piped in arrived as "cafÃ©". A console needs nothing
(Python talks to it in UTF-16), nor does Linux or macOS with a UTF-8 locale, so streams already in UTF-8 keep
their settings. The error handlers are Python's own for UTF-8 streams (`surrogateescape` for stdin and
stdout, as on Linux, where what is not UTF-8 becomes U+FFFD further on; `backslashreplace` for stderr).
"""

from __future__ import annotations

import codecs
import io
import sys

ERRORS = {"stdin": "surrogateescape", "stdout": "surrogateescape", "stderr": "backslashreplace"}


def use_utf8_streams() -> None:
    """Switch sys.stdin, sys.stdout and sys.stderr to UTF-8 where they are text streams in another encoding
    (before anything is read from or written to them)."""
    for name, errors in ERRORS.items():
        stream = getattr(sys, name)
        if isinstance(stream, io.TextIOWrapper) and codecs.lookup(stream.encoding).name != "utf-8":
            stream.reconfigure(encoding="utf-8", errors=errors)
