"""The file chooser for a model: a .gguf file or a model folder (one chooser cannot take both well, so callers
offer the two), opening in the models folder, which is made if it is not there yet (a chooser that opens in
the home folder sends people looking). It is the desktop's own chooser in the light theme, Qt's own in the
dark one (app/theme/file_dialogs.py: the desktop's ignores the app's colours)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from app.theme.file_dialogs import follow_theme

GGUF_FILTERS = ["GGUF models (*.gguf)", "All files (*)"]


def usable_folder(folder: Path) -> Path:
    """`folder`, made if missing; the home folder where it cannot be made."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Path.home()
    return folder


def model_chooser(parent: QWidget | None, title: str, start: Path, folder: bool) -> QFileDialog:
    """A chooser for an existing model folder (`folder`) or .gguf file, not yet shown."""
    dialog = follow_theme(QFileDialog(parent, title, str(start if start.is_dir() else usable_folder(start))))
    if folder:
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly, True)
    else:
        dialog.setFileMode(QFileDialog.FileMode.ExistingFile)
        dialog.setNameFilters(GGUF_FILTERS)
    return dialog


def chosen_path(dialog: QFileDialog) -> Path | None:
    """What the person picked, once the chooser was accepted."""
    files = dialog.selectedFiles()
    return Path(files[0]) if files else None
