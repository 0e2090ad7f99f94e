"""What the models folder holds: downloaded models (finished or not), imported folders and GGUF files, and
links to models kept elsewhere; and removing one of them.

A downloaded model carries a manifest (core/models/manifest.py), which says whether it is complete and how
many bytes it should have; an imported one is any folder with a config.json or a .gguf file.
"""

from __future__ import annotations

import errno
import shutil
from dataclasses import dataclass
from pathlib import Path

from core.errors import ModelDeleteError, ModelNotFoundError
from core.models.catalog import Catalog
from core.system.locations import repo_folder_name
from core.models.manifest import MANIFEST_NAME, bytes_present, read_manifest
from core.system.disk import is_write_refused


@dataclass(frozen=True)
class InstalledModel:
    name: str  # the entry's name in the models folder
    path: Path
    repo: str | None  # None for an imported model
    revision: str | None
    complete: bool
    done_bytes: int  # bytes of the model's files on disk (== total_bytes when complete)
    total_bytes: int
    linked: bool  # a link to a model kept elsewhere (`models import --link`)


def scan_models(root: Path) -> list[InstalledModel]:
    """Every model in `root`, sorted by name; folders that hold no model are left out, and so are folders
    that cannot be read: a models folder at a drive's root holds the system's own (`lost+found` on Linux,
    `System Volume Information` on Windows), which refuse even a look inside."""
    if not root.is_dir():
        return []
    found = []
    for entry in sorted(root.iterdir(), key=lambda p: p.name.lower()):
        try:
            model = _describe(entry)
        except PermissionError:
            continue
        if model is not None:
            found.append(model)
    return found


def _describe(entry: Path) -> InstalledModel | None:
    if not entry.is_dir() or entry.name.startswith("."):
        return None
    linked = entry.is_symlink() or any(child.is_symlink() for child in entry.iterdir())
    manifest = read_manifest(entry)
    if manifest is not None:
        done = sum(bytes_present(entry, file) for file in manifest.files)
        complete = manifest.complete and done == manifest.total_bytes
        return InstalledModel(
            entry.name, entry, manifest.repo, manifest.revision, complete, done, manifest.total_bytes, linked
        )
    if (entry / "config.json").is_file() or any(entry.glob("*.gguf")):
        size = folder_bytes(entry)
        return InstalledModel(entry.name, entry, None, None, True, size, size, linked)
    return None


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under `folder` (following links, as the model's weights live behind them)."""
    total = 0
    for path in folder.rglob("*"):
        if path.name == MANIFEST_NAME:
            continue
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            pass
    return total


def pair_folders(catalog: Catalog, pair_id: str) -> list[str]:
    """The folder names a catalog pair downloads into (none for the built-in pair)."""
    pair = catalog.pair(pair_id)
    return [repo_folder_name(model.repo, model.revision) for model in (pair.target, pair.draft) if not model.is_builtin]


def resolve_name(root: Path, name: str, catalog: Catalog) -> list[Path]:
    """What NAME means in `models delete NAME`: a folder name from `models list`, a repo id (main branch
    or `repo@revision`), or a catalog pair id (both of its folders). Raises ModelNotFoundError."""
    if catalog.has(name) and "/" not in name:
        paths = [root / folder for folder in pair_folders(catalog, name)]
        present = [path for path in paths if path.exists() or path.is_symlink()]
        if not present:
            raise ModelNotFoundError(f"the pair '{name}' is not in {root}: nothing to delete")
        return present
    candidates = [name, repo_folder_name(*name.split("@", 1)) if "@" in name else repo_folder_name(name)]
    for candidate in candidates:
        if "/" in candidate or candidate in ("", ".", ".."):
            continue
        path = root / candidate
        if path.exists() or path.is_symlink():
            return [path]
    known = ", ".join(model.name for model in scan_models(root)) or "none"
    raise ModelNotFoundError(f"no model '{name}' in {root}; installed: {known}")


def delete_model(path: Path) -> None:
    """Remove a model entry: a link goes (the files it points at stay), a folder goes with its files, under
    its download lock so that a download running into it is never pulled from under its feet.

    Raises:
        DownloadBusyError: a download (another process) is writing into the folder.
        ModelDeleteError: the system refused (a read-only drive, no permission, a file open elsewhere).
    """
    from core.models.folder_lock import FolderLock

    files_before = _file_count(path)
    try:
        if path.is_symlink():
            path.unlink()
        elif path.is_dir():
            with FolderLock(path):
                shutil.rmtree(path)
        else:
            path.unlink()
    except OSError as error:
        partly = (
            " Some of its files were deleted before that, so it cannot be used until it is downloaded or imported "
            "again."
            if _file_count(path) < files_before
            else " Nothing was deleted."
        )
        raise ModelDeleteError(f"{path} could not be deleted: {_why_not_deleted(error)}.{partly}") from error


def _file_count(path: Path) -> int:
    """Files in a model folder (a link or a single file counts as one)."""
    if path.is_symlink() or not path.is_dir():
        return int(path.exists() or path.is_symlink())
    return sum(1 for _ in path.rglob("*"))


# Windows: ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION (a file another program has open)
_IN_USE_WINERRORS = frozenset({32, 33})


def _why_not_deleted(error: OSError) -> str:
    """The reason and what to do, in words."""
    if getattr(error, "winerror", None) in _IN_USE_WINERRORS:
        return "another program has one of its files open. Close that program (or restart), then delete it again"
    if error.errno == errno.EROFS:
        return (
            "its drive is read-only (write-protected, or the system stopped writing to it after finding errors). "
            "Make the drive writable, then delete it again"
        )
    if is_write_refused(error):
        return "there is no permission to change that folder. Delete it as the user who owns it"
    return f"{error.strerror or error}. Try again; if it fails again, delete the folder in your file manager"
