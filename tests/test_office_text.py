"""Excel workbooks and PowerPoint presentations given to a message (core.text.spreadsheet_text,
core.text.slides_text, through core.text.document_text and `specexec text`): real files written by openpyxl
and python-pptx, files Excel would write (a formula's worked-out value) made by editing their XML, and hostile
ones (a row numbered past Excel's limit, a column past its last, a billion laughs, an outside entity, a table
whose blank cells would pass the text limit)."""

from __future__ import annotations

import datetime
import json
import random
import string
import zipfile
from pathlib import Path

import pytest

from conftest import run_cli
from core.errors import DocumentError
from core.text.document_text import MAX_TEXT_BYTES, document_text, read_apart
from test_document_text import BILLION_LAUGHS, REPORT, write_docx, zip_with

SHEET_NS = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
SHEET_PART = "xl/worksheets/sheet1.xml"


def write_workbook(path: Path) -> Path:
    """A budget as people lay one out: a blank row and column around the table, a percentage, dates, a flag,
    a note with a bar and a line break, a formula (openpyxl works none out), an empty sheet and a short one."""
    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    sheet.title = "Budget 2026"
    sheet.append([None])
    sheet.append([None, "Month", "Cost", "Share", "Paid on", "Note"])
    sheet.append([None, "January", 1200, 0.25, datetime.datetime(2026, 1, 31), "rent | heat"])
    sheet.append([None, "February", 1234.5, 0.3, datetime.datetime(2026, 2, 28, 14, 30), "two\nlines"])
    sheet.append([])
    sheet.append([None, "Total", "=C3+C4", None, None, True])
    sheet["D3"].number_format = "0%"
    sheet["D4"].number_format = "0.0%"
    workbook.create_sheet("Empty")
    workbook.create_sheet("Notes")["A1"] = "Grüße ✓"
    workbook.save(path)
    return path


BUDGET = """## Budget 2026

| Month | Cost | Share | Paid on | Note |
| --- | --- | --- | --- | --- |
| January | 1200 | 25% | 2026-01-31 | rent \\| heat |
| February | 1234.5 | 30% | 2026-02-28 14:30 | two lines |
| Total | =C3+C4 |  |  | TRUE |

## Notes

| Grüße ✓ |
| --- |"""


def with_sheet(base: Path, path: Path, sheet_xml: str) -> Path:
    """`base` with its first worksheet's XML replaced by `sheet_xml`."""
    with zipfile.ZipFile(base) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            out.writestr(info.filename, sheet_xml.encode() if info.filename == SHEET_PART else source.read(info))
    return path


def sheet_xml(rows: str, doctype: str = "", dimension: str = "A1:XFD1048576") -> str:
    """A worksheet's XML holding `rows`, declaring the whole grid as its size (as some writers do)."""
    return (
        f'<?xml version="1.0"?>{doctype}<worksheet xmlns="{SHEET_NS}"><dimension ref="{dimension}"/>'
        f"<sheetData>{rows}</sheetData></worksheet>"
    )


def text_cell(reference: str, text: str) -> str:
    return f'<c r="{reference}" t="inlineStr"><is><t>{text}</t></is></c>'


@pytest.fixture
def one_cell_book(tmp_path) -> Path:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.active["A1"] = "x"
    workbook.save(tmp_path / "base.xlsx")
    return tmp_path / "base.xlsx"


def test_a_workbooks_sheets_come_as_markdown_tables_of_the_cells_they_use(tmp_path):
    book = write_workbook(tmp_path / "budget.xlsx")
    assert read_apart(book)
    assert document_text(book) == BUDGET
    unnamed = tmp_path / "budget"  # an upload through the API may have no extension: the parts say what it is
    unnamed.write_bytes(book.read_bytes())
    assert document_text(unnamed) == BUDGET


def test_a_formula_shows_the_value_excel_worked_out_and_the_formula_where_none_was(tmp_path, one_cell_book):
    rows = f'<row r="1">{text_cell("A1", "Total")}<c r="B1"><f>2+3</f><v>5</v></c><c r="C1"><f>B1*2</f></c></row>'
    book = with_sheet(one_cell_book, tmp_path / "worked.xlsx", sheet_xml(rows, dimension="A1:C1"))
    assert document_text(book) == "## Sheet\n\n| Total | 5 | =B1*2 |\n| --- | --- | --- |"


