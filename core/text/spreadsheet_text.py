"""A spreadsheet's text as Markdown: each sheet a heading with its name and a table of the cells it uses. An
Excel workbook (.xlsx, .xlsm) through openpyxl (MIT, pure Python; the field's own reader of the format), the
values as Excel last worked them out; a LibreOffice Calc spreadsheet (.ods) through odfdo, each cell's text
as the file shows it (`calc_text`).

A model reads a Markdown table well, and a person asks about a spreadsheet by its rows and headings ("which
month cost most?"), so the first used row becomes the table's header. Rows and columns with nothing in them
are left out (the blank rows and the margin people leave around a table); a cell shows what Excel shows as
far as the file says it: a formula's last worked-out value (the formula itself where the program that wrote
the file worked out none: openpyxl, some exports), a whole number without ".0", a percentage as one, a date
as a date. The values and the formulas are two reads of the file, side by side.

A workbook is read row by row (openpyxl's read-only mode), so a big one costs no more memory than its text.
A row number past Excel's own limit is a damaged file (a few bytes can ask for billions of empty rows), and
a table whose padded text would pass the text limit (the reader's `max_chars`) is refused before it is
written: a sheet may be a column of short cells and one long row.

An Excel 97-2003 workbook (.xls), which people still keep and exports still write, is read through xlrd
(BSD, pure Python; the reader pandas uses for the format), the same way (`old_workbook_text`).
"""

from __future__ import annotations

import datetime
import io
from collections.abc import Iterable, Iterator
from pathlib import Path

from core.errors import DocumentError
from core.text.odf_spaces import check_spaces
from core.text.parser_faults import LOCKED_OFFICE_FILE, said_as_damaged, too_much_text

MAX_SHEET_ROWS = 1_048_576  # Excel's and LibreOffice's limit; a file that numbers a row past it is damaged
MAX_SHEET_COLUMNS = 16_384  # theirs too (column XFD): a row of used cells past it is damaged
CELL_GAP = " | "
# what an OpenDocument cell holds, where it holds no text to show (a program other than LibreOffice wrote it)
ODF_VALUES = ("office:string-value", "office:value", "office:date-value", "office:time-value", "office:boolean-value")


def workbook_text(path: Path, name: str, max_chars: int) -> str:
    """The Excel workbook at `path` as Markdown (see the module's words); `name`: the file's, for the words.

    Raises:
        DocumentError: damaged, not a workbook openpyxl reads, no cell with anything in it, or more than
            `max_chars` of text. (A password-locked workbook never comes here: it is no zip, and
            core.text.document_text says it is locked.)
    """
    from openpyxl import load_workbook

    # opened files, not the path: openpyxl refuses a path by its extension (an API upload may have none)
    with (
        said_as_damaged(name, "an Excel workbook"),
        path.open("rb") as values_file,
        path.open("rb") as formulas_file,
    ):
        values = load_workbook(values_file, read_only=True, data_only=True)
        formulas = load_workbook(formulas_file, read_only=True, data_only=False)
        sheets = (
            (worked_out.title, _used_rows(worked_out, written, name))
            for worked_out, written in zip(values.worksheets, formulas.worksheets, strict=True)
        )
        return _markdown_tables(sheets, name, max_chars)


def old_workbook_text(path: Path, name: str, max_chars: int) -> str | None:
    """The Excel 97-2003 workbook (.xls) at `path` as Markdown, as `workbook_text` gives a today's one, through
    xlrd; None where the old Office file holds no workbook (a .doc, a .ppt). A formula shows the value Excel
    worked out (the file keeps no other for xlrd to read), a cell in a percentage or date format as such.

    Raises:
        DocumentError: locked with a password, damaged, no cell with anything in it, or more than `max_chars`
            of text.
    """
    with said_as_damaged(name, "an Office file from before 2007"):
        import xlrd

        try:  # its notes on odd files go to a buffer: they would be printed amid `specexec text --json`'s answer
            book = xlrd.open_workbook(str(path), formatting_info=True, on_demand=True, logfile=io.StringIO())
        except xlrd.XLRDError as error:
            if str(error) == "Can't find workbook in OLE2 compound document":
                return None
            if str(error) == "Workbook is encrypted":
                raise DocumentError(f"{name} {LOCKED_OFFICE_FILE}") from error
            raise
        with book:
            sheets = ((sheet.name, _old_rows(book, sheet)) for sheet in map(book.sheet_by_index, range(book.nsheets)))
            return _markdown_tables(sheets, name, max_chars)


