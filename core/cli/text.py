"""`specexec text FILE [--json]`: the text of a document (a text file, a PDF's text layer, an Office document or
an OpenDocument text), as the app adds it to a chat message (core.text.document_text). The app reads PDFs and
Office and OpenDocument files through this command, in a process of its own that it can stop (a damaged file
can keep a parser busy).

Plain output is the text itself, exact (UTF-8); `--json` prints {"name": ..., "text": ...}. A file that cannot
be added exits 2 with the reason on stderr (core.text.document_text.reader_reply reads what such a child said).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        help="a text file (.txt, .md, .csv, code...), a PDF, a Word document (.docx), an Excel workbook (.xlsx, "
        ".xls), a PowerPoint presentation (.pptx), or a LibreOffice text (.odt), spreadsheet (.ods) or "
        "presentation (.odp); Office's macro-enabled files, templates and shows too",
    )
    parser.add_argument("--json", action="store_true", help='print {"name": ..., "text": ...}')


def run(args: argparse.Namespace) -> int:
    from core.text.document_text import document_text

    path = Path(args.file).expanduser()
    text = document_text(path)
    if args.json:
        print(json.dumps({"name": path.name, "text": text}, ensure_ascii=False))
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
