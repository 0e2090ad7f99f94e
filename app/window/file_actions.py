"""The window's file and help actions: export and import chats, diagnostics, the logs folder, About."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QDesktopServices, QGuiApplication

from app.conversations.export import FORMATS, free_file_name, suggested_file_name, to_json, to_markdown
from app.settings.schema import to_dict
from app.system import resources
from app.system.diagnostics import diagnostics_text
from app.theme.file_dialogs import folder_dialog, open_files_dialog, save_file_dialog
from app.window.confirm import ConfirmDialog, confirm_box
from app.window.labels import Label
from core.system.disk import write_text_atomically

ABOUT_LOGO_PX = 64


class FileActionsMixin:
    """MainWindow's export and help actions (a mixin: they read the window's store, paths and toast)."""

    def diagnostics(self, with_gpu: bool = True) -> str:
        secret = ("defaults", "api_server_key")  # the key never goes into a bug report
        flat = {k: v for k, v in to_dict(self.settings).items() if k not in secret}
        paths = {f.name: str(getattr(self.paths, f.name)) for f in dataclasses.fields(self.paths)}
        paths["log file"] = str(self.paths.log_file)
        from app.system.gpu_check import diagnostics_section, read_report

        return diagnostics_text(
            self.bridge.describe(),
            flat,
            paths,
            with_gpu=with_gpu,
            gpu_check=diagnostics_section(read_report(self.paths.log_dir)),
        )

    def copy_diagnostics(self) -> None:
        QGuiApplication.clipboard().setText(self.diagnostics())
        self.toast.show_message("Diagnostics copied: paste them into your bug report", 4000)

    def open_logs_folder(self) -> None:
        """Open the logs folder in the file manager; where none can (no file manager, a bare window
        manager), show its path to copy instead of failing silently."""
        self.paths.log_dir.mkdir(parents=True, exist_ok=True)
        if QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.paths.log_dir))):
            return
        box = confirm_box(
            self,
            "Logs folder",
            f"No file manager could open the logs folder. It is here:\n\n{self.paths.log_dir}",
            "Copy path",
            destructive=False,
            cancel="Close",
        )
        box.accepted.connect(lambda: QGuiApplication.clipboard().setText(str(self.paths.log_dir)))
        self.logs_dialog = box
        box.open()

    # -- export and import ----------------------------------------------------------------------------------

    def import_chats_dialog(self) -> None:
        """Chat > Import chats…: pick chats exported as JSON (from this computer or another); each becomes a
        new chat, and the last one opens. What could not be imported is said, file by file."""
        dialog = open_files_dialog(self, "Import chats", str(Path.home()), "Chats exported as JSON (*.json)")
        accepted = dialog.exec()
        names = dialog.selectedFiles()
        dialog.deleteLater()
        if accepted and names:
            self.import_chats([Path(name) for name in names])

    def export_all_dialog(self) -> None:
        """Chat > Export all chats…: every chat as JSON into a folder the person picks (to move them to another
        computer, where Import chats… takes them all at once, or to keep them)."""
        if not self.store.conversations():
            self.toast.show_message("Nothing to export yet: start a chat first", 4000)
            return
        dialog = folder_dialog(self, "Export all chats to a folder", str(Path.home()))
        accepted = dialog.exec()
        names = dialog.selectedFiles()
        dialog.deleteLater()
        if accepted and names:
            self.export_all(Path(names[0]))

    def export_all(self, folder: Path) -> int:
        """Every chat as `<title>.json` in `folder` (a name taken, by another chat or a file already there, gets
        "-2", "-3"…); written whole, one by one. A write that fails (a full disk) stops there and says how
        many were written. Returns that number."""
        written = 0
        for row in self.store.conversations():
            path = folder / free_file_name(folder, suggested_file_name(row.title, "json"))
            try:
                write_text_atomically(path, self.export_text("json", row.id))
            except OSError as error:
                self.toast.show_message(
                    f"Exported {written} of the chats to {folder}, then could not write {path.name}: "
                    f"{error.strerror or error}",
                    12000,
                )
                return written
            written += 1
        self.toast.show_message(f"Exported {written} chat{'s' if written != 1 else ''} to {folder}", 6000)
        return written

    def import_chats(self, paths: list[Path]) -> None:
        imported, problems = self.controller.import_chats(paths)
        said = [f"Imported {imported} chat{'s' if imported != 1 else ''}."] if imported else []
        self.toast.show_message(" ".join(said + problems), 12000 if problems else 5000)

    def export_text(self, kind: str, conversation_id: int | None = None) -> str:
        """A conversation (the open one unless `conversation_id` is given) as `kind` ("markdown" | "json")."""
        cid = self.controller.conversation_id if conversation_id is None else conversation_id
        row = self.store.conversation(cid) if cid is not None else None
        if row is None:
            raise ValueError("there is no conversation to export")
        messages = self.store.messages(cid)
        settings = self.controller.conversation_settings(cid)
        if kind == "json":
            return to_json(row, messages, to_dict(settings))
        return to_markdown(row, messages, settings.system_prompt)

    def export_conversation(self, path: Path, kind: str, conversation_id: int | None = None) -> None:
        try:
            # whole, so an export over an old file never leaves half of it
            write_text_atomically(path, self.export_text(kind, conversation_id))
        except OSError as error:  # a full disk, a folder it may not write to, a vanished drive
            self.toast.show_message(f"The chat was not exported to {path}: {error.strerror or error}", 10000)
            return
        self.toast.show_message(f"Exported the chat to {path}", 6000)

    def export_conversation_dialog(self, kind: str, conversation_id: int | None = None) -> None:
        """Ask where to save a conversation (the open one unless `conversation_id` is given), then save it."""
        cid = self.controller.conversation_id if conversation_id is None else conversation_id
        row = self.store.conversation(cid) if cid is not None else None
        if row is None:
            self.toast.show_message("Nothing to export yet: start a chat first", 4000)
            return
        suffix = FORMATS[kind]
        start = str(Path.home() / suggested_file_name(row.title, kind))
        dialog = save_file_dialog(
            self, "Export conversation", start, f"{'Markdown' if kind == 'markdown' else 'JSON'} (*{suffix})"
        )
        accepted = dialog.exec()
        names = dialog.selectedFiles()
        dialog.deleteLater()
        if not accepted or not names:
            return
        name = names[0]
        path = Path(name) if name.endswith(suffix) else Path(name + suffix)
        try:
            self.export_conversation(path, kind, cid)
        except OSError as error:
            self.toast.show_message(f"Not exported: could not write {path} ({error.strerror or error})", 8000)

    def about(self) -> ConfirmDialog:
        """The About card: the app's logo, its version and what it does (shown, not waited for)."""
        from app import __version__

        box = confirm_box(
            self,
            "About SpecExec Desktop",
            f"Version {__version__}.\n\nChat with a big model on your own computer: it keeps the model's "
            "weights in RAM, streams them to the graphics card, and a small draft model guesses ahead so "
            "answers come faster.",
            None,
            cancel="Close",
        )
        logo = Label()
        logo.setObjectName("aboutLogo")
        logo.setAccessibleName("SpecExec Desktop logo")
        logo.setPixmap(resources.icon("app").pixmap(ABOUT_LOGO_PX, ABOUT_LOGO_PX))
        box.layout().insertWidget(0, logo)
        self.about_dialog = box
        box.open()
        return box
