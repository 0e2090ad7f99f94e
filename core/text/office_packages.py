"""Word and PowerPoint files of every kind people save, opened through python-docx and python-pptx.

Office saves a document, a macro-enabled document and a template in the same package; only the content type
of the main part differs (.docx, .docm, .dotx, .dotm; .pptx, .pptm, a show .ppsx / .ppsm, a template .potx /
.potm). python-docx's `Document()` opens a .docx only and python-pptx's `Presentation()` a .pptx or .pptm
(python-pptx issue #1070), so a person's .docm or .ppsx was said to be damaged. Here the package is opened as
those functions open it, and its main part accepted under each of those content types: the libraries' own
part classes registered for them through `PartFactory.part_type_for`, the hook both give for it. Macros are
neither run nor read: their part is never asked for.
"""

from __future__ import annotations

from pathlib import Path

WORD_KINDS = (
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml",  # .docx
    "application/vnd.ms-word.document.macroEnabled.main+xml",  # .docm
    "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",  # .dotx
    "application/vnd.ms-word.template.macroEnabledTemplate.main+xml",  # .dotm
)
POWERPOINT_KINDS = (
    "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml",  # .pptx
    "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",  # .pptm
    "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml",  # .ppsx
    "application/vnd.ms-powerpoint.slideshow.macroEnabled.main+xml",  # .ppsm
    "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml",  # .potx
    "application/vnd.ms-powerpoint.template.macroEnabled.main+xml",  # .potm
)


def word_document(path: Path):  # noqa: ANN201 - a docx.document.Document
    """The Word document, macro-enabled document or template at `path`, as python-docx's Document.

    Raises:
        ValueError: its main part is of another kind; anything python-docx raises on a damaged package.
    """
    from docx.opc.part import PartFactory
    from docx.package import Package
    from docx.parts.document import DocumentPart

    return _main_part(path, Package, PartFactory, DocumentPart, WORD_KINDS).document


def powerpoint_presentation(path: Path):  # noqa: ANN201 - a pptx.presentation.Presentation
    """The PowerPoint presentation, show or template (macro-enabled or not) at `path`, as python-pptx's
    Presentation.

    Raises:
        ValueError: its main part is of another kind; anything python-pptx raises on a damaged package.
    """
    from pptx.opc.package import PartFactory
    from pptx.package import Package
    from pptx.parts.presentation import PresentationPart

    return _main_part(path, Package, PartFactory, PresentationPart, POWERPOINT_KINDS).presentation


def _main_part(  # noqa: ANN202 - a part of python-docx's or python-pptx's, which are imported where used
    path: Path,
    package,  # noqa: ANN001 - the library's Package class
    factory,  # noqa: ANN001 - its PartFactory
    part_class: type,
    kinds: tuple[str, ...],
):
    """The main part of the package at `path`, opened by the library's `package` class after its `factory`
    learnt to make `part_class` for each of `kinds`.

    Raises:
        ValueError: the main part is of none of `kinds`.
    """
    for kind in kinds:
        factory.part_type_for.setdefault(kind, part_class)
    part = package.open(str(path)).main_document_part
    if part.content_type not in kinds:
        raise ValueError(f"its main part is {part.content_type!r}")
    return part
