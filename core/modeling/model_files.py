"""Reading one model from its files: a Hugging Face folder (config.json + safetensors + tokenizer) or a
.gguf file, into a `LoadedModel`.

The format readers sit below everything that chooses between them: `core.loading.load` (which spec is which),
`core.loading.builtin` (the bundled pair) and `core.loading.offload_policy` (offloaded targets) all import this module, and
it imports none of them, so the loading modules form no import cycle (tests/test_import_cycles.py).
Offline only: every transformers call gets `local_files_only=True`.
"""

from __future__ import annotations

import contextlib
import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

import torch

from core.errors import DamagedModelError, ModelFormatError, ModelNotFoundError, SpecExecError
from core.modeling.causal_lm import CausalLM
from core.modeling.families import check_architecture, check_config_family, context_limit
from core.modeling.model_format import SAFETENSORS_INDEX, weight_files
from core.modeling.tokenizer_check import check_chat_template, check_tokenizer_runs, is_library_fault
from core.system import json_text

try:  # only for type annotations; transformers is imported lazily (it takes seconds)
    from transformers import PreTrainedTokenizerBase
except ImportError:  # pragma: no cover
    PreTrainedTokenizerBase = object  # type: ignore[misc,assignment]

Progress = Callable[[str], None]
# (bytes of weights read or dequantised so far, bytes in all): from loaders that go tensor by tensor
WeightProgress = Callable[[int, int], None]


@dataclass
class LoadedModel:
    """A model the engine can run, plus the tokenizer that goes with it."""

    lm: CausalLM
    tokenizer: PreTrainedTokenizerBase


# ----------------------------------------------------------------------------------------------------------
# HF folders


def read_folder_config(folder: Path) -> dict:
    """Parse config.json and check the architecture, before anything heavy is read."""
    if not folder.is_dir():
        raise ModelNotFoundError(f"model folder {folder} does not exist or is not a folder")
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelFormatError(
            f"folder {folder} has no config.json, so it is not a Hugging Face model folder: it needs config.json, "
            "tokenizer files and *.safetensors weights (or pass a .gguf file instead)"
        )
    try:
        config = json_text.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFormatError(f"{config_path} is not valid JSON ({error}): re-download the model") from error
    check_config_family(config, folder)
    return config


def transformers_config(folder: Path, name: str):
    """transformers' config of a model folder (its defaults filled in, derived fields such as Qwen's
    `layer_types` computed), of a family the engine runs. Raises ModelFormatError, in words, when transformers
    cannot read it or it names an activation transformers does not have (which transformers only finds when
    it builds the model: a KeyError blamed on the weights), UnsupportedArchitectureError for another family."""
    from transformers import AutoConfig
    from transformers.activations import ACT2FN

    def broken(what: str) -> ModelFormatError:
        return ModelFormatError(
            f"transformers cannot read the config of {name} ({folder / 'config.json'}): {what}: copy or download "
            "the model's config.json again"
        )

    try:
        config = AutoConfig.from_pretrained(folder, local_files_only=True)
    except (SpecExecError, MemoryError):
        raise
    except Exception as error:  # transformers 5's field checks say which field, over several lines
        raise broken(" ".join(f"{type(error).__name__}: {error}".split())) from error
    check_architecture(config.model_type)
    activation = getattr(config, "hidden_act", None)
    if isinstance(activation, str) and activation not in ACT2FN:
        raise broken(f"it names the activation {activation!r}, which transformers does not have")
    return config


def checkpoint_dtype(folder: Path) -> str | None:
    """The dtype a model folder's config.json says its weights are stored in ("dtype" or the older
    "torch_dtype"), or None when it does not say."""
    try:
        config = json_text.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    value = config.get("dtype", config.get("torch_dtype")) if isinstance(config, dict) else None
    return value if isinstance(value, str) else None


