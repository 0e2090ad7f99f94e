"""The text of a document a person gives a model (a file added to a chat message): a text file read as
core.system.text_files reads a file written by hand, a PDF's text through pypdf (pure Python, BSD, the
field's own reader), a Word document's through python-docx (MIT, on lxml; the field's own reader too), an
OpenDocument text's (LibreOffice Writer's .odt) as Markdown through odfdo (Apache 2.0, on lxml), an Excel
workbook's or a LibreOffice Calc spreadsheet's as Markdown tables (core.text.spreadsheet_text, openpyxl and
odfdo) and a PowerPoint or LibreOffice Impress presentation's slide by slide (core.text.slides_text,
python-pptx and odfdo). Office's macro-enabled files, templates and shows read as the documents they hold
(core.text.office_packages), as do LibreOffice's sheet and presentation templates.

What the file is gets checked before it is read: only regular files (a pipe or a device would never end),
only up to the limits below, only text; an image, a LibreOffice drawing or an old .doc is refused in
words. PDFs and Office and OpenDocument files are parsed only in a process of its own (`specexec text FILE
--json`, which the app and the API server start; `reader_reply` reads what it said): a parser fed a damaged
or hostile file can loop or swell, and a process can be stopped where a thread cannot.
"""

from __future__ import annotations

import json
import logging
import re
import struct
from collections.abc import Iterable
from pathlib import Path

from core.errors import DocumentError, TextEncodingError
from core.system.text_files import decode_text
from core.text.odf_spaces import check_spaces
from core.text.office_packages import word_document
from core.text.parser_faults import LOCKED_OFFICE_FILE, said_as_damaged, too_much_text
from core.text.slides_text import impress_text, presentation_text
from core.text.spreadsheet_text import calc_text, old_workbook_text, workbook_text

log = logging.getLogger(__name__)

# how long a reader child (`specexec text`, the app's and the API server's) may take: a few hundred pages take
# seconds; a minute is a parser that does not end
READ_TIMEOUT_S = 60.0
MAX_TEXT_BYTES = 1 << 20  # about 250,000 tokens of text: past every context window of the catalog's models
MAX_PDF_BYTES = 64 << 20  # scanned pages weigh megabytes each, and hold no text anyway
MAX_PDF_PAGES = 2000
MAX_OFFICE_BYTES = 64 << 20  # an Office or OpenDocument file's pictures weigh most of it
MAX_OFFICE_UNPACKED = 256 << 20  # what its parts unpack to, as the zip's directory says (a zip bomb says more)
# An OpenDocument text writes repeated table cells as a count: a few bytes can ask for billions. A table past
# this (a big one's cells) is refused before any is made; runs of spaces: core.text.odf_spaces.
MAX_ODF_TABLE_CELLS = 1_000_000
PDF_START = b"%PDF-"
ZIP_START = b"PK\x03\x04"  # Office's formats since 2007 (.docx, .xlsx, .pptx) and OpenDocument's
OLD_OFFICE_START = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # .doc, .xls, .ppt before 2007, and locked ones since
ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")  # the stream a password-locked Office file holds
CFB_HEADER_BYTES = 512  # the old container's header: its sector size at 0x1E, its directory's first sector at 0x30
NOT_TEXT = "pictures and other files cannot be read: save the text as a .txt file, a PDF or a Word document"
DOCUMENT_KINDS = (
    "a text file, a PDF, an Office document (Word, Excel, PowerPoint) or a LibreOffice text, sheet or presentation"
)
# how the pictures people try most begin: PNG, JPEG, GIF
BINARY_STARTS = (b"\x89PNG", b"\xff\xd8\xff", b"GIF8")
ERROR_LINE = "error: "  # how `specexec` (core.cli.main) starts a failed command's reason on stderr
# the zip's part that says which Office file it is, for those read here
WORD_PART = "word/document.xml"
EXCEL_PART = "xl/workbook.xml"  # .xlsx, and .xlsm (its macros are not run, nor read)
POWERPOINT_PART = "ppt/presentation.xml"
# and what to do with those that are not read
OFFICE_PARTS = {
    "xl/workbook.bin": "an Excel binary workbook (.xlsb), which cannot be read: save it as an ordinary Excel "
    "workbook (.xlsx) and add that",
}
# an OpenDocument file's first part, `mimetype`, names its kind (a template's: its kind's, and "-template")
ODF_MIMETYPE_PART = "mimetype"
ODF_TEXT = "application/vnd.oasis.opendocument.text"
ODF_SPREADSHEETS = (
    "application/vnd.oasis.opendocument.spreadsheet",
    "application/vnd.oasis.opendocument.spreadsheet-template",
)
ODF_PRESENTATIONS = (
    "application/vnd.oasis.opendocument.presentation",
    "application/vnd.oasis.opendocument.presentation-template",
)
# and what to do with those that are not read (odfdo's Markdown takes no text template)
ODF_KINDS = {
    "application/vnd.oasis.opendocument.text-template": "a LibreOffice Writer template, which cannot be read: "
    "open it, save the document it makes (.odt) and add that",
    "application/vnd.oasis.opendocument.graphics": "a LibreOffice Draw drawing, which cannot be read: export "
    "it as a PDF (File > Export as PDF) and add that",
}


