"""A PowerPoint presentation's text (.pptx) as Markdown, slide by slide, through python-pptx (MIT, on lxml;
the field's own reader of the format, whose parser resolves no entities).

Each slide is a heading with its number and title, then the text of its shapes in the order the slide
holds them (text boxes and placeholders paragraph by paragraph, a deeper bullet indented; tables row by
row with their cells apart by " | "; grouped shapes as their members), then its speaker notes. A hidden
slide is read too and says so: a person asking about their deck means all of it. Pictures and charts hold
no text to read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from core.errors import DocumentError
from core.text.office_packages import powerpoint_presentation
from core.text.parser_faults import said_as_damaged


def presentation_text(path: Path, name: str, max_chars: int) -> str:
    """The presentation at `path` as Markdown (see the module's words); `name`: the file's, for the words.

    Raises:
        DocumentError: damaged, not a presentation python-pptx reads, no text on any slide, or more than
            `max_chars` of text.
    """
    with said_as_damaged(name, "a PowerPoint presentation"):
        slides, chars, worded = [], 0, False
        for number, slide in enumerate(powerpoint_presentation(path).slides, start=1):
            text, has_words = _slide_text(number, slide)
            worded |= has_words
            chars += len(text) + 2
            if chars > max_chars:
                raise DocumentError(f"{name} holds more text than a model reads at once: add the slides you need")
            slides.append(text)
    if not worded:
        raise DocumentError(f"{name} has no text to read: its slides hold only pictures")
    return "\n\n".join(slides).replace("\0", "")


def _slide_text(number: int, slide) -> tuple[str, bool]:  # noqa: ANN001 - a pptx.slide.Slide
    """`## Slide N: title`, then the slide's text and its notes; and whether it holds any words at all."""
    title_shape = slide.shapes.title
    title = _one_line(title_shape.text_frame.text) if title_shape is not None else ""
    hidden = " (hidden)" if slide._element.get("show") == "0" else ""
    heading = f"## Slide {number}{hidden}" + (f": {title}" if title else "")
    title_id = title_shape.shape_id if title_shape is not None else None  # python-pptx makes a new proxy per look
    body = [line for shape in slide.shapes if shape.shape_id != title_id for line in _shape_lines(shape)]
    if slide.has_notes_slide and (frame := slide.notes_slide.notes_text_frame) is not None:
        notes = list(_paragraph_lines(frame.paragraphs))
        if notes:
            body += ["", "Notes:", *notes]
    return "\n".join([heading, *body]), bool(title or body)


def _shape_lines(shape) -> Iterator[str]:  # noqa: ANN001 - a pptx shape
    """A shape's text as lines: a group's members in order, a table's rows, a text frame's paragraphs."""
    if getattr(shape, "shapes", None) is not None:  # a group
        for member in shape.shapes:
            yield from _shape_lines(member)
    elif shape.has_table:
        for row in shape.table.rows:
            cells = [_one_line(cell.text) for cell in row.cells if not cell.is_spanned]
            if any(cells):
                yield " | ".join(cells)
    elif shape.has_text_frame:
        yield from _paragraph_lines(shape.text_frame.paragraphs)


def _paragraph_lines(paragraphs: Iterable) -> Iterator[str]:
    """Each paragraph with text on a line of its own, indented two spaces per level below the first."""
    for paragraph in paragraphs:
        text = _one_line(paragraph.text)
        if text:
            yield "  " * paragraph.level + text


def _one_line(text: str) -> str:
    """`text` with its line breaks and runs of spaces as one space (a line break inside a paragraph, \\v in
    python-pptx's text, would split a bullet)."""
    return " ".join(text.split())
