"""Settings' Tools section: the MCP servers of mcp.json (app/chat/tool_servers.py starts them) with the tools
each one lists, a switch per server, and a box where the common `{"mcpServers": {...}}` JSON (or one server's
command line, or its http(s) address) is pasted to add servers. Everything is checked as hostile input
(core.tools.config) before Save writes the file, and the servers are restarted with the changes then (those
unchanged keep running). At Save, secrets in a server's env or headers go to the keyring and the file keeps a
reference (core.tools.server_secrets); the file is written readable by the user only."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QPlainTextEdit, QVBoxLayout, QWidget

from app.settings.fields import help_line
from app.window.buttons import LINK, SECONDARY, button
from app.window.labels import Label
from core.errors import InvalidSettingError
from core.system.secret_store import write_private_file
from core.tools.config import (
    ServerConfig,
    check_url,
    parse_server,
    parse_servers,
    read_config_file,
)
from core.tools.server_secrets import forget_secrets, secret_refs, store_secrets
from core.tools.toolbox import Toolbox


def servers_from_text(text: str) -> list[ServerConfig]:
    """What was pasted: an mcpServers JSON, an http(s) address, or a command line (named after its program).

    Raises:
        InvalidSettingError: none of these, in plain words.
    """
    text = text.strip()
    if text.startswith("{"):
        return parse_servers(text)
    if text.startswith(("http://", "https://")):
        url = check_url(text)
        return [parse_server(_name_for(url.split("//", 1)[1].split("/", 1)[0]), {"url": url})]
    try:
        words = shlex.split(text)
    except ValueError as error:
        raise InvalidSettingError(f"not a command line ({error})") from error
    if not words:
        raise InvalidSettingError("paste an mcpServers JSON, a server's command line or its http(s) address")
    return [parse_server(_name_for(Path(words[0]).stem), {"command": words[0], "args": words[1:]})]


def _name_for(text: str) -> str:
    name = "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip("-._")[:64]
    return name or "server"


class ToolServersSection(QWidget):
    """The servers of `path` (the tools they listed from `toolbox`, when running); `apply` writes the changes."""

    def __init__(self, path: Path, toolbox: Toolbox | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.path = path
        self.toolbox = toolbox
        try:
            self.servers = read_config_file(path) if path.is_file() else []
            problem = ""
        except (InvalidSettingError, OSError) as error:
            self.servers, problem = [], f"{path.name} cannot be used: {error}"
        self.saved_servers = list(self.servers)  # as the file has them: their keyring entries are forgotten once unused
        self.warnings: list[str] = []  # from the last apply: secrets kept in the file (no usable keyring)
        self.changed = False
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        self.list = QVBoxLayout()
        column.addLayout(self.list)
        self.switches: dict[str, QCheckBox] = {}
        self.removers: dict[str, QWidget] = {}
        self.paste = QPlainTextEdit()
        self.paste.setAccessibleName("MCP servers to add")
        self.paste.setPlaceholderText(
            '{"mcpServers": {"name": {"command": "...", "args": [...]}}}, a command line, or an https:// address'
        )
        self.paste.setFixedHeight(self.paste.fontMetrics().lineSpacing() * 4 + 12)
        column.addWidget(self.paste)
        self.add_button = button("Add", SECONDARY, "Add the pasted servers (saved with Save)")
        self.add_button.clicked.connect(self.add_pasted)
        column.addWidget(self.add_button)
        self.message = Label(problem)
        self.message.setObjectName("fieldError" if problem else "fieldHelp")
        self.message.setWordWrap(True)
        column.addWidget(self.message)
        column.addWidget(
            help_line(
                "The model may call these servers' tools in your chats; each call waits for your "
                f"OK. They are kept in {path}, in the format LM Studio and Claude Desktop use; keys and "
                "tokens in their env or headers go to the system keyring when you save."
            )
        )
        self._show()

    def _show(self) -> None:
        while self.list.count():
            item = self.list.takeAt(0)
            if item.widget() is not None:
                item.widget().deleteLater()
        self.switches, self.removers = {}, {}
        listed: dict[str, list[str]] = {}
        if self.toolbox is not None:
            for name, tool in self.toolbox.tools.items():
                listed.setdefault(tool.server, []).append(name)
        for server in self.servers:
            switch = QCheckBox(f"{server.name}: {server.where}")
            switch.setChecked(server.enabled)
            switch.toggled.connect(self._toggled)
            self.switches[server.name] = switch
            remove = button("Remove", LINK, f"Remove the MCP server {server.name} (with Save)")
            remove.setAccessibleName(f"Remove {server.name}")
            remove.clicked.connect(lambda _=False, name=server.name: self.remove(name))
            self.removers[server.name] = remove
            row = QWidget()
            line = QHBoxLayout(row)
            line.setContentsMargins(0, 0, 0, 0)
            line.addWidget(switch, 1)
            line.addWidget(remove)
            self.list.addWidget(row)
            failure = self.toolbox.failures.get(server.name) if self.toolbox is not None else None
            tools = listed.get(server.name)
            words = (
                f"Tools: {', '.join(tools)}"
                if tools
                else f"Not started: {failure}"
                if failure
                else "Starts when you save"
                if server.enabled
                else "Off"
            )
            self.list.addWidget(help_line(words))
        if not self.servers:
            self.list.addWidget(help_line("No MCP servers yet."))

    def _toggled(self) -> None:
        self.servers = [dataclasses.replace(s, enabled=self.switches[s.name].isChecked()) for s in self.servers]
        self.changed = True

    def remove(self, name: str) -> None:
        """Leave the server `name` out (Save stops it and forgets its secrets)."""
        self.servers = [s for s in self.servers if s.name != name]
        self.changed = True
        self.message.setObjectName("fieldHelp")
        self.message.setText(f"Removed {name}: it stops once you save.")
        self._show()

    def add_pasted(self) -> bool:
        """Add the pasted servers (one of the same name is replaced); False, with the reason shown, if none."""
        try:
            added = servers_from_text(self.paste.toPlainText())
        except InvalidSettingError as error:
            self.message.setObjectName("fieldError")
            self.message.setText(str(error))
            return False
        names = {server.name for server in added}
        self.servers = [s for s in self.servers if s.name not in names] + added
        self.changed = True
        self.paste.clear()
        self.message.setObjectName("fieldHelp")
        self.message.setText(f"Added {', '.join(sorted(names))}: saved with Save, started once you save.")
        self._show()
        return True

    def apply(self) -> None:
        """Write the servers to mcp.json (only when something changed): their secrets to the keyring first
        (`warnings` says which stayed in the file), then the entries no server refers to any more forgotten."""
        self.warnings = []
        if not self.changed:
            return
        stored = []
        for server in self.servers:
            kept, warning = store_secrets(server)
            stored.append(kept)
            if warning:
                self.warnings.append(warning)
        text = json.dumps({"mcpServers": {s.name: s.to_json() for s in stored}}, indent=2) + "\n"
        write_private_file(self.path, text)
        in_use = set().union(*(secret_refs(s) for s in stored))
        forget_secrets(set().union(*(secret_refs(s) for s in self.saved_servers)) - in_use)
        self.servers = self.saved_servers = stored
        self.changed = False
