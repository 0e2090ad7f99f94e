"""The text of documents given to a message (core.text.document_text) and `specexec text`: real PDFs written
by pypdf (pages with text, a scan without any, passwords), Word documents written by python-docx, OpenDocument
texts written by odfdo and by hand (hostile ones too), damaged files, and the command's contract."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from core.errors import DocumentError
from core.text.document_text import MAX_PDF_PAGES, document_text, read_apart


# The billion laughs: nine entities, each ten of the one before, so &lol9; asks for a billion "lol"s (for a
# document's XML, after its <?xml ...?> line)
BILLION_LAUGHS = "<!DOCTYPE lolz [{}]>".format(
    "".join(
        f'<!ENTITY lol{n} "{("&lol%d;" % (n - 1)) * 10}">' if n > 1 else '<!ENTITY lol1 "lol">' for n in range(1, 10)
    )
)


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
    assert read_apart(pdf) and not read_apart(tmp_path) and not read_apart(tmp_path / "gone.pdf")
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


# Word documents ------------------------------------------------------------------------------------------------


def write_docx(path: Path) -> Path:
    """A Word document as Word writes one (python-docx): a title, a heading, a paragraph, a list item, a table
    with a cell merged across two columns, and text after it."""
    import docx

    document = docx.Document()
    document.add_heading("Quarterly report", 0)
    document.add_heading("Figures", 2)
    document.add_paragraph("Sales grew by 12%.")
    document.add_paragraph("Costs fell", style="List Bullet")
    table = document.add_table(rows=2, cols=3)
    for cell, text in zip(table.rows[0].cells, ("region", "sales", "note")):
        cell.text = text
    table.cell(1, 0).text = "North"
    table.cell(1, 1).merge(table.cell(1, 2)).text = "12  (flat)"
    document.add_paragraph("Grüße ✓")
    document.save(path)
    return path


REPORT = (
    "# Quarterly report\n## Figures\nSales grew by 12%.\n- Costs fell\nregion | sales | note\nNorth | 12 (flat)\n"
    "Grüße ✓"
)


def test_a_word_documents_text_comes_in_reading_order_with_its_headings_lists_and_tables(tmp_path):
    word = write_docx(tmp_path / "report.docx")
    assert read_apart(word)  # a zip: parsed in a process of its own, as a PDF is
    assert document_text(word) == REPORT


def zip_with(path: Path, parts: dict[str, bytes]) -> Path:
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return path


@pytest.mark.parametrize(
    ("parts", "words"),
    [
        ({"xl/workbook.xml": b"<w/>"}, "is damaged, or not an Excel workbook this reader understands"),
        ({"ppt/presentation.xml": b"<p/>"}, "is damaged, or not a PowerPoint presentation this reader understands"),
        ({"photos/cat.jpg": b"\xff\xd8\xff"}, "is a zip archive: unpack it and add the files in it"),
        ({"word/document.xml": b"<not closed"}, "is damaged, or not a Word document this reader understands"),
    ],
)
def test_other_office_files_archives_and_damaged_documents_are_said_in_words(tmp_path, parts, words):
    with pytest.raises(DocumentError, match=words):
        document_text(zip_with(tmp_path / "file.docx", parts))


def test_a_word_document_that_unpacks_past_the_limit_is_refused_before_it_is_parsed(tmp_path):
    """A zip bomb: a few hundred kilobytes on disk that say they unpack to more than MAX_OFFICE_UNPACKED."""
    import zipfile

    from core.text.document_text import MAX_OFFICE_UNPACKED

    bomb = tmp_path / "bomb.docx"
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            chunk = b" " * (1 << 20)
            for _ in range((MAX_OFFICE_UNPACKED >> 20) + 1):
                part.write(chunk)
    assert bomb.stat().st_size < 2 << 20
    with pytest.raises(DocumentError, match="bomb.docx unpacks to more than 256 MB"):
        document_text(bomb)


def test_a_truncated_or_empty_word_document_is_said_in_words(tmp_path):
    whole = write_docx(tmp_path / "whole.docx").read_bytes()
    truncated = tmp_path / "truncated.docx"
    truncated.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DocumentError, match="truncated.docx is damaged"):
        document_text(truncated)
    import docx

    docx.Document().save(tmp_path / "blank.docx")
    with pytest.raises(DocumentError, match="blank.docx has no text to read"):
        document_text(tmp_path / "blank.docx")


def test_specexec_text_reads_a_word_document(tmp_path, capsys):
    result = run_cli(capsys, "text", str(write_docx(tmp_path / "report.docx")), "--json")
    assert result.returncode == 0
    record = json.loads(result.stdout)
    assert record["name"] == "report.docx" and record["text"].endswith("North | 12 (flat)\nGrüße ✓")


def test_a_word_document_whose_xml_expands_entities_a_billion_times_is_refused_at_once(tmp_path):
    """The billion laughs: nine nested entities of ten; python-docx's parser resolves none, libxml2 refuses
    the amplification, and the words say the file is damaged."""
    import zipfile

    import docx

    docx.Document().save(tmp_path / "base.docx")
    document = (
        f'<?xml version="1.0"?>{BILLION_LAUGHS}<w:document xmlns:w="http://schemas.openxmlformats.org/'
        'wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>'
    ).encode()
    laughs = tmp_path / "laughs.docx"
    with zipfile.ZipFile(tmp_path / "base.docx") as base, zipfile.ZipFile(laughs, "w") as out:
        for info in base.infolist():
            out.writestr(info.filename, document if info.filename == "word/document.xml" else base.read(info))
    with pytest.raises(DocumentError, match="laughs.docx is damaged, or not a Word document"):
        document_text(laughs)


def test_a_document_with_more_text_than_a_model_reads_is_refused_as_it_is_read(tmp_path):
    """Past MAX_TEXT_BYTES of text, a PDF's pages or a Word document's paragraphs: refused in words."""
    import docx

    from core.text.document_text import MAX_TEXT_BYTES

    long_line = "w" * 10_000
    count = MAX_TEXT_BYTES // len(long_line) + 2
    pdf = write_pdf(tmp_path / "long.pdf", [long_line] * count)
    with pytest.raises(DocumentError, match="long.pdf holds more text than a model reads at once: add the pages you"):
        document_text(pdf)
    word = docx.Document()
    for _ in range(count):
        word.add_paragraph(long_line)
    word.save(tmp_path / "long.docx")
    with pytest.raises(DocumentError, match="long.docx holds more text than a model reads at once: add the part you"):
        document_text(tmp_path / "long.docx")


# OpenDocument texts (LibreOffice Writer's .odt) -----------------------------------------------------------

ODF_TEXT = "application/vnd.oasis.opendocument.text"
ODF_CONTENT = (
    '<?xml version="1.0" encoding="UTF-8"?>{doctype}<office:document-content'
    ' xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
    ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3">'
    "<office:body><office:text>{body}</office:text></office:body></office:document-content>"
)


def write_odt(path: Path) -> Path:
    """An OpenDocument text as LibreOffice writes one, through odfdo: a title, a paragraph, a list, a table."""
    from odfdo import Document, Header, List, Paragraph, Table

    document = Document("text")
    document.body.append(Header(1, "Minutes"))
    document.body.append(Paragraph("We met on Tuesday. Grüße ✓"))
    document.body.append(Header(2, "Decisions"))
    document.body.append(List(["Buy a printer", "Move the party to Friday"]))
    table = Table("Budget", width=2, height=3)
    table.set_values([["Item", "Cost"], ["Printer", "200"], ["Cake", "30"]])
    document.body.append(table)
    document.save(path)
    return path


def odt_by_hand(path: Path, body: str, doctype: str = "", mimetype: str = ODF_TEXT) -> Path:
    """An OpenDocument file of the two parts a reader needs, its content.xml's body as given."""
    content = ODF_CONTENT.format(doctype=doctype, body=body).encode()
    return zip_with(path, {"mimetype": mimetype.encode(), "content.xml": content})


