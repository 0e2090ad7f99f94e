"""`specexec-desktop`: the desktop entry point.

Opens the main window with the settings from the user config dir (the built-in model pair on a first run, so
the user can chat at once), conversations from the user data dir, and a log in the user log dir. Set
SPECEXEC_DATA_DIR to keep everything under one folder instead. Never imports torch: the engine runs in its
own process.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QTimer
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QApplication, QDialog

from app import __version__
from app.system import self_test
from core.system.cli_process import CLI_FLAG
from app.application import create_application
from app.system.logging_setup import install_excepthook, setup_logging
from app.first_run import before_main_window, settings_at_start
from app.window.main_window import MainWindow
from app.system.paths import APP_NAME, AppPaths
from app.conversations.store import Store, StoreError
from app.system.library_check import platform_problem
from app.system.single_instance import SingleInstance
from app.theme.manager import ThemeManager
from core.system.locations import models_dir

log = logging.getLogger(__name__)

__all__ = ["MainWindow", "main", "create_application"]

SIGNAL_POLL_MS = 200  # how often Python gets the chance to run a signal handler while Qt's loop runs


def report_fatal(message: str) -> None:
    """A start-up failure: to stderr (the terminal), to the log, and in a dialog where a window can open."""
    print(message, file=sys.stderr, flush=True)
    log.critical("%s", message)
    app = QApplication.instance()
    if app is not None and QGuiApplication.platformName() not in ("offscreen", "minimal"):
        from app.window.confirm import confirm_box

        confirm_box(None, f"{APP_NAME} cannot start", message, None, cancel="Close").exec()


def open_store(path: Path, ask: Callable[[str], bool]) -> Store | None:
    """The conversation database; one that is damaged or from a newer version is, if the person agrees
    (`ask` gets the question in words), moved aside untouched and a fresh one started. None: the app cannot
    start (already reported)."""
    try:
        return Store(path)
    except StoreError as error:
        if error.reason == "unavailable":
            report_fatal(f"SpecExec Desktop cannot start: {error}. Close other programs using it and try again.")
            return None
        why = (
            "it was written by a newer version of SpecExec Desktop"
            if error.reason == "newer"
            else "it is damaged and cannot be read"
        )
        question = (
            f"The conversation database cannot be opened: {why}.\n\n{error}.\n\nSpecExec Desktop can move "
            f"it aside, untouched, next to where it is (as {path.name}.unreadable-<date>-<time>), and start "
            "with no conversations. Nothing is deleted: a newer version of the app can still open the file, "
            "and a damaged one can still be rescued."
        )
        if not ask(question):
            report_fatal(f"SpecExec Desktop cannot start: {error}")
            return None
    aside = Store.set_aside(path)
    log.warning("started a fresh conversation database; the old one is kept as %s", aside)
    return Store(path)


def ask_to_start_fresh(question: str) -> bool:
    """Ask in a dialog whether to start with a fresh database (no dialog can be shown offscreen: no)."""
    if QGuiApplication.platformName() in ("offscreen", "minimal"):
        print(question, file=sys.stderr, flush=True)
        return False
    from app.window.confirm import confirm_box

    box = confirm_box(None, f"{APP_NAME}: conversations", question, "Start fresh", destructive=False, cancel="Quit")
    return box.exec() == QDialog.DialogCode.Accepted


def bring_to_front(window: MainWindow) -> None:
    """Show the window above others (a second start of the app asked for it)."""
    window.showNormal() if window.isMinimized() else window.show()
    window.raise_()
    window.activateWindow()


def quit_on_terminal_signals(app: QApplication) -> None:
    """Ctrl-C (SIGINT) or SIGTERM quits like Menu > Quit: windows close, the engine shuts down. Qt's loop
    never returns to Python by itself, so a timer gives Python's signal handlers a chance to run."""

    def close_all(signum: int, _frame: object) -> None:
        log.info("%s received: quitting", signal.Signals(signum).name)
        app.closeAllWindows()
        app.quit()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, close_all)
    timer = QTimer(app)
    timer.timeout.connect(lambda: None)
    timer.start(SIGNAL_POLL_MS)


def main(argv: list[str] | None = None) -> int:
    multiprocessing.freeze_support()
    arguments = sys.argv if argv is None else argv
    if arguments[1:2] == [CLI_FLAG]:  # a frozen bundle's command-line child (core.system.cli_process)
        from core.cli.main import main as cli_main  # only here, in the child

        return cli_main(arguments[2:])
    if self_test.FLAG in arguments[1:]:
        return self_test.main()
    paths = AppPaths.from_env().ensure()
    setup_logging(paths.log_file)
    install_excepthook()
    log.info("SpecExec Desktop %s starting; data in %s", __version__, paths.data_dir)
    problem = platform_problem()
    if problem:  # Qt would abort the process (signal 6) with the reason only in the log
        report_fatal(problem)
        return 1
    app = create_application(sys.argv if argv is None else argv)
    settings, moved = settings_at_start(paths)
    theme = ThemeManager(app, settings.theme, settings.text_percent())
    instance = SingleInstance(paths.data_dir, app)
    if not instance.acquire():
        report_fatal(instance.message(instance.bring_first_to_front()))
        return 1
    store = open_store(paths.database, ask_to_start_fresh)  # before the wizard: a broken database is met at once
    if store is None:
        return 1
    # First start (no settings file yet) or an unfinished download: the set-up wizard, which writes the settings
    settings, bridge = before_main_window(paths, settings, models_dir())
    window = MainWindow(paths, settings, store=store, bridge=bridge, theme=theme)
    window.owns_bridge = True  # the wizard's engine, if it started one, is the window's now
    window.show()
    if moved or not paths.settings_file.exists():  # the first start's save failed (a full disk): try again
        window.store_settings(settings)
    instance.activated.connect(lambda: bring_to_front(window))
    quit_on_terminal_signals(app)
    code = app.exec()
    instance.release()
    log.info("SpecExec Desktop exiting (%d)", code)
    return code


if __name__ == "__main__":
    sys.exit(main())
