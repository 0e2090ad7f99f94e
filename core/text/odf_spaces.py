"""Runs of spaces in an OpenDocument file, checked before odfdo writes them out.

The format writes a run of spaces as one element with a count (`<text:s text:c="3"/>`), so eleven bytes can
ask for two billion spaces, which odfdo makes when it gives a paragraph's text. A count past MAX_ODF_SPACES
(a long indent's) is refused as a damaged file before any text is asked for.
"""

from __future__ import annotations

from core.errors import DocumentError

MAX_ODF_SPACES = 1000


def check_spaces(body, name: str) -> None:  # noqa: ANN001 - an odfdo Element (a document's body)
    """Raises DocumentError, naming the file `name`, where `body` asks for more spaces in a row than
    MAX_ODF_SPACES (or gives a count that is no number)."""
    for spaces in body.xpath("//text:s[@text:c]"):
        if int(spaces.get_attribute("text:c") or 1) > MAX_ODF_SPACES:
            raise DocumentError(f"{name} asks for more spaces in a row than a document has: it is damaged")