def read_apart(path: Path) -> bool:
    """Whether `path` is a regular file whose format is parsed in a process of its own: a PDF, a zip (an
    Office or OpenDocument file; the reader says what any other zip is) or an Office file from before 2007
    (the reader says what it is if no workbook). False when it cannot be read."""
    try:
        if not path.is_file():
            return False
        with path.open("rb") as handle:
            start = handle.read(len(OLD_OFFICE_START))
    except OSError:
        return False
    return start.startswith((PDF_START, ZIP_START, OLD_OFFICE_START))


def document_text(path: Path) -> str:
    """The text of the text file, PDF, Office document (Word, Excel, PowerPoint), OpenDocument text or
    spreadsheet at `path` (a PDF's pages apart by a blank line).

    Raises:
        DocumentError: it is not a regular file, cannot be read, is not text, holds no text (a scanned PDF),
            is locked by a password or passes the limits, in words that say what to do.
    """
    name = path.name or str(path)
    try:
        if path.is_dir():
            raise DocumentError(f"{name} is a folder: add the files in it one by one")
        if not path.is_file():  # gone, or a pipe, a socket or a device
            raise DocumentError(f"{name} is not a file that can be read")
        size_mb = path.stat().st_size / (1 << 20)
        with path.open("rb") as handle:
            data = handle.read(MAX_TEXT_BYTES + 1)  # a file that grew since its size was read stops here too
    except OSError as error:
        raise DocumentError(f"{name} could not be read ({error.strerror or error})") from error
    if data.startswith(PDF_START):
        if size_mb > MAX_PDF_BYTES >> 20:
            raise DocumentError(
                f"{name} is {size_mb:,.0f} MB, more than the {MAX_PDF_BYTES >> 20} MB a PDF may be here"
            )
        return _pdf_text(path, name)
    if data.startswith((ZIP_START, OLD_OFFICE_START)):
        if size_mb > MAX_OFFICE_BYTES >> 20:
            raise DocumentError(
                f"{name} is {size_mb:,.0f} MB, more than the {MAX_OFFICE_BYTES >> 20} MB a document may be here"
            )
        return _zip_text(path, name) if data.startswith(ZIP_START) else _old_office_text(path, name, data)
    if len(data) > MAX_TEXT_BYTES:
        raise DocumentError(
            f"{name} is more text than a model reads at once (more than {MAX_TEXT_BYTES >> 20} MB): "
            "add the part you need"
        )
    if data.startswith(BINARY_STARTS):
        raise DocumentError(f"{name} is not {DOCUMENT_KINDS} ({NOT_TEXT})")
    try:
        text = decode_text(data, name)
    except TextEncodingError as error:  # a NUL: a binary file; else text in another encoding (Windows' "ANSI")
        if b"\0" in data:
            raise DocumentError(f"{name} is not {DOCUMENT_KINDS} ({NOT_TEXT})") from error
        raise DocumentError(str(error)) from error
    if "\0" in text:  # text has no NUL: a binary file whose bytes happen to decode
        raise DocumentError(f"{name} is not {DOCUMENT_KINDS} ({NOT_TEXT})")
    if not text.strip():
        raise DocumentError(f"{name} is empty")
    return text


def _old_office_text(path: Path, name: str, start: bytes) -> str:
    """The text of a file in Office's container from before 2007 (`start`: its first bytes, as read): an Excel
    97-2003 workbook's (core.text.spreadsheet_text.old_workbook_text); a file of today's formats locked with a
    password (Office keeps those in that container), an old Word document or presentation is said with what to
    do."""
    if _is_encrypted_office(path, start):
        raise DocumentError(f"{name} {LOCKED_OFFICE_FILE}")
    text = old_workbook_text(path, name, MAX_TEXT_BYTES)
    if text is None:
        raise DocumentError(
            f"{name} is in the Word or PowerPoint format from before 2007 (.doc or .ppt), which cannot be read: "
            "open it and save it again in today's format (.docx or .pptx) or as a PDF"
        )
    return text


