"""The refusals every document reader says, in one set of words: a parser's failure, a locked file, a text
longer than a model reads.

A damaged or hostile file can make a parser (pypdf, python-docx, openpyxl, xlrd, python-pptx, odfdo) raise any
exception at all; to the person who added the file it means one thing, that this file cannot be read as the
kind it claims to be. The readers' own refusals (DocumentError) pass as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from core.errors import DocumentError

# what to do with an Office file locked with a password, after its name
LOCKED_OFFICE_FILE = (
    "is locked with a password: open it, remove the password (in Office: File > Info > Protect > Encrypt with "
    "Password) and add it again"
)


def too_much_text(name: str, unit: str) -> DocumentError:
    """The refusal of the file `name`, whose text passes what a model reads at once; `unit`: the parts a person
    can add instead, in words ("pages", "slides")."""
    return DocumentError(f"{name} holds more text than a model reads at once: add the {unit} you need")


@contextmanager
def said_as_damaged(name: str, kind: str) -> Iterator[None]:
    """Turn any exception inside into DocumentError("`name` is damaged, or not `kind` this reader understands
    (what the parser said)"); `kind` in words with its article ("an Excel workbook")."""
    try:
        yield
    except DocumentError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged file can make a parser raise anything: said in words
        raise DocumentError(f"{name} is damaged, or not {kind} this reader understands ({error})") from error