def check_weight_files(folder: Path) -> list[Path]:
    """The safetensors files the model needs; DamagedModelError if shards the index names are missing,
    ModelFormatError if there are no safetensors weights."""
    files = weight_files(folder)
    if files:
        return files
    if list(folder.glob("*.bin")) or list(folder.glob("*.pt")) or list(folder.glob("*.pth")):
        raise ModelFormatError(
            f"folder {folder} has only PyTorch pickle weights (.bin/.pt); SpecExec loads *.safetensors only "
            "(safe to open, memory-mapped). Download the safetensors version of the model, or convert it "
            "with save_pretrained(..., safe_serialization=True)"
        )
    raise ModelFormatError(
        f"folder {folder} has config.json but no weights: expected model.safetensors, "
        f"{SAFETENSORS_INDEX} with its shards, or other *.safetensors files"
    )


def load_hf_folder(
    folder: Path,
    name: str,
    dtype: torch.dtype,
    device: torch.device,
    progress: Progress | None = None,
) -> LoadedModel:
    """Load an HF model folder (config.json + tokenizer + safetensors, sharded or not)."""
    report: Progress = progress or (lambda _message: None)
    folder = Path(folder)
    report(f"Reading the config of {name}")
    read_folder_config(folder)
    check_weight_files(folder)

    from transformers import AutoModelForCausalLM, GenerationConfig

    config = transformers_config(folder, name)

    tokenizer = load_tokenizer(name, folder)

    report(f"Loading the weights of {name} ({_dtype_name(dtype)} on {device})")
    kwargs = {"device_map": {"": str(device)}} if device.type != "cpu" else {}
    try:
        # mismatched sizes are reported, not raised, so that check_loading_info can name them in words
        model, info = AutoModelForCausalLM.from_pretrained(
            folder,
            config=config,
            dtype=dtype,
            attn_implementation="sdpa",
            local_files_only=True,
            output_loading_info=True,
            ignore_mismatched_sizes=True,
            generation_config=GenerationConfig(),  # not transformers' reader of the file: end_token_ids reads it
            **kwargs,
        )
    except (SpecExecError, MemoryError, torch.OutOfMemoryError):
        raise
    except (
        Exception
    ) as error:  # the files are whole (core.modeling.model_format checked them): say what failed, no more
        raise ModelFormatError(
            f"could not load the weights of {name} from {folder}: {type(error).__name__}: {error}"
        ) from error
    check_loading_info(name, folder, info, "its config.json")
    return _finish(model, tokenizer, name, device, folder)


def check_loading_info(name: str, where: Path, info: dict, described_by: str) -> None:
    """Refuse weights that left part of the model as transformers made it: a tensor its config (`described_by`)
    needs that no file holds, or one stored in another shape. transformers fills such a tensor with random numbers and
    only logs it, so a shard cut from the index or files of two models mixed gave fluent nonsense."""
    missing = sorted(info.get("missing_keys") or ())
    mismatched = sorted(info.get("mismatched_keys") or ())
    if not missing and not mismatched:
        return
    if missing:
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        fault = f"they lack {missing[0]}{more}"
    else:
        key, stored, needed = mismatched[0]
        more = f" ({len(mismatched) - 1} more like it)" if len(mismatched) > 1 else ""
        fault = f"{key} is stored as {list(stored)} where the config needs {list(needed)}{more}"
    raise DamagedModelError(
        f"the weights of {name} in {where} do not match {described_by}: {fault}. The download is incomplete or "
        "mixes files of different models: download the model again"
    )


