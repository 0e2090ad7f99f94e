"""Where downloaded and imported models live on disk.

SPECEXEC_MODELS_DIR wins; else the folder picked in the app's Settings (its settings file's `models_folder`),
so the command line looks where the app does; else `models/` under SPECEXEC_DATA_DIR (the app's one-folder
override, used by tests and portable installs); else `models/` in the platform's per-user data folder, the
same folder the app keeps its conversations in, so an update or uninstall of the program keeps them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from core.system.env import CACHE_DIR_ENV, CONFIG_DIR_ENV, DATA_DIR_ENV, MODELS_DIR_ENV
from core.system.text_files import read_text_file

APP_NAME = "SpecExec Desktop"
APP_AUTHOR = "SpecExec"
SETTINGS_FILE_NAME = "settings.json"  # the app's settings, in the config folder (app.system.paths)
OLD_CACHE_NAME = "specexec-desktop"  # the cache folder's name before it took the app's name like the others


def data_dir(environ: dict[str, str] | None = None) -> Path:
    """The per-user data folder (conversations, models; not created here): SPECEXEC_DATA_DIR, else the
    platform's."""
    env = os.environ if environ is None else environ
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME, APP_AUTHOR))


def models_dir(environ: dict[str, str] | None = None) -> Path:
    """The models folder (not created here): SPECEXEC_MODELS_DIR, else the one picked in the app's Settings,
    else `models/` in the data folder."""
    env = os.environ if environ is None else environ
    if env.get(MODELS_DIR_ENV):
        return Path(env[MODELS_DIR_ENV]).expanduser()
    return picked_models_folder(env) or default_models_dir(env)


def default_models_dir(environ: dict[str, str] | None = None) -> Path:
    """The models folder when neither SPECEXEC_MODELS_DIR nor the app's Settings pick one."""
    return data_dir(environ) / "models"


def picked_models_folder(environ: dict[str, str] | None = None) -> Path | None:
    """The models folder picked in the app's Settings (`models_folder` in its settings file), so that the
    command line looks where the app does; None when none was picked, or the file cannot be read or holds
    something no Settings page saves (the app's own reader, app.settings.schema, logs those)."""
    try:
        data = json.loads(read_text_file(config_dir(environ) / SETTINGS_FILE_NAME))
    except (OSError, ValueError):
        return None
    folder = data.get("models_folder") if isinstance(data, dict) else None
    if not isinstance(folder, str) or not folder or "\0" in folder:
        return None
    path = Path(folder).expanduser()
    return path if path.is_absolute() else None


def config_dir(environ: dict[str, str] | None = None) -> Path:
    """The per-user config folder (not created here; the app keeps its settings there too):
    SPECEXEC_CONFIG_DIR, else `config/` under SPECEXEC_DATA_DIR, else the platform's."""
    env = os.environ if environ is None else environ
    if env.get(CONFIG_DIR_ENV):
        return Path(env[CONFIG_DIR_ENV]).expanduser()
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser() / "config"
    import platformdirs

    return Path(platformdirs.user_config_dir(APP_NAME, APP_AUTHOR))


def cache_dir(environ: dict[str, str] | None = None) -> Path:
    """The per-user cache folder (the built-in model's converted copy, speed measurements; not created here):
    SPECEXEC_CACHE_DIR, else `cache/` under SPECEXEC_DATA_DIR (a portable or test install keeps it with its
    data), else the platform's, named like the data and config folders."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_DIR_ENV):
        return Path(env[CACHE_DIR_ENV]).expanduser()
    if env.get(DATA_DIR_ENV):
        return Path(env[DATA_DIR_ENV]).expanduser() / "cache"
    import platformdirs

    return Path(platformdirs.user_cache_dir(APP_NAME, APP_AUTHOR))


def old_cache_dir(environ: dict[str, str] | None = None) -> Path | None:
    """The platform cache folder under its name before it took the app's name (None where a variable picks
    the folder): the built-in model's converted copy there is adopted rather than converted again."""
    env = os.environ if environ is None else environ
    if env.get(CACHE_DIR_ENV) or env.get(DATA_DIR_ENV):
        return None
    import platformdirs

    return Path(platformdirs.user_cache_dir(OLD_CACHE_NAME))


def adopt_old_cache(environ: dict[str, str] | None = None) -> bool:
    """Move a cache left under the old folder name to `cache_dir()` when that is not there yet (an update);
    True if it moved. Best effort: on failure the new folder is filled afresh."""
    old, new = old_cache_dir(environ), cache_dir(environ)
    if old is None or old == new or not old.is_dir() or new.exists():
        return False
    try:
        new.parent.mkdir(parents=True, exist_ok=True)
        os.replace(old, new)
    except OSError:
        return False
    return True


def repo_folder_name(repo: str, revision: str = "main") -> str:
    """One folder per repo and revision: 'TheBloke/X-GPTQ' at 'gptq-3bit' -> 'TheBloke--X-GPTQ@gptq-3bit'."""
    name = repo.replace("/", "--")
    return name if revision in ("", "main") else f"{name}@{revision.replace('/', '--')}"
