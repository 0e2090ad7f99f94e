"""Where the app keeps its files: conversations (data dir), settings (config dir), logs (log dir).

platformdirs picks the per-user folders of each OS. SPECEXEC_DATA_DIR moves all three under one folder
(data in it, config in `config/`, logs in `logs/`), which is what tests and portable installs use;
SPECEXEC_CONFIG_DIR and SPECEXEC_LOG_DIR move one each.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The folder names are defined once, in core.models.locations: the models folder sits beside the chats.
from core.models.locations import APP_AUTHOR, APP_NAME, DATA_DIR_ENV

CONFIG_DIR_ENV = "SPECEXEC_CONFIG_DIR"
LOG_DIR_ENV = "SPECEXEC_LOG_DIR"


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
        return self.config_dir / "settings.json"

    @property
    def log_file(self) -> Path:
        return self.log_dir / "specexec-desktop.log"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "AppPaths":
        env = os.environ if environ is None else environ
        root = env.get(DATA_DIR_ENV)
        if root:
            data = Path(root).expanduser()
            config, logs = data / "config", data / "logs"
        else:
            import platformdirs

            data = Path(platformdirs.user_data_dir(APP_NAME, APP_AUTHOR))
            config = Path(platformdirs.user_config_dir(APP_NAME, APP_AUTHOR))
            logs = Path(platformdirs.user_log_dir(APP_NAME, APP_AUTHOR))
        if env.get(CONFIG_DIR_ENV):
            config = Path(env[CONFIG_DIR_ENV]).expanduser()
        if env.get(LOG_DIR_ENV):
            logs = Path(env[LOG_DIR_ENV]).expanduser()
        return cls(data, config, logs)

    def ensure(self) -> "AppPaths":
        for folder in (self.data_dir, self.config_dir, self.log_dir):
            folder.mkdir(parents=True, exist_ok=True)
        return self