def load_tokenizer(name: str, folder: Path, gguf_file: Path | None = None):
    """The tokenizer of a model folder (or the one stored in `gguf_file`), checked to work on ordinary text
    (core.modeling.tokenizer_check). Raises ModelFormatError, in words, when it cannot be read or fails."""
    from transformers import AutoTokenizer

    try:
        if gguf_file is not None:
            tokenizer = AutoTokenizer.from_pretrained(str(folder), gguf_file=str(gguf_file), local_files_only=True)
        else:
            tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    except (SpecExecError, MemoryError):
        raise
    except BaseException as error:
        if not is_library_fault(error):
            raise
        if gguf_file is not None:
            raise ModelFormatError(
                f"could not read the tokenizer stored in {gguf_file}: {type(error).__name__}: {error}"
            ) from error
        raise ModelFormatError(
            f"could not load the tokenizer of {name} from {folder}: {type(error).__name__}: {error}. A model "
            "folder needs its tokenizer files (tokenizer.json or tokenizer.model, tokenizer_config.json)"
        ) from error
    check_chat_template(name, tokenizer)
    if gguf_file is not None:
        check_tokenizer_runs(tokenizer, f"the tokenizer stored in {gguf_file}", "the model")
    else:
        check_tokenizer_runs(
            tokenizer,
            f"the tokenizer of {name} in {folder}",
            "the model's tokenizer files (tokenizer.json, tokenizer_config.json)",
        )
    return tokenizer


# ----------------------------------------------------------------------------------------------------------
# GGUF files