def test_an_opendocument_text_comes_as_markdown_with_its_headings_lists_and_tables(tmp_path):
    odt = write_odt(tmp_path / "minutes.odt")
    assert read_apart(odt)
    text = document_text(odt)
    assert text.startswith("# Minutes\n\nWe met on Tuesday. Grüße ✓\n\n## Decisions\n")
    assert "Buy a printer" in text and "Move the party to Friday" in text
    assert "| Printer | 200  |" in text and text.endswith("| Cake    | 30   |")


@pytest.mark.parametrize(
    ("mimetype", "words"),
    [
        (  # a spreadsheet is read (tests/test_office_text.py): this one's content is a text's, with no sheet
            "application/vnd.oasis.opendocument.spreadsheet",
            "has no text to read: its sheets are empty",
        ),
        (  # so is a presentation: this one holds no slide
            "application/vnd.oasis.opendocument.presentation",
            "has no text to read: its slides hold only pictures",
        ),
        (  # odfdo's Markdown takes no text template
            "application/vnd.oasis.opendocument.text-template",
            "is a LibreOffice Writer template, which cannot be read: open it, save the document it makes",
        ),
        (
            "application/vnd.oasis.opendocument.graphics",
            "is a LibreOffice Draw drawing, which cannot be read: export it as a PDF",
        ),
        ("application/x-anything-else", "is a zip archive: unpack it"),
    ],
)
def test_other_opendocument_files_are_said_with_what_to_do(tmp_path, mimetype, words):
    with pytest.raises(DocumentError, match=words):
        document_text(odt_by_hand(tmp_path / "sheet.ods", "<text:p>x</text:p>", mimetype=mimetype))


