"""An Excel workbook's text (.xlsx, .xlsm) as Markdown: each worksheet a heading with its name and a table of
the cells it uses, the values as Excel last worked them out, through openpyxl (MIT, pure Python; the field's
own reader of the format).

A model reads a Markdown table well, and a person asks about a spreadsheet by its rows and headings ("which
month cost most?"), so the first used row becomes the table's header. Rows and columns with nothing in them
are left out (the blank rows and the margin people leave around a table); a cell shows what Excel shows as
far as the file says it: a formula's last worked-out value (the formula itself where the program that wrote
the file worked out none: openpyxl, some exports), a whole number without ".0", a percentage as one, a date
as a date. The values and the formulas are two reads of the file, side by side.

The workbook is read row by row (openpyxl's read-only mode), so a big one costs no more memory than its text.
A row number past Excel's own limit is a damaged file (a few bytes can ask for billions of empty rows), and
a table whose padded text would pass MAX_TEXT_BYTES is refused before it is written: a sheet may be a column
of short cells and one long row.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

from core.errors import DocumentError

MAX_SHEET_ROWS = 1_048_576  # Excel's own limit; a file that numbers a row past it is damaged
CELL_GAP = " | "


def workbook_text(path: Path, name: str, max_chars: int) -> str:
    """The workbook at `path` as Markdown (see the module's words); `name`: the file's, for the words.

    Raises:
        DocumentError: damaged, not a workbook openpyxl reads, no cell with anything in it, or more than
            `max_chars` of text. (A password-locked workbook never comes here: it is no zip, and
            core.text.document_text says it is locked.)
    """
    from openpyxl import load_workbook

    try:  # opened files, not the path: openpyxl refuses a path by its extension (an API upload may have none)
        with path.open("rb") as values_file, path.open("rb") as formulas_file:
            values = load_workbook(values_file, read_only=True, data_only=True)
            formulas = load_workbook(formulas_file, read_only=True, data_only=False)
            sheets, chars = [], 0
            for worked_out, written in zip(values.worksheets, formulas.worksheets, strict=True):
                table = _sheet_table(worked_out, written, name, max_chars - chars)
                if table:
                    sheets.append(f"## {' '.join(worked_out.title.split())}\n\n{table}")
                    chars += len(sheets[-1]) + 2
    except DocumentError:
        raise
    except Exception as error:  # noqa: BLE001 - a damaged file can make a parser raise anything: said in words
        raise DocumentError(f"{name} is damaged, or not an Excel workbook this reader understands ({error})") from error
    if not sheets:
        raise DocumentError(f"{name} has no text to read: its sheets are empty")
    return "\n\n".join(sheets).replace("\0", "")


def _sheet_table(worked_out, written, name: str, room: int) -> str:  # noqa: ANN001 - openpyxl ReadOnlyWorksheets
    """One worksheet's used cells as a Markdown table ("" when it has none), from its two reads (`worked_out`:
    the values, `written`: the formulas); refused past `room` characters."""
    rows, chars = [], 0
    for cells in _used_rows(worked_out, written, name):
        chars += sum(map(len, cells)) + len(CELL_GAP) * len(cells)
        if chars > room:
            raise DocumentError(f"{name} holds more text than a model reads at once: add the sheets or rows you need")
        rows.append(cells)
    if not rows:
        return ""
    first = min(next(i for i, cell in enumerate(cells) if cell) for cells in rows)
    width = max(len(cells) for cells in rows) - first
    padded_chars = len(rows) * (width + 1) * (len(CELL_GAP) + 1) + chars
    if padded_chars > room:  # the blank cells a table needs to keep its columns are text too
        raise DocumentError(f"{name} holds more text than a model reads at once: add the sheets or rows you need")
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
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield cells


def _cell_text(value: object, number_format: str | None) -> str:
    """A cell's value as Excel shows it, as far as the file says: 15 significant digits, a whole number
    without ".0", a percentage format as a percentage, a date without a midnight time. Kept on one line and
    with its bars escaped, so it stays one cell of the table."""
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
    return " ".join(text.split()).replace("|", "\\|")


def _table_row(cells: list[str], width: int) -> str:
    """A Markdown table row of `width` cells (blank ones where the row ends early)."""
    return "| " + CELL_GAP.join(cells + [""] * (width - len(cells))) + " |"
