"""Text files given to a message (dropped on the message box, pasted after a Copy in the file manager, or
picked with the paperclip button) become part of it, as LM Studio and Jan attach a document: the file's name,
then its text in a fenced block the model reads as one piece.

The person chose the file, but what it is must still be checked before it is read: only regular files are
read (a pipe or a device would never end, and the window would hang on it), only up to MAX_FILE_BYTES, and
only text (UTF-8, or UTF-8 or UTF-16 with a byte-order mark, as core.system.text_files reads a file written by
hand). A PDF, a Word file or an image is refused in words, and so is a file larger than any model here reads.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from core.errors import TextEncodingError
from core.planning.sizes import format_bytes
from core.system.text_files import decode_text

# 1 MB of text is about 250,000 tokens, past the longest context window of the catalog's models (128k)
MAX_FILE_BYTES = 1 << 20
NOT_READ = "(PDF, Word and image files cannot be read; save the text as a .txt file)"
# how the formats people try most begin: PDF, Office's zip (docx, xlsx), PNG, JPEG, GIF
BINARY_STARTS = (b"%PDF", b"PK\x03\x04", b"\x89PNG", b"\xff\xd8\xff", b"GIF8")


@dataclass
class Attachment:
    """What the files give the message: `text` to insert (empty when none could be read), and `problems`,
    one sentence for each file that was not read."""

    text: str = ""
    problems: list[str] = field(default_factory=list)


def attach_files(paths: list[Path]) -> Attachment:
    """The text of each file in `paths`, each as `fenced(name, text)`, in order."""
    attachment = Attachment()
    blocks = []
    for path in paths:
        try:
            blocks.append(fenced(path.name, _read(path)))
        except _NotRead as refusal:
            attachment.problems.append(str(refusal))
    attachment.text = "\n".join(blocks)
    return attachment


# a block `fenced` wrote: its name line, then the fence, the text and the same fence (group 1: the name)
ATTACHED_BLOCK = re.compile(r"^([^\n]+):\n(`{3,})\n.*?\n\2$", re.DOTALL | re.MULTILINE)


def fenced(name: str, text: str) -> str:
    """`name:` and `text` in a Markdown code fence longer than any run of backquotes inside it, so a file that
    holds a fence of its own (a README) stays one block."""
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{name}:\n{fence}\n{text.rstrip()}\n{fence}\n"


class _NotRead(Exception):
    """A file that is not added, and why, in words."""


def _read(path: Path) -> str:
    name = path.name or str(path)
    try:
        if path.is_dir():
            raise _NotRead(f"{name} is a folder: drop the files in it one by one.")
        if not path.is_file():  # gone, or a pipe, a socket or a device
            raise _NotRead(f"{name} is not a file that can be read.")
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise _NotRead(
                f"{name} is {format_bytes(size)}, more text than a model reads at once "
                f"(at most {format_bytes(MAX_FILE_BYTES)}): add the part you need."
            )
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)  # a file that grew since its size was read stops here too
    except OSError as error:
        raise _NotRead(f"{name} could not be read ({error.strerror or error}).") from error
    if len(data) > MAX_FILE_BYTES:
        raise _NotRead(f"{name} is more text than a model reads at once: add the part you need.")
    if data.startswith(BINARY_STARTS):
        raise _NotRead(f"{name} is not a text file {NOT_READ}.")
    try:
        text = decode_text(data, name)
    except TextEncodingError as error:  # a NUL: a binary file; else text in another encoding (Windows' "ANSI")
        raise _NotRead(f"{name} is not a text file {NOT_READ}." if b"\0" in data else f"{error}.") from error
    if "\0" in text:  # text has no NUL: a binary file whose bytes happen to decode
        raise _NotRead(f"{name} is not a text file {NOT_READ}.")
    if not text.strip():
        raise _NotRead(f"{name} is empty.")
    return text