def _old_rows(book, sheet) -> Iterator[list[str]]:  # noqa: ANN001 - an xlrd Book and its Sheet
    """Each row of an .xls sheet with something in it, as its cells' texts up to its last used cell."""
    for number in range(sheet.nrows):
        cells = [_cell_text(_old_value(book, cell), _old_format(book, cell)) for cell in sheet.row(number)]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield cells


def _old_value(book, cell) -> object:  # noqa: ANN001 - an xlrd Book and Cell
    """An .xls cell's value as openpyxl gives one: a date as a datetime (a date out of Excel's range as its
    number), a flag as a bool, an error as Excel writes it ("#DIV/0!"), nothing as None."""
    import xlrd

    if cell.ctype in (xlrd.XL_CELL_EMPTY, xlrd.XL_CELL_BLANK):
        return None
    if cell.ctype == xlrd.XL_CELL_DATE:
        try:
            return xlrd.xldate.xldate_as_datetime(cell.value, book.datemode)
        except (xlrd.xldate.XLDateError, ValueError, OverflowError):
            return cell.value
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#N/A")
    return cell.value


def _old_format(book, cell) -> str | None:  # noqa: ANN001 - an xlrd Book and Cell
    """The number format of an .xls cell ("0%"), None where the file names none it has."""
    if not 0 <= cell.xf_index < len(book.xf_list):
        return None
    number_format = book.format_map.get(book.xf_list[cell.xf_index].format_key)
    return number_format.format_str if number_format is not None else None


def calc_text(path: Path, name: str, max_chars: int) -> str:
    """The LibreOffice Calc spreadsheet (.ods) at `path` as Markdown, through odfdo: each cell's text as the
    file shows it (LibreOffice writes what a cell displays beside its value: "25%", "1,200.00 €", a date in
    the sheet's format). The file writes runs of alike rows and cells as counts (the empty rest of a sheet as
    a million rows); empty ones are never made, and a used run past the sheet's limits is a damaged file, as
    is a run of spaces past core.text.odf_spaces's limit.

    Raises:
        DocumentError: damaged, no cell with anything in it, or more than `max_chars` of text.
    """
    with said_as_damaged(name, "a LibreOffice spreadsheet"):
        from odfdo import Document

        body = Document(path).body
        check_spaces(body, name)
        sheets = ((table.name or "", _calc_rows(table, name)) for table in body.get_tables())
        return _markdown_tables(sheets, name, max_chars)


def _calc_rows(table, name: str) -> Iterator[list[str]]:  # noqa: ANN001 - an odfdo Table
    """Each used row of an OpenDocument sheet as its cells' texts, a repeated row as often as it repeats."""
    number = 0
    for row in table.xpath("descendant::table:table-row"):
        repeat = _repeat(row, "table:number-rows-repeated", name)
        number += repeat
        cells = _calc_cells(row, name)
        if cells and number > MAX_SHEET_ROWS:
            raise DocumentError(f"{name} numbers a row past {MAX_SHEET_ROWS:,}, the most a sheet has: it is damaged")
        for _ in range(repeat if cells else 0):
            yield cells


def _calc_cells(row, name: str) -> list[str]:  # noqa: ANN001 - an odfdo Row
    """A row's cell texts up to its last used cell, a repeated cell as often as it repeats."""
    runs = []
    for cell in row.xpath("table:table-cell|table:covered-table-cell"):
        text = " ".join(paragraph.inner_text for paragraph in cell.xpath("descendant::text:p|descendant::text:h"))
        if not text.strip():
            text = next((str(value) for key in ODF_VALUES if (value := cell.get_attribute(key)) is not None), "")
        runs.append((_table_cell(text), _repeat(cell, "table:number-columns-repeated", name)))
    while runs and not runs[-1][0]:
        runs.pop()
    if sum(repeat for _, repeat in runs) > MAX_SHEET_COLUMNS:
        raise DocumentError(
            f"{name} has a row of more than {MAX_SHEET_COLUMNS:,} cells, the most a sheet has: it is damaged"
        )
    return [text for text, repeat in runs for _ in range(repeat)]


