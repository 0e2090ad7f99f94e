"""The app's MCP servers: read from `mcp.json` in the config folder (the mcpServers shape LM Studio, Claude
Desktop and Jan use; core.tools.config checks it as hostile input) and started off the UI thread, since a
server may take a while (an npx or uvx server installs itself first). `ready` gives the started Toolbox and the
servers that failed, in plain words, to the window."""

from __future__ import annotations

import threading
from pathlib import Path

from PySide6.QtCore import QObject, Signal

from core.errors import InvalidSettingError
from core.tools.config import read_config_file
from core.tools.toolbox import Toolbox


class ToolServers(QObject):
    ready = Signal(object, dict)  # Toolbox, {server name: message} of the servers that did not start
    failed = Signal(str)  # the settings file could not be used

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.toolbox: Toolbox | None = None
        self._thread: threading.Thread | None = None

    def start(self, path: Path) -> bool:
        """Start the servers of `path` in the background (False: there is no such file)."""
        if not path.is_file():
            return False
        try:
            configs = read_config_file(path)
        except (InvalidSettingError, OSError) as error:
            self.failed.emit(f"{path.name}: {error}")
            return True
        self.toolbox = Toolbox(configs)
        self._thread = threading.Thread(target=self._start, args=(self.toolbox,), daemon=True, name="mcp-start")
        self._thread.start()
        return True

    def _start(self, toolbox: Toolbox) -> None:
        failures = toolbox.start()
        self.ready.emit(toolbox, {name: str(error) for name, error in failures.items()})

    def close(self) -> None:
        """Stop every server (the window closes)."""
        if self._thread is not None:
            self._thread.join(timeout=90)
        if self.toolbox is not None:
            self.toolbox.close()
