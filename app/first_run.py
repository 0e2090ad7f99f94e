"""What the app does before its main window opens: the saved settings with their models folder in force, the
set-up wizard on a first start (no settings file yet), and an offer to resume a download that a closed app, a
crash or a reboot left unfinished."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Callable

from PySide6.QtWidgets import QWizard

from app.engine.bridge import EngineBridge
from app.models.choice import follow_models_folder, unfinished_pairs
from app.system.paths import AppPaths
from app.window.confirm import confirm_destructive
from app.settings.schema import AppSettings, SettingsNotSaved, load_settings, save_settings
from app.system.models_folder import apply_models_folder
from app.models.wizard.wizard import FirstRunWizard, default_bridge
from core.errors import CatalogError
from core.system.locations import models_dir
from core.models.catalog import load_catalog

log = logging.getLogger(__name__)


def pending_download(models_dir: Path) -> str | None:
    """A catalog pair with an unfinished download, or None (a broken catalog is logged, not fatal)."""
    try:
        pending = unfinished_pairs(load_catalog(), models_dir)
    except CatalogError as error:
        log.warning("%s", error)
        return None
    return pending[0] if pending else None


def ask_resume(pair_id: str) -> bool:
    name = load_catalog().pair(pair_id).name
    return confirm_destructive(
        None,
        "Resume the download?",
        f"The download of {name} did not finish. Continue it now? What was already downloaded is kept either way.",
        "Resume download",
        destructive=False,
    )


def settings_at_start(paths: AppPaths) -> tuple[AppSettings, bool]:
    """The saved settings with their models folder in force (before anything looks for models: the wizard's
    disk check, the Models page), and the model and draft found again where their folders were moved into it
    (people move them there after picking another models folder). True when that changed them: save them."""
    settings = load_settings(paths.settings_file)
    apply_models_folder(settings.models_folder)
    followed = follow_models_folder(settings, models_dir())
    return followed, followed != settings


def before_main_window(
    paths: AppPaths,
    settings: AppSettings,
    models_dir: Path,
    ask: Callable[[str], bool] = ask_resume,
    make_bridge: Callable[[AppSettings], EngineBridge] = default_bridge,
) -> tuple[AppSettings, EngineBridge | None]:
    """Run the wizard when this is a first start or a download waits; returns the settings to use and the
    engine the wizard started (None: the main window starts its own). Cancelling keeps what was there (the
    built-in pair on a first start), so the app always opens."""
    first_start = not paths.settings_file.exists()
    resume = pending_download(models_dir)
    if resume is not None and not ask(resume):
        resume = None
    if not first_start and resume is None:
        return settings, None
    wizard = FirstRunWizard(settings, models_dir, make_bridge=make_bridge, resume_pair=resume)
    bridge = None
    if wizard.exec() == QWizard.DialogCode.Accepted and wizard.chosen_settings is not None:
        settings = wizard.chosen_settings
        bridge = wizard.take_bridge()
    else:  # a models folder picked on the way stays picked: the app already looks there
        settings = dataclasses.replace(settings, models_folder=wizard.state.settings.models_folder)
    try:
        save_settings(settings, paths.settings_file)
    except SettingsNotSaved as error:  # the main window tries again and says so (app.main)
        log.warning("%s (%s)", error, error.__cause__)
    return settings, bridge