def _repeat(element, attribute: str, name: str) -> int:  # noqa: ANN001 - an odfdo Element
    """How many times an OpenDocument row or cell repeats (1 where it does not say)."""
    said = element.get_attribute(attribute)
    try:
        count = int(said) if said is not None else 1
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise DocumentError(f"{name} repeats a row or a cell {said!r} times: it is damaged")
    return count


def _markdown_tables(sheets: Iterable[tuple[str, Iterable[list[str]]]], name: str, max_chars: int) -> str:
    """Each sheet (its title, its used rows as cell texts) with a row in it as a heading and a table.

    Raises:
        DocumentError: no sheet has a row, or the text passes `max_chars` (said as soon as it does).
    """
    tables, chars = [], 0
    for title, rows in sheets:
        table = _sheet_table(rows, name, max_chars - chars)
        if table:
            tables.append(f"## {' '.join(str(title).split())}\n\n{table}")
            chars += len(tables[-1]) + 2
    if not tables:
        raise DocumentError(f"{name} has no text to read: its sheets are empty")
    return "\n\n".join(tables).replace("\0", "")


def _sheet_table(used_rows: Iterable[list[str]], name: str, room: int) -> str:
    """One sheet's used rows as a Markdown table ("" when it has none); refused past `room` characters."""
    rows, chars = [], 0
    for cells in used_rows:
        chars += sum(map(len, cells)) + len(CELL_GAP) * len(cells)
        if chars > room:
            raise too_much_text(name, "sheets or rows")
        rows.append(cells)
    if not rows:
        return ""
    first = min(next(i for i, cell in enumerate(cells) if cell) for cells in rows)
    width = max(len(cells) for cells in rows) - first
    padded_chars = len(rows) * (width + 1) * (len(CELL_GAP) + 1) + chars
    if padded_chars > room:  # the blank cells a table needs to keep its columns are text too
        raise too_much_text(name, "sheets or rows")
    lines = [_table_row(cells[first:], width) for cells in rows]
    lines.insert(1, _table_row(["---"] * width, width))
    return "\n".join(lines)


def _used_rows(worked_out, written, name: str) -> Iterator[list[str]]:  # noqa: ANN001 - ReadOnlyWorksheets
    """Each row with something in it, as its cells' texts up to its last used cell: the worked-out value, else
    the formula."""
    for sheet in (worked_out, written):
        sheet.reset_dimensions()  # the size a file declares can be any; only the rows it holds are read
    rows = zip(worked_out.iter_rows(), written.iter_rows(), strict=True)
    for number, (values, formulas) in enumerate(rows, start=1):
        if number > MAX_SHEET_ROWS:
            raise DocumentError(f"{name} numbers a row past {MAX_SHEET_ROWS:,}, the most a sheet has: it is damaged")
        cells = [
            _cell_text(value.value if value.value is not None else formula.value, formula.number_format)
            for value, formula in zip(values, formulas, strict=True)
        ]
        while cells and not cells[-1]:  # the empty cells after its last used one
            cells.pop()
        if cells:
            yield cells


def _cell_text(value: object, number_format: str | None) -> str:
    """A cell's value as Excel shows it, as far as the file says: 15 significant digits, a whole number
    without ".0", a percentage format as a percentage, a date without a midnight time (`_table_cell`)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        text = "TRUE" if value else "FALSE"
    elif isinstance(value, int | float):
        percent = "%" in (number_format or "")
        number = value * 100 if percent else value
        text = f"{number:.15g}" + ("%" if percent else "")
    elif isinstance(value, datetime.datetime):
        text = value.date().isoformat() if value.time() == datetime.time() else value.isoformat(" ", "minutes")
    elif isinstance(value, datetime.date | datetime.time):
        text = value.isoformat()
    else:
        text = str(value)
    return _table_cell(text)


def _table_cell(text: str) -> str:
    """`text` kept on one line and with its bars escaped, so it stays one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def _table_row(cells: list[str], width: int) -> str:
    """A Markdown table row of `width` cells (blank ones where the row ends early)."""
    return "| " + CELL_GAP.join(cells + [""] * (width - len(cells))) + " |"
