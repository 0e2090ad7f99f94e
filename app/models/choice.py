"""What a model-pair choice means on disk, and whether it can load, checked before it is saved (no Qt).

A catalog pair lives in its download folders (core.models.installed.pair_folders); the built-in pair ships
with the app. The checks are core.models.importing's cheap ones (config.json and weights, or a GGUF header),
so a missing or broken folder is reported in the dialog, not after a failed load.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from app.settings.schema import AppSettings
from core.errors import ModelNotFoundError
from core.models.catalog import BUILTIN_PAIR_ID, Catalog
from core.models.importing import check_model_folder
from core.models.installed import InstalledModel, pair_folders, scan_models
from core.models.model_spec import BUILTIN_NAMES


def pair_paths(catalog: Catalog, pair_id: str, root: Path) -> tuple[str, str]:
    """(target, draft) as the engine's Load takes them: folder paths, or the built-in names."""
    if pair_id == BUILTIN_PAIR_ID:
        return BUILTIN_NAMES
    target, draft = (str(root / folder) for folder in pair_folders(catalog, pair_id))
    return target, draft


def check_model(name: str) -> None:
    """A model the engine can load: a built-in name, or a folder (or a folder's single .gguf) that passes the
    cheap checks.

    Raises:
        ModelNotFoundError: the folder is gone.
        ModelFormatError: it is not a complete model (what is missing, in words).
    """
    if not name or name in BUILTIN_NAMES:
        return
    path = Path(name).expanduser()
    if not path.exists():
        raise ModelNotFoundError(f"the model folder {path} does not exist: it was moved or deleted")
    check_model_folder(path if path.is_dir() else path.parent)


def choose(settings: AppSettings, target: str, draft: str, pair_id: str) -> AppSettings:
    """`settings` with this pair, after checking both models (raises what `check_model` raises)."""
    check_model(target)
    check_model(draft)
    return dataclasses.replace(settings, target=target, draft=draft, active_pair=pair_id)


def gone_path(spec: str) -> Path | None:
    """The path `spec` (a model as the settings keep it) names when nothing is there any more; None for a
    built-in name, a repo id or a path that exists."""
    if not spec or spec in BUILTIN_NAMES:
        return None
    path = Path(spec).expanduser()
    return None if not path.is_absolute() or path.exists() else path


def moved_into(spec: str, root: Path) -> str:
    """`spec` (a model's path as the settings keep it) where the models folder `root` now holds it, when it is
    gone from where it was: a folder moved into `root` keeps its name, and a .gguf file its folder's; else
    `spec` as it is (a built-in name, a repo id, a path that still exists or was not found)."""
    path = gone_path(spec)
    if path is None:
        return spec
    for candidate in (root / path.name, root / path.parent.name / path.name):
        if candidate.exists():
            return str(candidate)
    return spec


def missing_model_words(settings: AppSettings) -> str | None:
    """What to do, in words, when the model or draft the settings name is a path that is not there (its
    drive unplugged, or its folder moved or deleted), or None when both are there (or are not paths). The
    engine's own words say only that a path was not found, and offer the command line's `builtin`."""
    path = next(filter(None, map(gone_path, (settings.target, settings.draft))), None)
    if path is None:
        return None
    drive = path.drive  # Windows' "E:" (on other systems, drives are folders)
    if drive and not Path(path.anchor).exists():
        return (
            f"The model is on drive {drive}, which is not connected: connect it and press Retry, or pick "
            "another model in Settings."
        )
    return (
        f"The model is no longer at {path}. If it is on a drive that is not plugged in, plug it in and press "
        "Retry; else pick another model in Settings, or download it again under Models."
    )


def follow_models_folder(settings: AppSettings, root: Path) -> AppSettings:
    """The settings with the model and draft found in the models folder `root` where their folders were
    moved there (people move them after picking another models folder): else the same settings."""
    target, draft = moved_into(settings.target, root), moved_into(settings.draft, root)
    if (target, draft) == (settings.target, settings.draft):
        return settings
    return dataclasses.replace(settings, target=target, draft=draft)


def installed_pairs(catalog: Catalog, root: Path) -> list[str]:
    """Catalog pair ids whose models are all downloaded and complete (the built-in pair always is)."""
    complete = {model.name for model in scan_models(root) if model.complete}
    return [
        pair.id
        for pair in catalog.pairs
        if pair.id == BUILTIN_PAIR_ID or all(folder in complete for folder in pair_folders(catalog, pair.id))
    ]


def unfinished_pairs(catalog: Catalog, root: Path) -> list[str]:
    """Catalog pair ids with a download left unfinished (closed app, crash, reboot): the app offers to resume."""
    unfinished = {model.name for model in scan_models(root) if not model.complete and model.repo is not None}
    return [pair.id for pair in catalog.pairs if unfinished & set(pair_folders(catalog, pair.id))]


def imported_models(catalog: Catalog, root: Path) -> list[InstalledModel]:
    """Complete models in the models folder that belong to no catalog pair (imported, or downloaded by repo id)."""
    in_pairs = {folder for pair in catalog.pairs for folder in pair_folders(catalog, pair.id)}
    return [model for model in scan_models(root) if model.complete and model.name not in in_pairs]