def test_a_workbook_with_nothing_in_it_is_said(tmp_path):
    from openpyxl import Workbook

    Workbook().save(tmp_path / "blank.xlsx")
    with pytest.raises(DocumentError, match="blank.xlsx has no text to read: its sheets are empty"):
        document_text(tmp_path / "blank.xlsx")


@pytest.mark.parametrize(
    ("rows", "doctype", "words"),
    [
        (  # a few bytes asking for a billion empty rows
            f'<row r="1">{text_cell("A1", "a")}</row><row r="999999999">{text_cell("A999999999", "b")}</row>',
            "",
            "numbers a row past 1,048,576, the most a sheet has: it is damaged",
        ),
        (f'<row r="1">{text_cell("ZZZZ1", "a")}</row>', "", "is damaged, or not an Excel workbook this reader"),
        (f'<row r="1">{text_cell("A1", "&lol9;")}</row>', BILLION_LAUGHS, "is damaged, or not an Excel workbook"),
        (  # an outside file named as an entity is not read
            f'<row r="1">{text_cell("A1", "&x;")}</row>',
            '<!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/hostname">]>',
            "is damaged, or not an Excel workbook this reader understands",
        ),
        (  # short cells, but a last column so far out that the blank cells would be gigabytes of text
            f'<row r="1">{text_cell("XFD1", "a")}</row>'
            + "".join(f'<row r="{i}"><c r="A{i}"><v>1</v></c></row>' for i in range(2, 20_000)),
            "",
            "holds more text than a model reads at once: add the sheets or rows you need",
        ),
        ("<row", "", "is damaged, or not an Excel workbook this reader understands"),
    ],
    ids=["row-past-the-limit", "column-past-the-last", "billion-laughs", "outside-entity", "wide-blank-table", "cut"],
)
def test_a_hostile_or_damaged_workbook_is_refused_in_words(tmp_path, one_cell_book, rows, doctype, words):
    book = with_sheet(one_cell_book, tmp_path / "hostile.xlsx", sheet_xml(rows, doctype))
    with pytest.raises(DocumentError, match=f"^hostile.xlsx {words}"):
        document_text(book)


