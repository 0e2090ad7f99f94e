"""Reading a safetensors checkpoint folder tensor by tensor, and mapping its names onto the model.

A folder holds `model.safetensors`, or shards listed by `model.safetensors.index.json`. Names map onto
the model built from config.json as in transformers 5, including its fusion of MoE experts: Mixtral's
`block_sparse_moe.experts.{e}.w1/w3/w2.weight` and Qwen2-MoE's `mlp.experts.{e}.gate/up/down_proj.weight`
are written straight into slices of the fused `mlp.experts.gate_up_proj` / `down_proj` tensors.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open

from core.errors import DamagedModelError, ModelFormatError, ModelNotFoundError
from core.system import json_text

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"

_DTYPE_BYTES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "I64": 8,
    "I32": 4,
    "I16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
}

_LAYER_KEY = re.compile(r"^model\.layers\.(\d+)\.(.+)$")
# renames transformers 5 applies before anything else, per model type
_RENAMES = {"mixtral": ((".block_sparse_moe.", ".mlp."),)}
_EXPERT_KEY = re.compile(r"^mlp\.experts\.(\d+)\.(w1|w3|w2|gate_proj|up_proj|down_proj)\.weight$")
_EXPERT_ROLE = {"w1": "gate", "gate_proj": "gate", "w3": "up", "up_proj": "up", "w2": "down", "down_proj": "down"}
# tensors that old checkpoints carry but models recompute
_IGNORED = re.compile(r"(rotary_emb\.inv_freq|\.rotary_emb\.)")


def checkpoint_files(folder: str | Path) -> list[Path]:
    """The safetensors files of a model folder, in shard order.

    Raises: ModelNotFoundError (no folder), ModelFormatError (no safetensors weights, broken index).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ModelNotFoundError(f"model folder not found: {folder}")
    index = folder / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json_text.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError) as error:  # ValueError: not JSON, or not UTF-8
            raise ModelFormatError(f"{index} is not a valid safetensors index ({error})") from error
        files = [folder / name for name in sorted(set(weight_map.values()))]
        missing = [str(f.name) for f in files if not f.is_file()]
        if missing:
            raise DamagedModelError(
                f"shards listed in {index.name} are missing from {folder}: {', '.join(missing[:5])}. "
                "The download is incomplete: download the missing files again"
            )
        return files
    single = folder / SINGLE_FILE
    if single.is_file():
        return [single]
    found = sorted(folder.glob("*.safetensors"))
    if found:
        return found
    raise ModelFormatError(f"no safetensors weights in {folder} (expected {SINGLE_FILE} or {INDEX_FILE})")


@dataclass(frozen=True)
class TensorInfo:
    file: Path
    key: str
    shape: tuple[int, ...]
    nbytes: int
    dtype: str  # safetensors' name: "F16", "BF16", "I32", ...


def read_headers(files: list[Path]) -> dict[str, TensorInfo]:
    """Name -> file, shape and size of every tensor, from the safetensors headers only (no data read)."""
    infos: dict[str, TensorInfo] = {}
    for path in files:
        try:
            with safe_open(str(path), framework="pt", device="cpu") as handle:
                for key in handle.keys():
                    piece = handle.get_slice(key)
                    shape = tuple(piece.get_shape())
                    count = 1
                    for size in shape:
                        count *= size
                    dtype = piece.get_dtype()
                    infos[key] = TensorInfo(path, key, shape, count * _DTYPE_BYTES.get(dtype, 4), dtype)
        except (OSError, RuntimeError, ValueError) as error:  # safetensors raises SafetensorError (a ValueError-ish)
            raise ModelFormatError(f"cannot read safetensors file {path}: {error}") from error
    return infos


def iter_tensors(files: list[Path], keys: set[str]) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield (name, tensor) for the wanted keys, one tensor in memory at a time, file by file."""
    for path in files:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            for key in handle.keys():
                if key in keys:
                    yield key, handle.get_tensor(key)


@dataclass(frozen=True)
class LayerTarget:
    """Where a checkpoint tensor goes: layer `layer`, entry `name`, optionally a slice of it (`part`), and
    how it becomes that entry (`convert(tensor, entry shape)`: another format's tensor turned into the
    GPTQ layout, core.offload.quant_formats; None: copied as it is)."""

    layer: int
    name: str
    part: Callable[[torch.Tensor], torch.Tensor] | None = None
    part_id: tuple | None = None
    convert: Callable[[torch.Tensor, tuple[int, ...]], torch.Tensor] | None = None


def is_ignored(key: str) -> bool:
    return bool(_IGNORED.search(key))


def map_layer_key(model_type: str, key: str, has_entry: Callable[[int, str], bool], entry_shape) -> LayerTarget | None:
    """Map a checkpoint name to a decoder-layer entry, or None when it is not a layer tensor we know.

    has_entry(layer, name): whether the layer layout has that entry; entry_shape(layer, name): its shape.
    """
    match = _LAYER_KEY.match(key)
    if match is None:
        return None
    layer, rest = int(match.group(1)), "." + match.group(2)
    for old, new in _RENAMES.get(model_type, ()):
        rest = rest.replace(old, new)
    rest = rest[1:]
    if has_entry(layer, rest):
        return LayerTarget(layer, rest)
    expert = _EXPERT_KEY.match(rest)
    if expert is None:
        return None
    index, role = int(expert.group(1)), _EXPERT_ROLE[expert.group(2)]
    if role == "down":
        name = "mlp.experts.down_proj"
        if not has_entry(layer, name):
            return None
        return LayerTarget(layer, name, lambda t: t[index], (index,))
    name = "mlp.experts.gate_up_proj"
    if not has_entry(layer, name):
        return None
    half = entry_shape(layer, name)[1] // 2
    if role == "gate":
        return LayerTarget(layer, name, lambda t: t[index, :half], (index, 0))
    return LayerTarget(layer, name, lambda t: t[index, half:], (index, 1))


def expected_parts(name: str, shape: tuple[int, ...]) -> int:
    """How many checkpoint tensors fill an entry: one, or one per expert (and per gate/up half)."""
    if name == "mlp.experts.gate_up_proj":
        return 2 * shape[0]
    if name == "mlp.experts.down_proj":
        return shape[0]
    return 1
