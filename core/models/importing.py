"""Bring a model someone already has into the models folder: a model folder or a .gguf file, checked cheaply
first (config.json and weights, or a readable GGUF header), then copied, or linked in place with `link`.

The result is what the loader accepts as `--target`: a folder with config.json and weights, or a folder
holding exactly one .gguf file.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from pathlib import Path

from core.errors import ModelFormatError, ModelNotFoundError
from core.modeling.families import check_config_family
from core.modeling.model_format import check_gguf, check_weight_format

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")
GGUF_MAGIC = b"GGUF"
GGUF_VERSIONS = (1, 2, 3)


def check_model_folder(folder: Path) -> None:
    """A folder the loader can read: a parseable config.json of a family the engine runs, and weight files in a
    format the engine reads (core.modeling.model_format: headers and settings only, no weight data), or exactly
    one .gguf file (`check_gguf_file`).

    Raises:
        ModelFormatError: what is missing, in words; UnsupportedFormatError: a format the engine does not read
        (named, with what to download instead); UnsupportedArchitectureError: a family it does not run (a model
        with recurrent layers said as such first); DamagedModelError: a truncated file or a missing shard.
    """
    ggufs = sorted(folder.glob("*.gguf"))
    config = folder / "config.json"
    if not config.is_file():
        if len(ggufs) == 1:
            return check_gguf_file(ggufs[0])
        raise ModelFormatError(
            f"{folder} is not a model folder: it has no config.json (a Hugging Face model folder has config.json, "
            "tokenizer files and *.safetensors; or import a single .gguf file)"
        )
    try:
        settings = json.loads(config.read_text(encoding="utf-8"))
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


def check_gguf_file(path: Path) -> None:
    """The first 24 bytes of a GGUF file: magic, a known version, tensor and metadata counts; then, from its
    metadata, its family and its size once expanded (core.modeling.model_format.check_gguf: a big model's GGUF
    cannot load).

    Raises:
        ModelFormatError: not a GGUF file, or a truncated one; UnsupportedArchitectureError: a family the engine
        does not run; UnsupportedFormatError: too big to expand.
    """
    try:
        with open(path, "rb") as handle:
            header = handle.read(24)
    except OSError as error:
        raise ModelFormatError(f"{path} cannot be read: {error}") from error
    if len(header) < 24 or header[:4] != GGUF_MAGIC:
        raise ModelFormatError(f"{path} is not a GGUF file (it does not start with 'GGUF')")
    version, tensors, _metadata = struct.unpack("<IQQ", header[4:24])
    if version not in GGUF_VERSIONS:
        raise ModelFormatError(f"{path} is GGUF version {version}; this program reads versions 1 to 3")
    if tensors == 0:
        raise ModelFormatError(f"{path} is a GGUF file with no tensors: it holds no model")
    check_gguf(path)


def import_model(source: Path, root: Path, link: bool = False) -> Path:
    """Check `source` (a folder or a .gguf file) and add it to `root`; returns the new entry's path.

    A folder is copied (or linked) as `root/<folder name>`; a .gguf file goes into `root/<file stem>/`.
    Copies land under a hidden temporary name first and are renamed when complete, so an interrupted
    import never looks like a model.

    Raises:
        ModelNotFoundError: `source` does not exist.
        ModelFormatError: it is not a model, or an entry of that name is already installed.
    """
    source = source.expanduser().resolve()
    if not source.exists():
        raise ModelNotFoundError(f"{source} does not exist")
    if source.is_dir():
        check_model_folder(source)
        name = source.name
    elif source.suffix.lower() == ".gguf":
        check_gguf_file(source)
        name = source.stem
    else:
        raise ModelFormatError(f"{source} is neither a model folder nor a .gguf file")
    destination = root / name
    if destination.exists() or destination.is_symlink():
        raise ModelFormatError(f"{destination} already exists: delete it first (`specexec models delete {name}`)")
    root.mkdir(parents=True, exist_ok=True)
    if link and source.is_dir():
        _link(destination, source)
        return destination
    staging = root / f".importing-{name}"
    if staging.exists():
        shutil.rmtree(staging)
    try:
        if source.is_dir():
            shutil.copytree(source, staging)
        else:
            staging.mkdir()
            if link:
                _link(staging / source.name, source)
            else:
                shutil.copy2(source, staging / source.name)
    except BaseException:  # a failed or interrupted copy leaves nothing behind
        shutil.rmtree(staging, ignore_errors=True)
        raise
    os.replace(staging, destination)
    return destination


def _link(path: Path, target: Path) -> None:
    try:
        path.symlink_to(target, target_is_directory=target.is_dir())
    except OSError as error:
        raise ModelFormatError(
            f"cannot link {path} to {target} here ({error.strerror}; on Windows, links need Developer Mode): "
            "import without --link to copy it"
        ) from error
