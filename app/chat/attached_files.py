"""Files given to a message (dropped on the message box or the chat, pasted after a Copy in the file manager,
or picked with the paperclip button) become part of it, as LM Studio and Jan attach a document: the file's
name, then its text in a fenced block the model reads as one piece (core.text.document_text.fenced, which
`specexec chat`'s /file writes too).

What a file may be, and how it is read, is core.text.document_text's: text files are read here at once (a
read of at most a megabyte, after the checks that keep a pipe or a device from hanging the window); PDFs,
Office documents (Word, Excel, PowerPoint, and those from before 2007) and OpenDocument files are left to
app.chat.document_reading, which parses them in a process of its own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.errors import DocumentError
from core.text.document_text import ATTACHED_BLOCK, document_text, fenced, read_apart


@dataclass
class Attachment:
    """What the files give the message at once: `text` to insert (empty when none could be read),
    `problems` (one sentence for each file that was not read) and the files `to_read` in a process of their
    own (PDFs, Office and OpenDocument files)."""

    text: str = ""
    problems: list[str] = field(default_factory=list)
    to_read: list[Path] = field(default_factory=list)


def attach_files(paths: list[Path]) -> Attachment:
    """The text files of `paths`, each as `fenced(name, text)`, in order; the PDFs, Office and OpenDocument
    files among them apart."""
    attachment = Attachment()
    blocks = []
    for path in paths:
        if read_apart(path):
            attachment.to_read.append(path)
            continue
        try:
            blocks.append(fenced(path.name, document_text(path)))
        except DocumentError as refusal:
            attachment.problems.append(f"{refusal}.")
    attachment.text = "\n".join(blocks)
    return attachment


def documents_folded(text: str) -> str:
    """`text` with each document added to it (a `fenced` block) as one line that names it, "minutes.txt
    (document, 3 lines)": how a message of yours shows them until *Show more* (the words typed around them
    stay as typed)."""

    def one_line(block) -> str:  # noqa: ANN001 - a re.Match
        lines = block.group(0).count("\n") - 2  # the name's line and the two fences are not the document's
        return f"{block.group(1)} (document, {lines:,} line{'s' if lines != 1 else ''})"

    return ATTACHED_BLOCK.sub(one_line, text)
