"""Load a model + tokenizer from a folder, a .gguf file, the local Hugging Face cache, or the built-in pair.

Everything here is offline: a repo id is only looked up in the local HF cache (`local_files_only=True`), and
every transformers call gets `local_files_only=True`, so nothing ever reaches for the network.

Checks run cheapest first so a bad model fails in milliseconds, not after minutes of reading weights:
settings -> path / cache lookup -> config.json (model_type checked against the engine's supported list)
-> the weights' format (core.modeling.model_format: a format the engine does not read is refused by name, and
only truncated files or missing shards are called damaged) -> tokenizer -> weights.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from core.errors import InvalidSettingError, ModelFormatError, ModelNotFoundError, TokenizerMismatchError
from core.modeling.families import context_limit
from core.modeling.model_format import check_gguf, check_weight_format
from core.modeling.model_files import (
    LoadedModel,
    Progress,
    WeightProgress,
    checkpoint_dtype,
    end_token_ids,
    load_gguf_file,
    load_hf_folder,
    load_tokenizer,
    read_folder_config,
    transformers_config,
)
from core.models.model_spec import REPO_ID_RE
from core.planning.residency import resolve_context_length

if TYPE_CHECKING:
    from core.loading.offload_settings import OffloadSettings

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float64": torch.float64,
}
DTYPE_CHOICES = ("auto", *DTYPES)
DEVICE_CHOICES = ("auto", "cpu", "cuda")
ROLES = ("target", "draft")
logger = logging.getLogger(__name__)


# ----------------------------------------------------------------------------------------------------------
# Settings


def resolve_device(device: str) -> torch.device:
    """'auto' -> cuda if available else cpu; 'cpu'; 'cuda' / 'cuda:N' (error if CUDA is not usable)."""
    if not isinstance(device, str):
        raise InvalidSettingError(f"device must be a string, one of {', '.join(DEVICE_CHOICES)}; got {device!r}")
    text = device.strip().lower()
    if text == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if text == "cpu":
        return torch.device("cpu")
    match = re.fullmatch(r"cuda(?::(\d+))?", text)
    if match is None:
        raise InvalidSettingError(
            f"unknown device '{device}': use one of {', '.join(DEVICE_CHOICES)} (or cuda:N for a specific GPU)"
        )
    if not torch.cuda.is_available():
        build = (
            "this PyTorch build has no CUDA support"
            if torch.version.cuda is None
            else ("no CUDA GPU is visible (check the NVIDIA driver and CUDA_VISIBLE_DEVICES)")
        )
        raise InvalidSettingError(
            f"device '{device}' was asked for, but {build}; use device 'cpu' (or 'auto' to pick the GPU only "
            "when one is usable)"
        )
    index = int(match.group(1)) if match.group(1) else 0
    count = torch.cuda.device_count()
    if index >= count:
        raise InvalidSettingError(f"device '{device}' does not exist: {count} CUDA device(s) visible (cuda:0..)")
    return torch.device("cuda", index)


def auto_dtype(
    device: torch.device, checkpoint_dtype: str | None, gptq: bool, scale_dtype: str | None = None
) -> torch.dtype:
    """The compute dtype 'auto' picks for a model folder.

    CPU: float32. GPU: for a 4-bit model (`gptq`: GPTQ, AWQ or compressed-tensors) the dtype of its scales:
    float16 (GPTQ and AWQ store float16, as exllama and vLLM compute), bfloat16 for bfloat16 scales
    (compressed-tensors repos of bfloat16 models) where the GPU supports it; float16 for float16 checkpoints
    (no rounding of the stored weights, and the fastest 16-bit path on every NVIDIA card); otherwise bfloat16
    where the GPU supports it, else float16. In 16 bits SpecExec still emits exact samples of the target, but
    a near-tie can flip a token against sequential decoding (README, "Same seed").
    """
    if device.type != "cuda":
        return torch.float32
    if (gptq and scale_dtype != "bfloat16") or (not gptq and checkpoint_dtype == "float16"):
        return torch.float16
    return torch.bfloat16 if native_bf16(device) else torch.float16


def native_bf16(device: torch.device) -> bool:
    """bfloat16 arithmetic in hardware (Ampere and newer). `torch.cuda.is_bf16_supported()` alone also says
    True on Turing, where bfloat16 is emulated (slowly) and the fused kernels have no bfloat16 products."""
    return torch.cuda.is_bf16_supported(including_emulation=False) and torch.cuda.get_device_capability(device)[0] >= 8


def resolve_dtype(dtype: str, device: torch.device) -> torch.dtype:
    """'auto' -> float32 on CPU; bfloat16 on a GPU that supports it, else float16 (a model folder refines
    'auto' with `auto_dtype`)."""
    if not isinstance(dtype, str) or dtype.strip().lower() not in DTYPE_CHOICES:
        raise InvalidSettingError(f"unknown dtype {dtype!r}: use one of {', '.join(DTYPE_CHOICES)}")
    text = dtype.strip().lower()
    if text != "auto":
        return DTYPES[text]
    if device.type == "cuda":
        return torch.bfloat16 if native_bf16(device) else torch.float16
    return torch.float32


# ----------------------------------------------------------------------------------------------------------
# Entry point


def load_model(
    spec: str,
    dtype: str = "auto",
    device: str = "auto",
    progress: Progress | None = None,
    offload: "OffloadSettings | None" = None,
    weight_progress: WeightProgress | None = None,
    context_length: int | None = None,
    tree_budget: int | None = None,
    role: str = "target",
    fit_context: bool = False,
) -> LoadedModel:
    """Load `spec`: a model folder, a .gguf file, a repo id in the local HF cache, 'builtin' or 'builtin-draft'.

    The model comes back in eval mode with gradients off, attention sdpa (grouped key/value heads read once: core/modeling/attention.py), on `device` in `dtype`.
    As a "target" (`role`), a 4-bit folder (GPTQ, AWQ, compressed-tensors), or a 16-bit folder that `offload`
    says to offload, comes back as an OffloadedLM (core.offload): decoder weights in host RAM, streamed to the
    GPU per pass. A "draft" is never offloaded: it runs dozens of forwards per pass, so a 4-bit draft is loaded
    whole onto the device
    (`core.offload.loader.load_on_device`; 4-5 GB for a 7-8B model). `progress` gets a sentence per
    loading step; `weight_progress` gets (bytes read, bytes in all) while an offloaded target's weights are
    read or a GGUF's (the built-in pair's on its first start) are dequantised, at most once per percent (a
    35 GB model takes minutes: the app shows a moving bar).
    `context_length` (None: 4,096 or the model's limit if lower) and `tree_budget` (None: no plan) are the
    planned context and tree: the model's `max_context` and `max_tree_tokens`, which size its KV caches.
    `fit_context`: a `context_length` above the model's limit is taken down to the limit, where it is
    otherwise refused (residency.resolve_context_length).

    Raises InvalidSettingError for a context length above the model's limit unless `fit_context` (and bad
    device/dtype/role);
    UnsupportedFormatError for weights in a format the engine does not read (FP8, MXFP4, bitsandbytes, a big
    GGUF, ...) and DamagedModelError for truncated files or missing shards, both before any weight is read.
    """
    if role not in ROLES:
        raise InvalidSettingError(f"a model's role is one of {', '.join(ROLES)}, not {role!r}")
    loaded = _load(
        spec, dtype, device, progress, offload, weight_progress, context_length, tree_budget, role, fit_context
    )
    lm = loaded.lm
    if not lm.eos_token_ids:  # a damaged or hand-made folder: it still answers, but never stops on its own
        logger.warning(
            "%s names no token of its vocabulary that ends an answer: answers run to the length limit", lm.name
        )
    lm.max_context = resolve_context_length(context_length, lm.max_context, fit_context, model=lm.name)
    if tree_budget is not None and lm.max_tree_tokens is None:
        lm.max_tree_tokens = tree_budget
    return loaded


def check_model_exists(spec: str | os.PathLike[str] | None) -> None:
    """Raise the error that loading `spec` would raise for a model that is not there, reading nothing but
    the file system (and the local Hugging Face cache's index): a command that loads two models says that the
    second is missing before it spends a minute loading the first. Raises ModelNotFoundError, ModelFormatError."""
    if not isinstance(spec, (str, os.PathLike)) or not str(spec).strip():
        raise ModelNotFoundError("no model given: pass a model folder, a .gguf file, a cached repo id or 'builtin'")
    from core.loading import builtin  # imported here: it is only needed for the built-in pair

    if not builtin.is_builtin(str(spec).strip()):
        resolve_spec(str(spec).strip())


def _load(
    spec, dtype, device, progress, offload, weight_progress, context_length, tree_budget, role, fit_context
) -> LoadedModel:
    report: Progress = progress or (lambda _message: None)
    torch_device = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, torch_device)
    if not isinstance(spec, (str, os.PathLike)) or not str(spec).strip():
        raise ModelNotFoundError("no model given: pass a model folder, a .gguf file, a cached repo id or 'builtin'")
    spec = str(spec).strip()

    from core.loading import builtin  # imported here: it is only needed for the built-in pair

    if builtin.is_builtin(spec):
        return builtin.load_builtin(spec, torch_dtype, torch_device, report, weight_progress)

    kind, path, name = resolve_spec(spec)
    if kind == "gguf":
        check_gguf(path)  # another family, or a 70B k-quant (~140 GB expanded): refused before it is read
        return load_gguf_file(path, name, torch_dtype, torch_device, report, weight_progress)
    from core.loading.offload_policy import load_offloaded_folder, should_offload
    from core.loading.offload_settings import OffloadSettings

    read_folder_config(path)
    # Read by transformers here, before any tokenizer: a config it cannot read is said to be the config's fault.
    config = transformers_config(path, name)
    if fit_context and context_length is not None:  # the 4-bit and offloaded loaders plan the caches with it
        context_length = resolve_context_length(context_length, context_limit(config), fit=True)
    scheme = check_weight_format(path)  # a format the engine does not read is refused here, in words
    gptq = scheme is not None
    if dtype.strip().lower() == "auto":
        torch_dtype = auto_dtype(torch_device, checkpoint_dtype(path), gptq, scheme.scale_dtype if gptq else None)
    if role == "draft":
        if gptq:
            return _load_gptq_on_device(path, name, torch_dtype, torch_device, report, context_length)
        return load_hf_folder(path, name, torch_dtype, torch_device, report)
    settings = offload or OffloadSettings(tree_budget=tree_budget or OffloadSettings.tree_budget)
    if should_offload(path, settings, torch_device):
        return load_offloaded_folder(
            path, name, torch_dtype, torch_device, settings, report, weight_progress, context_length
        )
    return load_hf_folder(path, name, torch_dtype, torch_device, report)


def _load_gptq_on_device(
    folder: Path, name: str, dtype: torch.dtype, device: torch.device, report: Progress, context_length: int | None
) -> LoadedModel:
    """A 4-bit draft (GPTQ, AWQ, compressed-tensors) with every weight on `device` (no streaming) and its
    tokenizer."""
    from core.offload.loader import load_on_device

    report(f"Loading the weights of {name} (4-bit, {str(dtype).removeprefix('torch.')} on {device})")
    tokenizer = load_tokenizer(name, folder)
    lm = load_on_device(str(folder), str(device), dtype, context_length=context_length)
    lm.name = name
    lm.eos_token_ids = end_token_ids(lm.model, folder, tokenizer)
    return LoadedModel(lm=lm, tokenizer=tokenizer)


def resolve_spec(spec: str) -> tuple[str, Path, str]:
    """Turn a user's model spec into ('folder' | 'gguf', path, display name). Raises ModelNotFoundError."""
    path = Path(spec).expanduser()
    if path.is_dir():
        return _folder_or_gguf(path, name=path.resolve().name)
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return "gguf", path.resolve(), path.stem
        raise ModelNotFoundError(
            f"'{spec}' is a file but not a model folder or a .gguf file: pass a model folder (config.json, "
            "tokenizer files, *.safetensors) or a .gguf file"
        )
    if path.suffix.lower() == ".gguf" or not REPO_ID_RE.match(spec):
        raise ModelNotFoundError(
            f"model '{spec}' not found: there is no file or folder at {path.resolve()}. Check the path, or use "
            "'builtin' for the bundled SmolLM2 model"
        )
    snapshot = _find_in_hf_cache(spec)
    return _folder_or_gguf(Path(snapshot), name=spec)


def _folder_or_gguf(folder: Path, name: str) -> tuple[str, Path, str]:
    """A folder holds an HF model; one with no config.json but exactly one .gguf file means that file."""
    if (folder / "config.json").is_file():
        return "folder", folder, name
    ggufs = sorted(p for p in folder.glob("*.gguf") if p.is_file())
    if len(ggufs) == 1:
        return "gguf", ggufs[0].resolve(), name
    if len(ggufs) > 1:
        listed = ", ".join(p.name for p in ggufs[:6])
        raise ModelFormatError(
            f"folder {folder} has no config.json and several .gguf files ({listed}): pass the path of the one to load"
        )
    return "folder", folder, name  # load_hf_folder reports the missing config.json


def hf_cache_dir() -> str:
    """The Hugging Face hub cache folder (HF_HUB_CACHE / HF_HOME respected)."""
    from huggingface_hub import constants

    return constants.HF_HUB_CACHE


def _find_in_hf_cache(repo_id: str) -> str:
    """Snapshot folder of `repo_id` in the local HF cache. Offline only: never touches the network."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, IncompleteSnapshotError, LocalEntryNotFoundError

    cache = hf_cache_dir()
    try:
        return snapshot_download(repo_id, cache_dir=cache, local_files_only=True)
    except IncompleteSnapshotError as error:
        raise ModelFormatError(
            f"the copy of '{repo_id}' in the local Hugging Face cache ({cache}) is incomplete: {error}. "
            f"Finish the download (e.g. `hf download {repo_id}`) and try again"
        ) from error
    except (LocalEntryNotFoundError, HFValidationError, OSError) as error:
        raise ModelNotFoundError(
            f"model '{repo_id}' not found: it is not a folder or file here ({Path(repo_id).resolve()}), and "
            f"the local Hugging Face cache ({cache}) has no copy of repo '{repo_id}'. SpecExec never downloads: "
            f"download it first (e.g. `hf download {repo_id}`), pass a model folder or .gguf file, or use "
            "'builtin'"
        ) from error


# ----------------------------------------------------------------------------------------------------------
# Tokenizers


_SPECIAL_TOKEN_ATTRS = ("bos_token_id", "eos_token_id", "unk_token_id")


def check_same_tokenizer(target_tok, draft_tok, target_name: str, draft_name: str) -> None:
    """Raise TokenizerMismatchError unless both tokenizers have the same vocabulary and special token ids.

    The pad token is not compared: repos of one family often differ only there, and it never reaches the model
    during generation.
    """
    target_vocab = target_tok.get_vocab()
    draft_vocab = draft_tok.get_vocab()
    problems: list[str] = []
    if target_vocab != draft_vocab:
        target_by_id = {i: t for t, i in target_vocab.items()}
        draft_by_id = {i: t for t, i in draft_vocab.items()}
        detail = f"vocab sizes {len(target_vocab)} (target) vs {len(draft_vocab)} (draft)"
        for token_id in sorted(set(target_by_id) | set(draft_by_id)):
            a, b = target_by_id.get(token_id), draft_by_id.get(token_id)
            if a != b:
                shown_a = repr(a) if a is not None else "(none)"
                shown_b = repr(b) if b is not None else "(none)"
                detail += f"; first differing token id {token_id}: {shown_a} (target) vs {shown_b} (draft)"
                break
        problems.append(f"different vocabularies ({detail})")
    for attr in _SPECIAL_TOKEN_ATTRS:
        a, b = getattr(target_tok, attr, None), getattr(draft_tok, attr, None)
        if a != b:
            problems.append(f"different {attr.removesuffix('_id')} ids: {a} (target) vs {b} (draft)")
    if problems:
        raise TokenizerMismatchError(
            f"draft model '{draft_name}' and target model '{target_name}' do not share a tokenizer: "
            + "; ".join(problems)
            + ". Draft tokens would mean different text to the target: pick a draft from the same model family "
            "(same tokenizer) as the target"
        )
