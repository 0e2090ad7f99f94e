"""The app's MCP servers: read from `mcp.json` in the config folder (the mcpServers shape LM Studio, Claude
Desktop and Jan use; core.tools.config checks it as hostile input) and started off the UI thread, since a
server may take a while (an npx or uvx server installs itself first). `start` is called when the window opens
and again after each Save in Settings: servers added or changed start, removed ones stop, unchanged ones keep
running (core.tools.toolbox.Toolbox.update). `ready` gives the Toolbox and the servers that failed, in plain
words, to the window."""

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
        self._threads: list[threading.Thread] = []

    def start(self, path: Path) -> bool:
        """Run the servers of `path` in the background, as an update of those running (False: there is no
        such file and none runs)."""
        if not path.is_file():
            if self.toolbox is None:
                return False
            configs = []  # the file was removed: every server stops
        else:
            try:
                configs = read_config_file(path)
            except (InvalidSettingError, OSError) as error:
                self.failed.emit(f"{path.name}: {error}")
                return True
        if self.toolbox is None:
            self.toolbox = Toolbox([])
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=self._update, args=(self.toolbox, configs), daemon=True, name="mcp-start")
        self._threads.append(thread)
        thread.start()
        return True

    def _update(self, toolbox: Toolbox, configs: list) -> None:
        failures = toolbox.update(configs)
        self.ready.emit(toolbox, {name: str(error) for name, error in failures.items()})

    def close(self) -> None:
        """Stop every server (the window closes)."""
        for thread in self._threads:
            thread.join(timeout=90)
        if self.toolbox is not None:
            self.toolbox.close()