def _is_encrypted_office(path: Path, start: bytes) -> bool:
    """Whether the compound file at `path` (`start`: its first bytes, as read) is a password-locked Office file
    of today's formats: Office wraps those in the old container, with its package in a stream named
    "EncryptedPackage" (MS-OFFCRYPTO), whose name the container's directory holds in UTF-16. The directory's
    first sector, where the header says it is, holds the package's entry among the first few; `start` is
    searched too. One sector is read, not the file: an old .ppt may weigh tens of megabytes."""
    if ENCRYPTED_PACKAGE in start:
        return True
    if len(start) < CFB_HEADER_BYTES:
        return False
    sector_shift, first_sector = struct.unpack_from("<H", start, 0x1E)[0], struct.unpack_from("<I", start, 0x30)[0]
    if sector_shift not in (9, 12):  # 512-byte sectors (version 3) or 4,096 (version 4): a damaged header else
        return False
    try:
        with path.open("rb") as handle:
            handle.seek((first_sector + 1) << sector_shift)  # sector 0 follows the header's own sector
            return ENCRYPTED_PACKAGE in handle.read(1 << sector_shift)
    except (OSError, OverflowError):
        return False


def _pdf_text(path: Path, name: str) -> str:
    import logging

    from pypdf import PdfReader
    from pypdf.errors import DependencyError

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its notes on damaged but readable files are not news
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):  # a password only against printing opens with ""
            raise DocumentError(f"{name} is locked with a password: open it, and save or print it without one")
        if len(reader.pages) > MAX_PDF_PAGES:
            raise DocumentError(f"{name} has {len(reader.pages):,} pages, more than the {MAX_PDF_PAGES:,} read here")
        pages = _within_limit(((page.extract_text() or "").strip() for page in reader.pages), name, "pages")
    except DocumentError:
        raise
    except DependencyError as error:  # AES encryption needs the `cryptography` package
        raise DocumentError(f"{name} is encrypted in a way this reader cannot open") from error
    except Exception as error:  # noqa: BLE001 - a damaged file can make a parser raise anything: said in words
        raise DocumentError(f"{name} is damaged, or not a PDF this reader understands ({error})") from error
    text = "\n\n".join(page for page in pages if page)
    if not text:
        raise DocumentError(f"{name} has no text to read: it is probably scanned pages (pictures of text)")
    # a text layer may hold NULs, which no tokenizer wants, and lone surrogates, which are not text: U+FFFD
    return text.replace("\0", "").encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _within_limit(texts: Iterable[str], name: str, unit: str) -> list[str]:
    """`texts` (a document's pages or blocks, read one by one as they are asked for) until they pass
    MAX_TEXT_BYTES: a document longer than a model reads is refused as soon as that is known, not after the
    whole file is parsed. `unit`: what to keep, in the words that say so ("pages", "part")."""
    kept, chars = [], 0
    for text in texts:
        chars += len(text)
        if chars > MAX_TEXT_BYTES:
            raise too_much_text(name, unit)
        kept.append(text)
    return kept