@pytest.mark.parametrize(
    ("body", "words"),
    [
        # two billion spaces in eleven bytes: refused before odfdo writes them out
        ('<text:p>a<text:s text:c="2000000000"/>b</text:p>', "asks for more spaces in a row than a document has"),
        (
            '<table:table table:name="T"><table:table-column table:number-columns-repeated="1000"/>'
            '<table:table-row table:number-rows-repeated="100000"><table:table-cell'
            ' table:number-columns-repeated="1000"><text:p>x</text:p></table:table-cell></table:table-row>'
            "</table:table>",
            "has a table of 100,000 rows and 1,000 columns, more than is read here",
        ),
        ('<text:p>a<text:s text:c="many"/>b</text:p>', "is damaged, or not an OpenDocument text"),
        ("<text:p>not closed", "is damaged, or not an OpenDocument text"),
        ("", "has no text to read"),
    ],
)
def test_a_hostile_damaged_or_empty_opendocument_text_is_said_in_words(tmp_path, body, words):
    with pytest.raises(DocumentError, match=words):
        document_text(odt_by_hand(tmp_path / "notes.odt", body))


def test_an_opendocument_text_with_a_few_spaces_in_a_row_keeps_them(tmp_path):
    assert document_text(odt_by_hand(tmp_path / "notes.odt", '<text:p>a<text:s text:c="3"/>b</text:p>')) == "a   b"


def test_an_opendocument_texts_entities_neither_multiply_nor_read_files(tmp_path):
    """The billion laughs and an external entity naming a file: lxml refuses the first, resolves not the
    second; both are said as a damaged file, and no byte of the named file comes back."""
    secret = tmp_path / "secret.txt"
    secret.write_text("the password is swordfish", encoding="utf-8")
    laughs = odt_by_hand(tmp_path / "laughs.odt", "<text:p>&lol9;</text:p>", BILLION_LAUGHS)
    with pytest.raises(DocumentError, match="laughs.odt is damaged"):
        document_text(laughs)
    external = f'<!DOCTYPE x [<!ENTITY leak SYSTEM "{secret.as_uri()}">]>'
    with pytest.raises(DocumentError, match="leak.odt is damaged") as refused:
        document_text(odt_by_hand(tmp_path / "leak.odt", "<text:p>&leak;</text:p>", external))
    assert "swordfish" not in str(refused.value)


def test_specexec_text_reads_an_opendocument_text(tmp_path, capsys):
    result = run_cli(capsys, "text", str(write_odt(tmp_path / "minutes.odt")), "--json")
    assert result.returncode == 0
    record = json.loads(result.stdout)
    assert record["name"] == "minutes.odt" and record["text"].startswith("# Minutes\n")


def test_what_a_reader_child_said_is_its_text_its_last_reason_or_that_it_could_not_read():
    """`reader_reply`, as the app and the API server read a `specexec text --json` child: its JSON when it
    ended well; else its last `error:` line; else (killed, or its output damaged) that the file was not read."""
    from core.text.document_text import reader_reply

    assert reader_reply(0, b'{"name": "a.pdf", "text": "Hi"}', "", "a.pdf") == ("a.pdf", "Hi")
    with pytest.raises(DocumentError, match=r"^a.pdf is damaged$"):
        reader_reply(2, b"", "warning: x\nerror: first\nerror: a.pdf is damaged\n", "a.pdf")
    for code, out in [(0, b'{"name": "a.pdf"'), (0, b'["a.pdf"]'), (-9, b"")]:
        with pytest.raises(DocumentError, match=r"^a.pdf could not be read$"):
            reader_reply(code, out, "Killed", "a.pdf")