def test_a_workbook_with_more_text_than_a_model_reads_is_refused_as_it_is_read(tmp_path):
    from openpyxl import Workbook

    workbook = Workbook(write_only=True)
    sheet = workbook.create_sheet("Data")
    line = "w" * 1000
    for _ in range(MAX_TEXT_BYTES // len(line) + 2):
        sheet.append([line])
    workbook.save(tmp_path / "long.xlsx")
    with pytest.raises(DocumentError, match="long.xlsx holds more text than a model reads at once"):
        document_text(tmp_path / "long.xlsx")


def test_a_workbook_or_a_word_document_locked_with_a_password_is_said_to_be_locked(tmp_path):
    """Office keeps a locked file of today's formats in the pre-2007 container: it is said to be locked, not
    to be old. The lock is made by msoffcrypto-tool, with Office's own encryption."""
    from msoffcrypto.format.ooxml import OOXMLFile

    from test_document_text import write_docx

    for plain in (write_workbook(tmp_path / "budget.xlsx"), write_docx(tmp_path / "report.docx")):
        locked = tmp_path / f"locked{plain.suffix}"
        with plain.open("rb") as source, locked.open("wb") as out:
            OOXMLFile(source).encrypt("secret", out)
        assert read_apart(locked)  # the old container: read apart, as an .xls is
        with pytest.raises(DocumentError, match=f"^locked{plain.suffix} is locked with a password: open it, remove"):
            document_text(locked)


def test_a_locked_files_package_is_found_where_its_header_says_its_directory_is(tmp_path):
    """Past the first megabyte (what document_text reads of a file) the name is looked for only in the sector
    the container's header points to: given the header alone, it is found there, and not where the header
    points elsewhere."""
    import struct

    from msoffcrypto.format.ooxml import OOXMLFile

    from core.text.document_text import _is_encrypted_office

    locked = tmp_path / "locked.xlsx"
    with write_workbook(tmp_path / "budget.xlsx").open("rb") as source, locked.open("wb") as out:
        OOXMLFile(source).encrypt("secret", out)
    header = locked.read_bytes()[:512]
    assert _is_encrypted_office(locked, header)
    elsewhere = header[:0x30] + struct.pack("<I", 0) + header[0x34:]  # the first data sector, not the directory
    assert not _is_encrypted_office(locked, elsewhere)


def test_a_binary_workbook_is_said_with_what_to_do(tmp_path):
    with pytest.raises(DocumentError, match=r"is an Excel binary workbook \(.xlsb\), which cannot be read: save it"):
        document_text(zip_with(tmp_path / "figures.xlsb", {"xl/workbook.bin": b"\0"}))


# Excel 97-2003 workbooks and the other Office files from before 2007 ---------------------------------------

# write_workbook's budget as LibreOffice 7.4.7 (Debian 12) saves it: `soffice --headless --convert-to xls
# budget.xlsx`, which works out the formula; write_docx's report saved as a .doc the same way
OLD_BUDGET_FILE = Path(__file__).parent / "fixtures" / "documents" / "budget-libreoffice-7.4.xls"
OLD_REPORT_FILE = Path(__file__).parent / "fixtures" / "documents" / "report-libreoffice-7.4.doc"
OLD_BUDGET = BUDGET.replace("=C3+C4", "2434.5")
EXCEL_START = b"\x09\x08\x10\x00"  # the BOF record that opens an .xls workbook's stream (BIFF8)
FILEPASS = b"\x2f\x00"  # the record that says the rest is encrypted


def test_an_excel_97_2003_workbook_reads_as_its_todays_workbook_does(tmp_path, capsys):
    assert read_apart(OLD_BUDGET_FILE)
    assert document_text(OLD_BUDGET_FILE) == OLD_BUDGET
    padded = tmp_path / "padded.xls"  # bytes after the container's last sector: xlrd prints a warning about it
    padded.write_bytes(OLD_BUDGET_FILE.read_bytes() + bytes(100))
    result = run_cli(capsys, "text", str(padded), "--json")  # which stays out of the answer
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {"name": "padded.xls", "text": OLD_BUDGET}


def test_an_old_word_document_is_said_with_what_to_do(tmp_path):
    assert read_apart(OLD_REPORT_FILE)
    with pytest.raises(DocumentError, match=r"^report-libreoffice-7.4.doc is in the Word or PowerPoint format from"):
        document_text(OLD_REPORT_FILE)


def test_a_locked_or_damaged_excel_97_2003_workbook_is_said_in_words(tmp_path):
    data = OLD_BUDGET_FILE.read_bytes()
    after_start = data.index(EXCEL_START) + len(EXCEL_START) + 16  # the record after the stream's BOF
    locked = tmp_path / "locked.xls"  # as Excel writes one: a FILEPASS record first, then the encrypted rest
    locked.write_bytes(data[:after_start] + FILEPASS + data[after_start + 2 :])
    with pytest.raises(DocumentError, match="^locked.xls is locked with a password: open it, remove the password"):
        document_text(locked)
    cut = tmp_path / "cut.xls"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(DocumentError, match=r"^cut.xls is damaged, or not an Office file from before 2007 this"):
        document_text(cut)
    empty = tmp_path / "empty.doc"  # the container's signature and nothing after it
    empty.write_bytes(data[:8] + bytes(40))
    with pytest.raises(DocumentError, match=r"^empty.doc is damaged, or not an Office file from before 2007"):
        document_text(empty)


# PowerPoint presentations ---------------------------------------------------------------------------------


def write_presentation(path: Path) -> Path:
    """Three slides: a title with a line break, bullets two levels deep and speaker notes; a table, a text
    box and a group of two; a hidden one with a title only; and one with nothing."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Plan for\nspring"
    body = first.placeholders[1].text_frame
    body.text = "Sell more"
    detail = body.add_paragraph()
    detail.text, detail.level = "in the north", 1
    first.notes_slide.notes_text_frame.text = "Start with the weather"
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Figures"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for row, cells in enumerate((("Region", "Sales"), ("North", "12"))):
        for column, text in enumerate(cells):
            table.cell(row, column).text = text
    second.shapes.add_textbox(Inches(1), Inches(4), Inches(3), Inches(1)).text_frame.text = "Grüße ✓"
    group = second.shapes.add_group_shape()
    for left, text in ((1, "left box"), (4, "right box")):
        group.shapes.add_textbox(Inches(left), Inches(5), Inches(2), Inches(1)).text_frame.text = text
    third = deck.slides.add_slide(deck.slide_layouts[5])
    third.shapes.title.text = "Backup"
    third._element.set("show", "0")
    deck.slides.add_slide(deck.slide_layouts[6])
    deck.save(path)
    return path


DECK = """## Slide 1: Plan for spring
Sell more
  in the north

Notes:
Start with the weather

## Slide 2: Figures
Region | Sales
North | 12
Grüße ✓
left box
right box

## Slide 3 (hidden): Backup

## Slide 4"""


def test_a_presentations_slides_come_in_order_with_their_titles_text_tables_and_notes(tmp_path):
    deck = write_presentation(tmp_path / "plan.pptx")
    assert read_apart(deck)
    assert document_text(deck) == DECK


def test_a_presentation_of_pictures_only_damaged_or_too_long_is_said_in_words(tmp_path):
    from pptx import Presentation

    deck = Presentation()
    deck.slides.add_slide(deck.slide_layouts[6])
    deck.save(tmp_path / "photos.pptx")
    with pytest.raises(DocumentError, match="photos.pptx has no text to read: its slides hold only pictures"):
        document_text(tmp_path / "photos.pptx")
    whole = write_presentation(tmp_path / "whole.pptx").read_bytes()
    (tmp_path / "cut.pptx").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DocumentError, match="cut.pptx is damaged"):
        document_text(tmp_path / "cut.pptx")
    long = Presentation()
    for _ in range(MAX_TEXT_BYTES // 10_000 + 2):
        long.slides.add_slide(long.slide_layouts[5]).shapes.title.text = "w" * 10_000
    long.save(tmp_path / "long.pptx")
    with pytest.raises(DocumentError, match="long.pptx holds more text than a model reads at once: add the slides"):
        document_text(tmp_path / "long.pptx")


def test_a_slide_whose_xml_expands_entities_a_billion_times_is_refused(tmp_path):
    deck = write_presentation(tmp_path / "base.pptx")
    slide = (
        f'<?xml version="1.0"?>{BILLION_LAUGHS}<p:sld xmlns:p="http://schemas.openxmlformats.org/presentationml/'
        '2006/main"><p:cSld><p:spTree>&lol9;</p:spTree></p:cSld></p:sld>'
    ).encode()
    laughs = tmp_path / "laughs.pptx"
    with zipfile.ZipFile(deck) as source, zipfile.ZipFile(laughs, "w") as out:
        for info in source.infolist():
            out.writestr(info.filename, slide if info.filename == "ppt/slides/slide1.xml" else source.read(info))
    with pytest.raises(DocumentError, match="laughs.pptx is damaged, or not a PowerPoint presentation"):
        document_text(laughs)


# Every kind of file Office saves --------------------------------------------------------------------------

CONTENT_TYPES = "[Content_Types].xml"
WORD_MAIN = "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"
POWERPOINT_MAIN = "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"
EXCEL_MAIN = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"


def saved_as(base: Path, path: Path, main: str, kind: str) -> Path:
    """`base` as Office saves it as another kind: the same package, its main part's content type `kind`
    (a macro-enabled file holds a vbaProject.bin part too, which is never read)."""
    with zipfile.ZipFile(base) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = source.read(info)
            if info.filename == CONTENT_TYPES:
                assert main.encode() in data
                data = data.replace(main.encode(), kind.encode())
            out.writestr(info.filename, data)
        if "macroEnabled" in kind:
            out.writestr("vbaProject.bin", b"\xd0\xcf\x11\xe0 macros")
    return path


# the extension Office gives each kind it saves, and the content type of that kind's main part
SAVED_KINDS = {
    ".docm": "application/vnd.ms-word.document.macroEnabled.main+xml",
    ".dotx": "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
    ".dotm": "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",
    ".pptm": "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
    ".ppsx": "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml",
    ".ppsm": "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml",
    ".potx": "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml",
    ".potm": "application/vnd.ms-powerpoint.template.macroEnabled.main+xml",
    ".xlsm": "application/vnd.ms-excel.sheet.macroEnabled.main+xml",
    ".xltx": "application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml",
    ".xltm": "application/vnd.ms-excel.template.macroEnabled.main+xml",
}
# by the extension's first letter: how the ordinary file is written, its main part's type, its text
ORDINARY = {
    "d": (write_docx, WORD_MAIN, REPORT),
    "p": (write_presentation, POWERPOINT_MAIN, DECK),
    "x": (write_workbook, EXCEL_MAIN, BUDGET),
}


@pytest.mark.parametrize("suffix", list(SAVED_KINDS))
def test_a_macro_enabled_file_a_template_or_a_show_reads_as_its_ordinary_document_does(tmp_path, suffix):
    write, main, expected = ORDINARY[suffix[1]]
    saved = saved_as(write(tmp_path / "ordinary"), tmp_path / f"saved{suffix}", main, SAVED_KINDS[suffix])
    assert read_apart(saved)
    assert document_text(saved) == expected


@pytest.mark.parametrize(
    ("write", "main", "words"),
    [(write_docx, WORD_MAIN, "a Word document"), (write_presentation, POWERPOINT_MAIN, "a PowerPoint presentation")],
)
def test_a_package_whose_main_part_is_of_another_kind_is_said_to_be_damaged(tmp_path, write, main, words):
    odd = saved_as(write(tmp_path / "base"), tmp_path / "odd", main, "application/vnd.example.main+xml")
    with pytest.raises(DocumentError, match=f"odd is damaged, or not {words} this reader understands .*example"):
        document_text(odd)


def test_specexec_text_reads_a_workbook_and_a_presentation(tmp_path, capsys):
    for path, expected in (
        (write_workbook(tmp_path / "budget.xlsx"), BUDGET),
        (write_presentation(tmp_path / "plan.pptx"), DECK),
    ):
        result = run_cli(capsys, "text", str(path), "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout) == {"name": path.name, "text": expected}


# LibreOffice Calc spreadsheets ----------------------------------------------------------------------------

ODF_SPREADSHEET = "application/vnd.oasis.opendocument.spreadsheet"
CALC_CONTENT = (
    '<?xml version="1.0" encoding="UTF-8"?>{doctype}<office:document-content'
    ' xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
    ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3">'
    "<office:body><office:spreadsheet>{body}</office:spreadsheet></office:body></office:document-content>"
)


def calc_by_hand(path: Path, body: str, doctype: str = "") -> Path:
    """A spreadsheet of the two parts a reader needs, its sheets' XML as given."""
    content = CALC_CONTENT.format(doctype=doctype, body=body).encode()
    return zip_with(path, {"mimetype": ODF_SPREADSHEET.encode(), "content.xml": content})


def cell(text: str = "", repeat: int = 1, value: str = "") -> str:
    """A cell as LibreOffice writes it: its value, and the text it shows in a paragraph (none when empty)."""
    repeated = f' table:number-columns-repeated="{repeat}"' if repeat > 1 else ""
    value = f' office:value-type="float" office:value="{value}"' if value else ""
    return f"<table:table-cell{repeated}{value}>" + (f"<text:p>{text}</text:p>" if text else "") + "</table:table-cell>"


def row(*cells: str, repeat: int = 1) -> str:
    repeated = f' table:number-rows-repeated="{repeat}"' if repeat > 1 else ""
    return f"<table:table-row{repeated}>{''.join(cells)}</table:table-row>"


def test_a_calc_spreadsheet_written_by_odfdo_comes_as_markdown_tables(tmp_path):
    from odfdo import Document, Table

    document = Document("spreadsheet")
    document.body.clear()
    budget = Table("Budget 2026")
    budget.set_values([["Month", "Cost"], ["January", 1200], ["February", 1234.5]])
    document.body.append(budget)
    document.body.append(Table("Empty"))
    document.save(tmp_path / "budget.ods")
    assert read_apart(tmp_path / "budget.ods")
    assert document_text(tmp_path / "budget.ods") == (
        "## Budget 2026\n\n| Month | Cost |\n| --- | --- |\n| January | 1200 |\n| February | 1234.5 |"
    )


def as_template(document: Path, path: Path) -> Path:
    """The OpenDocument `document` as LibreOffice saves it as a template: the same parts, its mimetype the
    kind's and "-template"."""
    with zipfile.ZipFile(document) as source, zipfile.ZipFile(path, "w") as out:
        for info in source.infolist():
            data = source.read(info)
            out.writestr(info, data + b"-template" if info.filename == "mimetype" else data)
    return path


def test_a_calc_template_reads_as_its_spreadsheet_does(tmp_path):
    sheet = calc_by_hand(tmp_path / "costs.ods", f'<table:table table:name="Costs">{row(cell("rent"))}</table:table>')
    assert document_text(as_template(sheet, tmp_path / "costs.ots")) == "## Costs\n\n| rent |\n| --- |"


def test_a_calc_sheet_as_libreoffice_writes_it_shows_its_cells_text_and_makes_no_empty_run(tmp_path):
    """The text a cell shows (a percentage, money), a value without text, a merged cell's covered part, a
    repeated row, and the empty rest of the sheet as a million rows of 1,024 cells: never made."""
    sheet = (
        '<table:table table:name="Costs">'
        + row(cell(repeat=1024), repeat=2)  # blank rows above the table
        + row(cell(), cell("Item"), cell("Share"), cell("Price"), cell(repeat=1020))
        + row(
            cell(), cell("Rent | flat"), cell("25 %", value="0.25"), cell("1.200,00 €", value="1200"), cell(repeat=1020)
        )
        + row(cell(), cell("Power"), cell(value="0.1"), "<table:covered-table-cell/>", cell("note"), repeat=2)
        + row(cell(repeat=1024), repeat=1_048_570)
        + "</table:table>"
    )
    assert document_text(calc_by_hand(tmp_path / "costs.ods", sheet)) == (
        "## Costs\n\n| Item | Share | Price |  |\n| --- | --- | --- | --- |\n| Rent \\| flat | 25 % | 1.200,00 € |  |\n"
        "| Power | 0.1 |  | note |\n| Power | 0.1 |  | note |"
    )


@pytest.mark.parametrize(
    ("sheet", "words"),
    [
        (row(cell("a"), repeat=2_000_000), "numbers a row past 1,048,576, the most a sheet has: it is damaged"),
        (row(cell("a", repeat=1_000_000_000)), "has a row of more than 16,384 cells, the most a sheet has: it is"),
        (row(cell("a")).replace("<table:table-row>", '<table:table-row table:number-rows-repeated="x">'), "repeats"),
        (row(cell("a", repeat=2)).replace('repeated="2"', 'repeated="0"'), "repeats a row or a cell '0' times"),
        (row(cell("&lol9;")), "is damaged, or not a LibreOffice spreadsheet this reader understands"),
        (  # two billion spaces in a cell's text, which odfdo would make
            row(cell('a<text:s text:c="2000000000"/>b')),
            "asks for more spaces in a row than a document has: it is damaged",
        ),
        (row(cell()), "has no text to read: its sheets are empty"),
    ],
    ids=[
        "row-run-past-the-limit",
        "cell-run-past-the-limit",
        "count-not-a-number",
        "count-zero",
        "laughs",
        "spaces",
        "empty",
    ],
)
def test_a_hostile_damaged_or_empty_calc_sheet_is_refused_in_words(tmp_path, sheet, words):
    doctype = BILLION_LAUGHS if "&lol9;" in sheet else ""
    calc = calc_by_hand(tmp_path / "hostile.ods", f'<table:table table:name="S">{sheet}</table:table>', doctype)
    with pytest.raises(DocumentError, match=f"^hostile.ods {words}"):
        document_text(calc)


# LibreOffice Impress presentations ---------------------------------------------------------------------------

# write_presentation's deck as LibreOffice 7.4.7 (Debian 12) saves it: `soffice --headless --convert-to odp
# plan.pptx`. Its slide 3 is hidden through its page style; its notes pages hold a page-number placeholder.
IMPRESS_DECK = Path(__file__).parent / "fixtures" / "documents" / "plan-libreoffice-7.4.odp"
ODF_PRESENTATION = "application/vnd.oasis.opendocument.presentation"
IMPRESS_CONTENT = (
    '<?xml version="1.0" encoding="UTF-8"?>{doctype}<office:document-content'
    ' xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
    ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
    ' xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0"'
    ' xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"'
    ' xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" office:version="1.3">'
    "<office:body><office:presentation>{body}</office:presentation></office:body></office:document-content>"
)


def impress_by_hand(path: Path, slides: str, doctype: str = "", mimetype: str = ODF_PRESENTATION) -> Path:
    """A presentation of the two parts a reader needs, its slides' XML as given."""
    content = IMPRESS_CONTENT.format(doctype=doctype, body=slides).encode()
    return zip_with(path, {"mimetype": mimetype.encode(), "content.xml": content})


def text_box(*paragraphs: str, kind: str = "") -> str:
    """A frame holding a text box of `paragraphs`; `kind`: its presentation:class ("title", "page-number")."""
    said = f' presentation:class="{kind}"' if kind else ""
    texts = "".join(f"<text:p>{paragraph}</text:p>" for paragraph in paragraphs)
    return f"<draw:frame{said}><draw:text-box>{texts}</draw:text-box></draw:frame>"


def test_an_impress_presentation_as_libreoffice_saves_it_reads_as_the_same_powerpoint_deck_does(tmp_path):
    assert read_apart(IMPRESS_DECK)
    assert document_text(IMPRESS_DECK) == DECK
    assert document_text(as_template(IMPRESS_DECK, tmp_path / "plan.otp")) == DECK


def test_an_impress_slides_lists_tables_and_fields_read_as_shown(tmp_path):
    """Bullets three levels deep, a merged table cell's covered part and a cell repeated a billion times
    (read once), a field's placeholder (not read), a shape's alt text (not read), notes, an empty slide."""
    slides = (
        "<draw:page>"
        + text_box("Agenda", kind="title")
        + "<draw:frame><draw:text-box><text:list><text:list-item><text:p>one</text:p><text:list><text:list-item>"
        "<text:p>one.a</text:p><text:list><text:list-item><text:p>one.a.i</text:p></text:list-item></text:list>"
        "</text:list-item></text:list></text:list-item><text:list-item><text:p>two | 2</text:p></text:list-item>"
        "</text:list></draw:text-box></draw:frame>"
        "<draw:frame><table:table><table:table-row><table:table-cell><text:p>wide</text:p></table:table-cell>"
        '<table:covered-table-cell/><table:table-cell table:number-columns-repeated="1000000000"><text:p>x'
        "</text:p></table:table-cell></table:table-row></table:table></draw:frame>"
        + text_box("<text:page-number>&lt;number&gt;</text:page-number>", kind="page-number")
        + '<draw:custom-shape><svg:title xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0">'
        "a cat</svg:title><text:p>Grüße ✓</text:p></draw:custom-shape>"
        + "<presentation:notes>"
        + text_box("say hello", "then go on")
        + "</presentation:notes></draw:page><draw:page/>"
    )
    assert document_text(impress_by_hand(tmp_path / "agenda.odp", slides)) == (
        "## Slide 1: Agenda\none\n  one.a\n    one.a.i\ntwo | 2\nwide | x\nGrüße ✓\n\nNotes:\nsay hello\nthen go on"
        "\n\n## Slide 2"
    )


@pytest.mark.parametrize(
    ("slides", "words"),
    [
        ("<draw:page/><draw:page/>", "has no text to read: its slides hold only pictures"),
        ("<draw:page>" + text_box("&lol9;") + "</draw:page>", "is damaged, or not a LibreOffice presentation"),
        (  # two billion spaces in a text box, which odfdo would make
            "<draw:page>" + text_box('a<text:s text:c="2000000000"/>b') + "</draw:page>",
            "asks for more spaces in a row than a document has: it is damaged",
        ),
        (
            "".join(  # letters that do not compress: odfdo refuses a zip that unpacks to 200 times its size
                "<draw:page>"
                + text_box("".join(random.Random(page).choices(string.ascii_letters, k=10_000)))
                + "</draw:page>"
                for page in range(MAX_TEXT_BYTES // 10_000 + 2)
            ),
            "holds more text than a model reads at once: add the slides you need",
        ),
        ("<draw:page>" + text_box("cut"), "is damaged, or not a LibreOffice presentation this reader understands"),
    ],
    ids=["pictures-only", "laughs", "spaces", "too-long", "truncated"],
)
def test_a_hostile_damaged_empty_or_too_long_impress_presentation_is_said_in_words(tmp_path, slides, words):
    doctype = BILLION_LAUGHS if "&lol9;" in slides else ""
    with pytest.raises(DocumentError, match=f"^hostile.odp {words}"):
        document_text(impress_by_hand(tmp_path / "hostile.odp", slides, doctype))


def test_a_libreoffice_drawing_is_said_with_what_to_do(tmp_path):
    drawing = impress_by_hand(tmp_path / "plan.odg", "", mimetype="application/vnd.oasis.opendocument.graphics")
    with pytest.raises(DocumentError, match="^plan.odg is a LibreOffice Draw drawing, which cannot be read: export"):
        document_text(drawing)
