"""Bring a model someone already has into the models folder: a model folder or a .gguf file, checked cheaply
first (config.json and weights, or a readable GGUF header), then copied, or linked in place with `link`.

The result is what the loader accepts as `--target`: a folder with config.json and weights, or a folder
holding exactly one .gguf file.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from core.errors import DiskWriteError, ModelFormatError, ModelNotFoundError, SpecExecError
from core.modeling.families import check_config_family
from core.modeling.model_format import check_gguf, check_weight_format
from core.planning.sizes import format_bytes
from core.system import json_text
from core.system.disk import SPARE_BYTES, free_bytes, is_disk_full, is_write_refused, replace_file, why_write_failed

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def check_model_folder(folder: Path) -> None:
    """A folder the loader can read: a parseable config.json of a family the engine runs, and weight files in a
    format the engine reads (core.modeling.model_format: headers and settings only, no weight data), or exactly
    one .gguf file (core.modeling.model_format.check_gguf: its header, family and size once expanded).

    Raises:
        ModelFormatError: what is missing, in words; UnsupportedFormatError: a format the engine does not read
        (named, with what to download instead); UnsupportedArchitectureError: a family it does not run (a model
        with recurrent layers said as such first); DamagedModelError: a truncated file or a missing shard.
    """
    ggufs = sorted(folder.glob("*.gguf"))
    config = folder / "config.json"
    if not config.is_file():
        if len(ggufs) == 1:
            return check_gguf(ggufs[0])
        raise ModelFormatError(
            f"{folder} is not a model folder: it has no config.json (a Hugging Face model folder has config.json, "
            "tokenizer files and *.safetensors; or import a single .gguf file)"
        )
    try:
        settings = json_text.loads(config.read_text(encoding="utf-8"))
    except OSError as error:
        raise ModelFormatError(f"{config} cannot be read ({error.strerror or error})") from error
    except ValueError as error:  # the parser's words ("Expecting property name ...") stay in the chain
        where = f" near line {error.lineno}" if isinstance(error, json.JSONDecodeError) else ""
        raise ModelFormatError(
            f"the model's settings file {config.name} in {folder.name} is damaged{where}: copy or download the "
            "model again"
        ) from error
    if not any(any(folder.glob(pattern)) for pattern in WEIGHT_PATTERNS):
        raise ModelFormatError(
            f"{folder} has a config.json but no weights (*.safetensors or *.bin): the download may be unfinished"
        )
    check_config_family(settings, folder)
    check_weight_format(folder)


def import_model(source: Path, root: Path, link: bool = False) -> Path:
    """Check `source` (a folder or a .gguf file) and add it to `root`; returns the new entry's path.

    A folder is copied (or linked) as `root/<folder name>`; a .gguf file goes into `root/<file stem>/`.
    Copies land under a hidden temporary name first and are renamed when complete, so an interrupted
    import never looks like a model.

    Raises:
        ModelNotFoundError: `source` does not exist.
        ModelFormatError: it is not a model, or an entry of that name is already installed.
        DiskWriteError: the models folder cannot take it (checked before the copy) or refused a write.
    """
    source = source.expanduser().resolve()
    if not source.exists():
        raise ModelNotFoundError(f"{source} does not exist")
    if source.is_dir():
        check_model_folder(source)
        name = source.name
    elif source.suffix.lower() == ".gguf":
        check_gguf(source)
        name = source.stem
    else:
        raise ModelFormatError(f"{source} is neither a model folder nor a .gguf file")
    destination = root / name
    if destination.exists() or destination.is_symlink():
        raise ModelFormatError(f"{destination} already exists: delete it first (`specexec models delete {name}`)")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DiskWriteError(f"cannot import into {root}: {why_write_failed(error, root)}. {_ELSEWHERE}") from error
    if link and source.is_dir():
        _link(destination, source)
        return destination
    if not link:
        _check_room(source, root)
    staging = root / f".importing-{name}"
    try:
        if staging.exists():
            shutil.rmtree(staging)
        if source.is_dir():
            shutil.copytree(source, staging, copy_function=_copy_or_stop)
        else:
            staging.mkdir()
            if link:
                _link(staging / source.name, source)
            else:
                shutil.copy2(source, staging / source.name)
        replace_file(staging, destination)
    except BaseException as error:  # a failed or interrupted copy leaves nothing behind
        shutil.rmtree(staging, ignore_errors=True)
        failure = error.failure if isinstance(error, _CopyStopped) else error
        if isinstance(failure, OSError) and not isinstance(failure, SpecExecError):
            raise DiskWriteError(f"{name} was not imported: {_copy_failure_words(failure, root)}") from failure
        raise
    return destination


_ROOM = "Free some space, or choose a models folder on another drive (the command line can also --link it in place)"
_ELSEWHERE = "Choose a models folder you may write to"


def _copy_failure_words(error: OSError, root: Path) -> str:
    """Why a copy into `root` failed and what to do: the destination's fault (full, refused) or a drive's."""
    if is_disk_full(error):
        return f"{why_write_failed(error, root)}. {_ROOM}"
    if is_write_refused(error):
        return f"{why_write_failed(error, root)}. {_ELSEWHERE}"
    where = f" ({error.filename})" if error.filename else ""
    return f"copying it failed: {error.strerror or error}{where}. Check the drives it is read from and written to"


class _CopyStopped(Exception):
    """Carries the OSError of one file out of shutil.copytree, which would otherwise note it and go on copying
    the rest of a 40 GB folder onto a drive that is already full."""

    def __init__(self, failure: OSError) -> None:
        super().__init__(str(failure))
        self.failure = failure


def _copy_or_stop(source: str, destination: str) -> str:
    try:
        return shutil.copy2(source, destination)
    except OSError as error:
        raise _CopyStopped(error) from error


def _check_room(source: Path, root: Path) -> None:
    """Refuse a copy the drive cannot take with SPARE_BYTES left over, before its first byte."""
    files = [source] if source.is_file() else [path for path in source.rglob("*") if path.is_file()]
    size = sum(path.stat().st_size for path in files)
    free = free_bytes(root)
    if size + SPARE_BYTES > free:
        raise DiskWriteError(
            f"{source.name} takes {format_bytes(size)} and the drive holding {root} has {format_bytes(free)} free "
            f"(a copy leaves {format_bytes(SPARE_BYTES)} to spare). {_ROOM}"
        )


def _link(path: Path, target: Path) -> None:
    try:
        path.symlink_to(target, target_is_directory=target.is_dir())
    except OSError as error:
        raise ModelFormatError(
            f"cannot link {path} to {target} here ({error.strerror}; on Windows, links need Developer Mode): "
            "import without --link to copy it"
        ) from error
