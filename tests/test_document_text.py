"""The text of documents given to a message (core.text.document_text) and `specexec text`: real PDFs written
by pypdf (pages with text, a scan without any, passwords), a damaged one, and the command's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from core.errors import DocumentError
from core.text.document_text import MAX_PDF_PAGES, document_text, is_pdf


def write_pdf(
    path: Path, pages: list[str], user_password: str | None = None, owner_password: str | None = None
) -> Path:
    """A PDF whose pages hold `pages`' lines of text in Helvetica ("" for a page with no text, as a scan)."""
    from pypdf import PdfWriter
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = PdfWriter()
    for text in pages:
        page = writer.add_blank_page(300, 200)
        font = DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        content = DecodedStreamObject()
        content.set_data(f"BT /F1 18 Tf 20 100 Td ({text}) Tj ET".encode("latin-1") if text else b"")
        page.replace_contents(content)
    if user_password is not None or owner_password is not None:
        writer.encrypt(user_password or "", owner_password, algorithm="RC4-128")
    writer.write(path)
    return path


def test_a_pdfs_pages_come_as_text_apart_by_a_blank_line(tmp_path):
    pdf = write_pdf(tmp_path / "minutes.pdf", ["Budget approved", "", "Next meeting: Friday"])
    assert is_pdf(pdf) and not is_pdf(tmp_path) and not is_pdf(tmp_path / "gone.pdf")
    assert document_text(pdf) == "Budget approved\n\nNext meeting: Friday"  # the empty page leaves no gap


def test_a_pdf_only_its_owner_locked_is_read_and_one_that_needs_a_password_is_said(tmp_path):
    """A password only against printing or copying opens with none (as every PDF viewer opens it)."""
    assert document_text(write_pdf(tmp_path / "owner.pdf", ["Shared notes"], owner_password="o")) == "Shared notes"
    with pytest.raises(DocumentError, match="locked.pdf is locked with a password: open it, and save or print it"):
        document_text(write_pdf(tmp_path / "locked.pdf", ["Secret"], user_password="u"))


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda path: write_pdf(path, ["", ""]), "has no text to read: it is probably scanned pages"),
        (lambda path: path.write_bytes(b"%PDF-1.7\n1 0 obj <<"), "is damaged, or not a PDF this reader understands"),
        (lambda path: write_pdf(path, [""] * (MAX_PDF_PAGES + 1)), f"has {MAX_PDF_PAGES + 1:,} pages, more than"),
    ],
)
def test_a_pdf_without_text_damaged_or_too_long_is_refused_in_words(tmp_path, make, words):
    path = tmp_path / "doc.pdf"
    make(path)
    with pytest.raises(DocumentError, match=words):
        document_text(path)


def test_specexec_text_prints_a_documents_text_exactly_and_refuses_in_words(tmp_path, capsys):
    pdf = write_pdf(tmp_path / "report.pdf", ["Sales rose", "Costs fell"])
    result = run_cli(capsys, "text", str(pdf))
    assert result.returncode == 0 and result.stdout == "Sales rose\n\nCosts fell"
    notes = tmp_path / "notes.md"
    notes.write_bytes("\ufeff# Grüße\r\n".encode())  # Notepad's mark and line ends: the mark goes, the text stays
    result = run_cli(capsys, "text", str(notes), "--json")
    assert result.returncode == 0 and json.loads(result.stdout) == {"name": "notes.md", "text": "# Grüße\r\n"}
    result = run_cli(capsys, "text", str(tmp_path / "photo.png"))
    assert result.returncode == 2 and result.stderr.startswith("error: photo.png is not a file that can be read")
