"""File choosers in the app's theme. The desktop's own chooser (GTK or a portal on Linux) draws itself in the
desktop's colours and ignores the app's palette: a light chooser over a dark window. In the dark theme the
app therefore uses Qt's own chooser, which takes the palette and the stylesheet; in the light theme the
desktop's own, which looks light wherever one exists."""

from __future__ import annotations

from PySide6.QtWidgets import QFileDialog, QWidget

from app.theme.tokens import DARK, current


def follow_theme(dialog: QFileDialog) -> QFileDialog:
    """`dialog`, drawn by Qt (in the app's palette) while the theme is dark."""
    dialog.setOption(QFileDialog.Option.DontUseNativeDialog, current() is DARK)
    return dialog


def save_file_dialog(parent: QWidget | None, title: str, start: str, name_filter: str) -> QFileDialog:
    """A chooser for a new file's name (not yet shown), in the app's theme."""
    dialog = follow_theme(QFileDialog(parent, title, start, name_filter))
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptSave)
    dialog.setFileMode(QFileDialog.FileMode.AnyFile)
    return dialog


def open_files_dialog(parent: QWidget | None, title: str, start: str, name_filter: str) -> QFileDialog:
    """A chooser of one or more existing files (not yet shown), in the app's theme."""
    dialog = follow_theme(QFileDialog(parent, title, start, name_filter))
    dialog.setAcceptMode(QFileDialog.AcceptMode.AcceptOpen)
    dialog.setFileMode(QFileDialog.FileMode.ExistingFiles)
    return dialog


def folder_dialog(parent: QWidget | None, title: str, start: str) -> QFileDialog:
    """A chooser of an existing folder (not yet shown), in the app's theme."""
    dialog = follow_theme(QFileDialog(parent, title, start))
    dialog.setFileMode(QFileDialog.FileMode.Directory)
    dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    return dialog
