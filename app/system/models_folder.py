"""The models folder a person picked in Settings (`AppSettings.models_folder`; "" keeps the default, the data
folder's `models/`): a second drive when the first is too full for a 40 GB model, as LM Studio and GPT4All let
people choose theirs.

Everything that looks for models asks core.system.locations.models_dir(), which reads SPECEXEC_MODELS_DIR, then
the settings file (so the command line looks where the app does), and the processes the app starts (downloads,
the GPU check) inherit the app's environment: so the setting is put in force by setting that variable in the
app's process, which holds even where the settings file could not be saved. A folder given through the variable
before the app started (a portable install, tests) wins over the setting, and the Settings page says so. Models
already in the old folder are not moved: the words after a change say where they are.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path

from core.system.disk import why_write_failed
from core.system.env import MODELS_DIR_ENV, MODELS_DIR_FROM_SETTINGS_ENV
from core.system.locations import default_models_dir

log = logging.getLogger(__name__)


def set_outside() -> str | None:
    """The models folder given through SPECEXEC_MODELS_DIR from outside the app, or None."""
    if os.environ.get(MODELS_DIR_FROM_SETTINGS_ENV) == "1":
        return None
    return os.environ.get(MODELS_DIR_ENV) or None


def apply_models_folder(folder: str) -> None:
    """Put the setting in force for this process and the ones it starts; nothing when a folder was given from
    outside the app. A value no Settings page would have saved (a settings file edited by hand or damaged: a
    relative path, a NUL, which the environment cannot even hold) is logged and the default used."""
    if set_outside() is not None:
        return
    if folder and ("\0" in folder or not Path(folder).expanduser().is_absolute()):
        log.warning("models folder %r in the settings is not a whole path: using the default", folder)
        folder = ""
    # the default spelled out too: the settings file (which the command line reads) may not be saved yet
    os.environ[MODELS_DIR_ENV] = folder or str(default_models_dir())
    os.environ[MODELS_DIR_FROM_SETTINGS_ENV] = "1"


def folder_problem(text: str) -> str | None:
    """Why `text` cannot be the models folder, in words, or None when it can: it is made if missing, and a
    file is written in it and removed, so a folder the user may not write (or a full drive) is said now, not
    at the first download."""
    if not text:
        return None
    folder = Path(text).expanduser()
    if not folder.is_absolute():
        return f"{text!r} is not a whole path: pick the folder with Browse"
    if folder.exists() and not folder.is_dir():
        return f"{folder} is a file, not a folder"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".specexec-write-check-"):
            pass
    except OSError as error:
        return f"{why_write_failed(error, folder)}: pick another folder"
    return None
