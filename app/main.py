"""`specexec-desktop`: the desktop entry point.

The chat window is a later issue; for now the app opens its main window and shows which model pair it
will use (the built-in pair when nothing is configured). It never imports torch: the engine runs in its
own process.
"""

from __future__ import annotations

import sys

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QLabel, QMainWindow, QVBoxLayout, QWidget

DEFAULT_TARGET = "builtin"
DEFAULT_DRAFT = "builtin-draft"


class MainWindow(QMainWindow):
    def __init__(self, target: str = DEFAULT_TARGET, draft: str = DEFAULT_DRAFT) -> None:
        super().__init__()
        self.setWindowTitle("SpecExec Desktop")
        self.resize(720, 480)
        body = QWidget()
        layout = QVBoxLayout(body)
        title = QLabel("<h2>SpecExec Desktop</h2>")
        title.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.model_label = QLabel(f"Model: {target}   Draft: {draft}")
        self.model_label.setAccessibleName("Selected model pair")
        self.model_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint = QLabel("The chat window arrives in the next release. Meanwhile try:  specexec generate --prompt \"Hi\" --chat")
        hint.setAlignment(Qt.AlignmentFlag.AlignCenter)
        hint.setWordWrap(True)
        for widget in (title, self.model_label, hint):
            layout.addWidget(widget)
        self.setCentralWidget(body)


def main(argv: list[str] | None = None) -> int:
    app = QApplication(sys.argv if argv is None else argv)
    window = MainWindow()
    window.show()
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