def _zip_text(path: Path, name: str) -> str:
    """The text of a zip that is a Word, Excel or PowerPoint file or an OpenDocument text, spreadsheet or
    presentation, told apart by their parts; any other zip (a LibreOffice drawing, an archive) is said with
    what to do."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            parts = {info.filename: info.file_size for info in archive.infolist()}
            mimetype = ""
            if 0 < parts.get(ODF_MIMETYPE_PART, 0) <= 100:  # a short line of ASCII where it is an ODF file
                mimetype = archive.read(ODF_MIMETYPE_PART).decode("ascii", "replace").strip()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise DocumentError(f"{name} is damaged, or not a document this reader understands ({error})") from error
    read = next((part for part in (WORD_PART, EXCEL_PART, POWERPOINT_PART) if part in parts), None)
    if read is None and mimetype not in (ODF_TEXT, *ODF_SPREADSHEETS, *ODF_PRESENTATIONS):
        what = ODF_KINDS.get(mimetype) or next((words for part, words in OFFICE_PARTS.items() if part in parts), None)
        raise DocumentError(f"{name} is {what or 'a zip archive: unpack it and add the files in it'}")
    if sum(parts.values()) > MAX_OFFICE_UNPACKED:
        raise DocumentError(
            f"{name} unpacks to more than {MAX_OFFICE_UNPACKED >> 20} MB, more than a document may be here"
        )
    if read == WORD_PART:
        return _word_text(path, name)
    if read == EXCEL_PART:
        return workbook_text(path, name, MAX_TEXT_BYTES)
    if read == POWERPOINT_PART:
        return presentation_text(path, name, MAX_TEXT_BYTES)
    if mimetype in ODF_SPREADSHEETS:
        return calc_text(path, name, MAX_TEXT_BYTES)
    if mimetype in ODF_PRESENTATIONS:
        return impress_text(path, name, MAX_TEXT_BYTES)
    return _odt_text(path, name)


def _word_text(path: Path, name: str) -> str:
    """A Word document's text in reading order: paragraphs (headings as Markdown headings, list items as
    "- "), tables row by row with their cells apart by " | " (a merged cell once). Headers, footers, notes
    and pictures are left out."""
    with said_as_damaged(name, "a Word document"):
        from docx.table import Table

        blocks = word_document(path).iter_inner_content()
        lines = _within_limit(
            (_table_text(block) if isinstance(block, Table) else _paragraph_text(block) for block in blocks),
            name,
            "part",
        )
    text = "\n".join(lines).strip()
    if not text:
        raise DocumentError(f"{name} has no text to read")
    return text.replace("\0", "")


def _odt_text(path: Path, name: str) -> str:
    """An OpenDocument text as Markdown, as odfdo writes it: headings, lists, tables, emphasis, notes.
    The counts its format may repeat (spaces, table cells) are checked first (check_spaces,
    MAX_ODF_TABLE_CELLS): odfdo makes what they ask for."""
    with said_as_damaged(name, "an OpenDocument text"):
        from odfdo import Document

        document = Document(path)
        body = document.body
        check_spaces(body, name)
        for table in body.get_tables():
            if table.height * table.width > MAX_ODF_TABLE_CELLS:
                raise DocumentError(
                    f"{name} has a table of {table.height:,} rows and {table.width:,} columns, more than is "
                    "read here: copy the part you need into a new document"
                )
        text = document.to_markdown()
    text = str(text).replace("\0", "").strip()
    if not text:
        raise DocumentError(f"{name} has no text to read")
    if len(text) > MAX_TEXT_BYTES:
        raise too_much_text(name, "part")
    return text


def _paragraph_text(paragraph) -> str:  # noqa: ANN001 - a docx.text.paragraph.Paragraph
    style = (paragraph.style.name if paragraph.style is not None else "") or ""
    text = paragraph.text
    if not text.strip():
        return ""
    if style.startswith("Heading ") and style[8:].isdigit():
        return "#" * min(int(style[8:]), 6) + " " + text.strip()
    if style == "Title":
        return "# " + text.strip()
    if style.startswith("List"):
        return "- " + text.strip()
    return text


def _table_text(table) -> str:  # noqa: ANN001 - a docx.table.Table
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:  # a merged cell comes once per column it spans, all on its one <w:tc> element
            if id(cell._tc) not in seen:
                seen.add(id(cell._tc))
                cells.append(" ".join(cell.text.split()))
        rows.append(" | ".join(cells))
    return "\n".join(rows)


def reader_reply(code: int, out: bytes, errors: str, name: str) -> tuple[str, str]:
    """(name, text) from what a `specexec text FILE --json` child printed and its exit code; `name`: the file's,
    for the words when the child said nothing.

    Raises:
        DocumentError: the reader's own reason (its last `error:` line), or that `name` could not be read
            where it ended without one (killed, or its output damaged: logged).
    """
    if code == 0:
        try:
            record = json.loads(out)
            return str(record["name"]), str(record["text"])
        except (ValueError, KeyError, TypeError) as error:
            log.warning("the text of %s came unreadable: %s", name, error)
    said = [line.removeprefix(ERROR_LINE) for line in errors.splitlines() if line.startswith(ERROR_LINE)]
    if not said:
        log.warning("reading %s ended with code %s: %s", name, code, errors[-2000:])
    raise DocumentError(said[-1] if said else f"{name} could not be read")


# a block `fenced` wrote: its name line, then the fence, the text and the same fence (group 1: the name)
ATTACHED_BLOCK = re.compile(r"^([^\n]+):\n(`{3,})\n.*?\n\2$", re.DOTALL | re.MULTILINE)


def fenced(name: str, text: str) -> str:
    """`name:` and `text` in a Markdown code fence longer than any run of backquotes inside it, so a file that
    holds a fence of its own (a README) stays one block. A name's characters that are not shown as written (a
    line break, which Linux allows in a file name and which would end the name's line; a mark that reverses
    what follows it) become "?"."""
    name = "".join(character if character.isprintable() else "?" for character in name)
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{name}:\n{fence}\n{text.rstrip()}\n{fence}\n"
