"""Where the app keeps its files: conversations (data dir), settings (config dir), logs (log dir).

platformdirs picks the per-user folders of each OS. SPECEXEC_DATA_DIR moves all three under one folder
(data in it, config in `config/`, logs in `logs/`), which is what tests and portable installs use;
SPECEXEC_CONFIG_DIR and SPECEXEC_LOG_DIR move one each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The data and config folders are found once, in core.system.locations (the models folder sits beside the
# chats, and the download token beside the settings).
from core.system.env import DATA_DIR_ENV, LOG_DIR_ENV
from core.system.locations import APP_AUTHOR, APP_NAME, SETTINGS_FILE_NAME, config_dir, data_dir
from core.system.private_files import private_folder


@dataclass(frozen=True)
class AppPaths:
    data_dir: Path
    config_dir: Path
    log_dir: Path

    @property
    def database(self) -> Path:
        return self.data_dir / "conversations.sqlite3"

    @property
    def settings_file(self) -> Path:
        return self.config_dir / SETTINGS_FILE_NAME

    @property
    def window_file(self) -> Path:
        """Where the main window was, and how big (app.window.geometry)."""
        return self.config_dir / "window.json"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "specexec-desktop.log"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "AppPaths":
        env = os.environ if environ is None else environ
        if env.get(LOG_DIR_ENV):
            logs = Path(env[LOG_DIR_ENV]).expanduser()
        elif env.get(DATA_DIR_ENV):
            logs = data_dir(env) / "logs"
        else:
            import platformdirs

            logs = Path(platformdirs.user_log_dir(APP_NAME, APP_AUTHOR))
        return cls(data_dir(env), config_dir(env), logs)

    def ensure(self) -> "AppPaths":
        """The three folders, created (or tightened) to 0700: conversations and logs are the user's alone."""
        for folder in (self.data_dir, self.config_dir, self.log_dir):
            private_folder(folder)
        return self
