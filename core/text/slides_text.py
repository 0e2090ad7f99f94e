"""A presentation's text as Markdown, slide by slide: a PowerPoint presentation (.pptx, and the shows and
templates Office saves beside it) through python-pptx (MIT, on lxml; the field's own reader of the format,
whose parser resolves no entities), a LibreOffice Impress presentation (.odp, .otp) through odfdo
(`impress_text`).

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
from core.text.odf_spaces import check_spaces
from core.text.office_packages import powerpoint_presentation
from core.text.parser_faults import said_as_damaged, too_much_text


def presentation_text(path: Path, name: str, max_chars: int) -> str:
    """The presentation at `path` as Markdown (see the module's words); `name`: the file's, for the words.

    Raises:
        DocumentError: damaged, not a presentation python-pptx reads, no text on any slide, or more than
            `max_chars` of text.
    """
    with said_as_damaged(name, "a PowerPoint presentation"):
        slides = powerpoint_presentation(path).slides
        return _joined((_slide_text(number, slide) for number, slide in enumerate(slides, start=1)), name, max_chars)


def impress_text(path: Path, name: str, max_chars: int) -> str:
    """The LibreOffice Impress presentation (.odp, or a template .otp) at `path` as Markdown, as
    `presentation_text` gives a PowerPoint one, through odfdo. Runs of spaces past core.text.odf_spaces's limit
    are a damaged file; a table's repeated cells come once (the count is the file's word, and may be billions).

    Raises:
        DocumentError: damaged, no text on any slide, or more than `max_chars` of text.
    """
    with said_as_damaged(name, "a LibreOffice presentation"):
        from odfdo import Document

        body = Document(path).body
        check_spaces(body, name)
        hidden = {
            style.get_attribute("style:name")
            for style in body.xpath("//style:style[style:drawing-page-properties/@presentation:visibility='hidden']")
        }
        pages = body.xpath("descendant::draw:page")
        return _joined(
            (_page_text(number, page, hidden) for number, page in enumerate(pages, start=1)), name, max_chars
        )


def _joined(slides: Iterable[tuple[str, bool]], name: str, max_chars: int) -> str:
    """The slides' texts (each with whether it holds any words) apart by a blank line.

    Raises:
        DocumentError: no slide holds a word, or the text passes `max_chars` (said as soon as it does).
    """
    texts, chars, worded = [], 0, False
    for text, has_words in slides:
        worded |= has_words
        chars += len(text) + 2
        if chars > max_chars:
            raise too_much_text(name, "slides")
        texts.append(text)
    if not worded:
        raise DocumentError(f"{name} has no text to read: its slides hold only pictures")
    return "\n\n".join(texts).replace("\0", "")


def _slide_heading(number: int, hidden: bool, title: str) -> str:
    return f"## Slide {number}" + (" (hidden)" if hidden else "") + (f": {title}" if title else "")


def _slide_text(number: int, slide) -> tuple[str, bool]:  # noqa: ANN001 - a pptx.slide.Slide
    """`## Slide N: title`, then the slide's text and its notes; and whether it holds any words at all."""
    title_shape = slide.shapes.title
    title = _one_line(title_shape.text_frame.text) if title_shape is not None else ""
    heading = _slide_heading(number, slide._element.get("show") == "0", title)
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


# what a LibreOffice slide holds that is no text of it: its notes (read after the slide's text), the notes
# page's picture of the slide, a shape's name and description (alt text), animations, forms
NOT_SLIDE_TEXT = {"presentation:notes", "draw:page-thumbnail", "svg:title", "svg:desc", "anim:par", "office:forms"}
# the placeholders a slide or notes page shows for its master's fields: their text is "<number>" and the like
FIELD_PLACEHOLDERS = {"page-number", "date-time", "header", "footer"}
ODF_PARAGRAPHS = {"text:p", "text:h"}


def _page_text(number: int, page, hidden_styles: set[str]) -> tuple[str, bool]:  # noqa: ANN001 - odfdo DrawPage
    """`## Slide N: title`, then an Impress slide's text and its notes; and whether it holds any words."""
    title = " ".join(_odf_text(frame) for frame in page.children if _is_title(frame)).strip()
    heading = _slide_heading(number, page.get_attribute("draw:style-name") in hidden_styles, title)
    body = [line for child in page.children if not _is_title(child) for line in _odf_lines(child)]
    notes = [line for note in page.xpath("presentation:notes") for line in _odf_lines(note, notes=True)]
    if notes:
        body += ["", "Notes:", *notes]
    return "\n".join([heading, *body]), bool(title or body)


def _is_title(element) -> bool:  # noqa: ANN001 - an odfdo Element
    return element.tag == "draw:frame" and element.get_attribute("presentation:class") == "title"


def _odf_lines(
    element,  # noqa: ANN001 - an odfdo Element
    depth: int = 0,
    in_item: bool = False,
    notes: bool = False,
) -> Iterator[str]:
    """An OpenDocument shape's text as lines, in the order it holds it: a paragraph on a line of its own, a
    list's items indented two spaces per level below the first, a table's rows with their cells apart by " | "
    (a merged cell's covered part left out). `notes`: `element` is a slide's notes, whose own text is read."""
    tag = element.tag
    if tag in ODF_PARAGRAPHS:
        if text := _one_line(element.inner_text):
            yield "  " * depth + text
    elif tag == "table:table":
        for row in element.xpath("descendant::table:table-row"):
            cells = [_odf_text(cell) for cell in row.xpath("table:table-cell")]
            if any(cells):
                yield " | ".join(cells)
    elif _holds_slide_text(element, notes):
        inner = depth + 1 if tag == "text:list" and in_item else depth
        for child in element.children:
            yield from _odf_lines(child, inner, in_item or tag == "text:list-item")


def _holds_slide_text(element, notes: bool) -> bool:  # noqa: ANN001 - an odfdo Element
    """Whether `element` (no paragraph, no table) may hold text of the slide: not a field's placeholder, nor
    what NOT_SLIDE_TEXT names (but a slide's notes where they are what is read)."""
    if element.tag == "draw:frame":
        return element.get_attribute("presentation:class") not in FIELD_PLACEHOLDERS
    return element.tag not in NOT_SLIDE_TEXT or (notes and element.tag == "presentation:notes")


def _odf_text(element) -> str:  # noqa: ANN001 - an odfdo Element
    """All the text of `element`'s paragraphs on one line (a title, a table's cell)."""
    return _one_line(
        " ".join(paragraph.inner_text for paragraph in element.xpath("descendant::text:p|descendant::text:h"))
    )
