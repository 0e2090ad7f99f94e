"""Text files people write by hand (a conversation for `generate`, a JSON schema, mcp.json, a hardware
description, the app's settings file), read in the encodings Windows' own tools save them in.

UTF-8 is read with or without the byte-order mark that Notepad put in front of "UTF-8" files until 2019 and
that many editors still offer; UTF-16 is read by its mark, which is what Windows PowerShell 5.1's `>` and
`Out-File` write. Python's own readers refuse the first (`json` calls the mark an error) and fail on the
second with a UnicodeDecodeError's traceback. Any other bytes are refused with the position of the first one
that is not text and what to do.
"""

from __future__ import annotations

import codecs
from pathlib import Path

from core.errors import TextEncodingError

# UTF-32's marks begin with UTF-16's; nothing people use writes UTF-32, so they are not told apart
_MARKED_ENCODINGS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, name: str) -> str:
    """`data` as text: UTF-16 or UTF-8 by its byte-order mark, else UTF-8.

    Raises:
        TextEncodingError: the bytes are not text in those encodings; `name` says which file in the message.
    """
    encoding = next((encoding for mark, encoding in _MARKED_ENCODINGS if data.startswith(mark)), "utf-8")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as error:
        byte = data[error.start]
        raise TextEncodingError(
            f"{name} is not UTF-8 text (byte 0x{byte:02X} at position {error.start:,} is not a character in "
            f"{'UTF-16' if encoding == 'utf-16' else 'UTF-8'}): save it again as UTF-8 (in Notepad: Save as, "
            "Encoding: UTF-8)"
        ) from error


def read_text_file(path: str | Path) -> str:
    """The text of the file at `path` (see the module's docstring for the encodings read).

    Raises:
        OSError: the file cannot be read (FileNotFoundError, IsADirectoryError, PermissionError, ...).
        TextEncodingError: its bytes are not text.
    """
    return decode_text(Path(path).read_bytes(), str(path))