@contextlib.contextmanager
def _parsed_once() -> Iterator[None]:
    """transformers parses a GGUF file anew for its config, its tokenizer and its weights (each parse ~10 s of
    Python for a 49k-token vocabulary on a 2-core machine), and rebuilds gguf's tensor-name map for every
    module (~13 s for the built-in model's 30 layers): most of a first conversion. While it runs, a file is
    parsed once and a map built once per (architecture, layers). Both are pure functions of their arguments
    and transformers only reads what they return; gguf is looked up by attribute at each call
    (`from gguf import GGUFReader` inside its functions), which is what lets the memo stand in. Where a
    later gguf lacks either name, nothing is replaced and the load is only slower."""
    import gguf

    original_reader = getattr(gguf, "GGUFReader", None)
    original_map = getattr(gguf, "get_tensor_name_map", None)
    if original_reader is None or original_map is None:
        yield
        return
    readers: dict[tuple[str, str], object] = {}

    def reader(path, mode="r"):  # noqa: ANN001, ANN202 - stands in for GGUFReader(path, mode)
        key = (str(path), mode)
        if key not in readers:
            readers[key] = original_reader(path, mode)
        return readers[key]

    gguf.GGUFReader, gguf.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(original_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = original_reader, original_map


@contextlib.contextmanager
def _counting_dequantised(weight_progress: WeightProgress | None) -> Iterator[None]:
    """transformers dequantises a GGUF tensor by tensor behind a tqdm bar printed to the terminal. While it
    runs, that bar is replaced by a silent counter that reports (bytes dequantised, bytes in all), at most once
    per percent, so a progress bar can move through what is most of a first load."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils

    original = gguf_utils.tqdm

    def counting(iterable, *_args, **_kwargs):  # noqa: ANN001, ANN202 - stands in for tqdm(iterable, desc=...)
        items = list(iterable)
        sizes = [max(int(getattr(item, "n_bytes", 0) or 0), 1) for item in items]
        total, done, reported = sum(sizes), 0, -1
        for item, size in zip(items, sizes):
            yield item
            done += size
            percent = done * 100 // total
            if weight_progress is not None and percent != reported:
                reported = percent
                weight_progress(done, total)

    gguf_utils.tqdm = counting
    try:
        yield
    finally:
        gguf_utils.tqdm = original


def load_gguf_components(
    path: Path,
    name: str,
    dtype: torch.dtype,
    device: torch.device,
    progress: Progress,
    weight_progress: WeightProgress | None = None,
):
    """(HF model, tokenizer) from a .gguf file, every weight dequantised into a plain dense model;
    `weight_progress` gets (bytes dequantised, bytes in all) as it goes."""
    path = Path(path)
    if not path.is_file():
        raise ModelNotFoundError(f"GGUF file {path} does not exist")
    progress(f"Reading the metadata of {path.name}")
    with _parsed_once():
        progress(f"Reading the tokenizer of {path.name}")
        tokenizer = load_tokenizer(name, path.parent, gguf_file=path)
        progress(f"Dequantising the weights of {path.name} ({_dtype_name(dtype)} on {device}; this takes a while)")
        model = _dequantised_model(path, dtype, device, weight_progress)
    check_architecture(model.config.model_type)
    return model, tokenizer


def _dequantised_model(path: Path, dtype: torch.dtype, device: torch.device, weight_progress: WeightProgress | None):
    """The HF model of a .gguf file with every weight dequantised (plain nn.Linear layers)."""
    from transformers import AutoModelForCausalLM, GgufConfig

    kwargs = {"device_map": {"": str(device)}} if device.type != "cpu" else {}
    try:
        with _counting_dequantised(weight_progress):
            model, info = AutoModelForCausalLM.from_pretrained(
                str(path.parent),
                gguf_file=str(path),
                dtype=dtype,
                attn_implementation="sdpa",
                quantization_config=GgufConfig(dequantize=True),  # plain nn.Linear weights, not packed GGUF blocks
                local_files_only=True,
                output_loading_info=True,
                ignore_mismatched_sizes=True,  # reported, then named by check_loading_info
                **kwargs,
            )
    except (SpecExecError, MemoryError, torch.OutOfMemoryError):
        raise
    except Exception as error:
        raise ModelFormatError(f"could not load the GGUF file {path}: {type(error).__name__}: {error}") from error
    check_loading_info(path.name, path, info, "its own metadata")
    return model


def load_gguf_file(
    path: Path,
    name: str,
    dtype: torch.dtype,
    device: torch.device,
    progress: Progress | None = None,
    weight_progress: WeightProgress | None = None,
) -> LoadedModel:
    report: Progress = progress or (lambda _message: None)
    model, tokenizer = load_gguf_components(path, name, dtype, device, report, weight_progress)
    return _finish(model, tokenizer, name, device, None)


# ----------------------------------------------------------------------------------------------------------
# Common


def _finish(model, tokenizer, name: str, device: torch.device, folder: Path | None) -> LoadedModel:
    model.eval()
    model.requires_grad_(False)
    lm = CausalLM(
        model=model,
        name=name,
        eos_token_ids=end_token_ids(model, folder, tokenizer),
        max_context=context_limit(model.config),
    )
    return LoadedModel(lm=lm, tokenizer=tokenizer)


def end_token_ids(model, folder: Path | None, tokenizer=None) -> tuple[int, ...]:
    """The tokens that end an answer: generation_config.json's eos_token_id (the file in `folder`, when there
    is one), config.json's (`model.config`), then the tokenizer's, each once. Only ids of a row of the model's
    head count: an id past it can never be sampled (an answer would run to the length limit waiting for it),
    and llguidance refuses a grammar's end token outside the vocabulary."""
    return token_ids(
        generation_end_ids(folder) if folder is not None else None,
        getattr(model.config, "eos_token_id", None),
        getattr(tokenizer, "eos_token_id", None),
        vocab_size=model.lm_head.out_features,
    )


def generation_end_ids(folder: Path) -> object:
    """generation_config.json's eos_token_id as the file says it (None when the file is absent or unreadable).
    The file only holds defaults for sampling, which the engine takes from its own settings, so a damaged one
    costs its end tokens, not the load (transformers' reader would fail the load over a file that is a list)."""
    try:
        settings = json_text.loads((folder / "generation_config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return settings.get("eos_token_id") if isinstance(settings, dict) else None


def token_ids(*sources: object, vocab_size: int) -> tuple[int, ...]:
    """The token ids `sources` name (each an id, a list of ids, or None), in order, each once. A model's files
    say which tokens end an answer; anything else they hold there (text, a negative number, true, a nested list,
    an id past the `vocab_size` rows of the model's head) names no token and is left out rather than failing
    the load."""
    ids: dict[int, None] = {}  # in order, each once (a list's `in` made a long hostile list quadratic)
    for source in sources:
        for candidate in source if isinstance(source, (list, tuple)) else [source]:
            if json_text.is_whole(candidate) and 0 <= candidate < vocab_size:
                ids[candidate] = None
    return tuple(ids)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
