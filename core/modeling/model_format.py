"""What a model folder's weights are stored as, read from its JSON files and safetensors headers only (no
torch, no weight data): the 4-bit layouts the engine reads, and a refusal in plain words for the rest.

Read (each converted at load into the engine's one 4-bit layout, `core.offload.gptq.GPTQLinear`, by
`core.offload.quant_formats`):
- GPTQ (`quant_method: gptq`): the v1 layout of AutoGPTQ / GPTQ-for-LLaMa / AutoRound's auto_gptq export
  (zero points stored minus one), and GPTQModel's `gptq_v2` (zero points as they are); 2, 3, 4 or 8 bits.
- AWQ (`quant_method: awq`, `version`/`format: gemm`, with zero points): AutoAWQ's GEMM layout, also written
  by AutoRound's auto_awq export and GPTQModel.
- compressed-tensors `pack-quantized` integer weights with 16-bit activations (llm-compressor's W4A16 /
  W8A16, symmetric or asymmetric, group or channel scales, act-order through `weight_g_idx`).
- AutoRound's own export (`quant_method: auto-round`), which stores one of the layouts above.
- 16-bit safetensors (no quantisation settings).

Everything else is refused before a weight is read (`UnsupportedFormatError`), naming the format, what the
app reads, and which download to pick instead; only truncated files and missing shards are called damaged
(`DamagedModelError`).
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, replace
from pathlib import Path

from core.errors import DamagedModelError, ModelFormatError, UnsupportedFormatError
from core.modeling.config_shapes import check_config_against_weights
from core.modeling.families import check_gguf_architecture
from core.modeling.gguf_header import gguf_header
from core.modeling.gguf_shapes import check_gguf_shapes
from core.modeling.hybrid_layers import check_attention_only
from core.planning.sizes import format_bytes
from core.system import json_text

QUANTIZE_CONFIG = "quantize_config.json"  # AutoGPTQ / TheBloke's GPTQ repos
QUANT_CONFIG = "quant_config.json"  # early AutoAWQ repos
SAFETENSORS_INDEX = "model.safetensors.index.json"
SUPPORTED_BITS = (2, 3, 4, 8)

READS = "This app reads 4-bit GPTQ, AWQ (GEMM) and compressed-tensors W4A16 models, and 16-bit safetensors models"
INSTEAD = (
    'download the version of this model published as GPTQ ("-GPTQ", "-GPTQ-Int4"), AWQ ("-AWQ"), '
    'compressed-tensors W4A16 ("-quantized.w4a16", "-W4A16") or its 16-bit original instead'
)

# quant_method values of transformers' QuantizationMethod and other tools, in words for people
_METHOD_NAMES = {
    "bitsandbytes": "bitsandbytes",
    "fp8": "FP8",
    "fbgemm_fp8": "FP8 (FBGEMM)",
    "mxfp4": "MXFP4",
    "nvfp4": "NVFP4",
    "mxfp8": "MXFP8",
    "exl2": "EXL2 (ExLlamaV2)",
    "exl3": "EXL3 (ExLlamaV3)",
    "hqq": "HQQ",
    "quanto": "Quanto",
    "eetq": "EETQ",
    "aqlm": "AQLM",
    "vptq": "VPTQ",
    "higgs": "HIGGS",
    "torchao": "torchao",
    "spqr": "SpQR",
    "bitnet": "BitNet",
    "quark": "Quark",
    "fp_quant": "FP-Quant",
    "gguf": "GGUF",
    "fouroversix": "Four Over Six",
    "sinq": "SINQ",
    "metal": "Metal",
    "marlin": "Marlin",
}
# tensor name endings that give a format away when config.json says nothing
_TENSOR_SIGNS = (
    (".q_weight", "EXL2 (ExLlamaV2)"),
    (".q_invperm", "EXL2 (ExLlamaV2)"),
    (".q_scale_max", "EXL2 (ExLlamaV2)"),
    (".W_q", "HQQ"),
    (".weight.absmax", "bitsandbytes"),
    (".weight.quant_map", "bitsandbytes"),
    (".SCB", "bitsandbytes 8-bit"),
    ("_blocks", "MXFP4"),
    (".weight_packed", "compressed-tensors"),
    (".qweight", "GPTQ or AWQ"),
)
_FP8_DTYPES = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F4"}


@dataclass(frozen=True)
class QuantScheme:
    """How a quantised checkpoint stores its linears, as far as the engine needs to know.

    method: "gptq" | "awq" | "compressed-tensors"; bits; group_size (-1: one group per output column);
    desc_act: act-order (a g_idx that is not k // group_size); sym; zero_offset: what the stored zero point
    lacks (1 for GPTQ v1, which stores zero - 1; 0 for the others); label: the format in words;
    scale_dtype / bias_dtype: "float16", "bfloat16" or "float32", read from the safetensors headers by
    `check_weight_format` (float16 from the settings alone)."""

    method: str
    bits: int
    group_size: int
    desc_act: bool = False
    sym: bool = True
    zero_offset: int = 1
    label: str = ""
    scale_dtype: str = "float16"  # as the checkpoint stores its scales (and the biases of quantised linears)
    bias_dtype: str = "float16"


def refuse(folder: Path, what: str, detail: str = "") -> UnsupportedFormatError:
    """The error for a format the app does not read: it names the format, what the app reads, what to get."""
    extra = f" ({detail})" if detail else ""
    return UnsupportedFormatError(
        f"the model in {folder} is stored as {what}{extra}, which this app cannot read. {READS}: {INSTEAD}. "
        "The files are not damaged; downloading them again will not help"
    )


# ----------------------------------------------------------------------------------------------------------
# Reading the settings


def _json(path: Path) -> object:
    try:
        return json_text.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelFormatError(f"{path} is not valid JSON ({error}): download it again") from error


def raw_quantization_config(folder: Path) -> dict | None:
    """The quantisation settings of a folder: quantize_config.json, config.json's "quantization_config",
    or an early AutoAWQ repo's quant_config.json; None when there are none (a 16-bit model)."""
    path = folder / QUANTIZE_CONFIG
    if path.is_file():
        data = _json(path)
        return data if isinstance(data, dict) else None
    config = folder / "config.json"
    if config.is_file():
        data = _json(config)
        quantization = data.get("quantization_config") if isinstance(data, dict) else None
        if isinstance(quantization, dict):
            return quantization
    path = folder / QUANT_CONFIG
    if path.is_file():
        data = _json(path)
        if isinstance(data, dict):
            return {"quant_method": "awq", **data}
    return None


def quant_scheme(folder: str | Path) -> QuantScheme | None:
    """The folder's 4-bit (or 2/3/8-bit) scheme, or None for a 16-bit model, from its settings alone.

    Raises: UnsupportedFormatError for a format the engine does not read; ModelFormatError for settings
    that make no sense (bits, group size)."""
    folder = Path(folder)
    raw = raw_quantization_config(folder)
    if raw is None:
        return None
    method = str(raw.get("quant_method", "gptq")).strip().lower()
    if method == "gptq":
        return _gptq(folder, raw)
    if method == "awq":
        return _awq(folder, raw)
    if method == "compressed-tensors":
        return _compressed_tensors(folder, raw)
    if method in ("auto-round", "intel/auto-round"):
        return _autoround(folder, raw)
    if method == "bitsandbytes":
        bits = "4-bit (NF4/FP4)" if raw.get("load_in_4bit") else "8-bit" if raw.get("load_in_8bit") else ""
        raise refuse(folder, f"bitsandbytes {bits}".strip(), "its weights are packed for bitsandbytes' own kernels")
    raise refuse(folder, _METHOD_NAMES.get(method, f"'{method}' quantisation"), f'quant_method "{method}"')


def _int(folder: Path, raw: dict, keys: tuple[str, ...], default: int | None = None) -> int:
    for key in keys:
        if key in raw and raw[key] is not None:
            try:
                return int(raw[key])
            except (TypeError, ValueError) as error:
                raise ModelFormatError(
                    f"the quantisation settings in {folder} have a bad '{key}': {raw[key]!r}"
                ) from error
    if default is None:
        raise ModelFormatError(f"the quantisation settings in {folder} lack '{keys[0]}'")
    return default


def _flag(folder: Path, raw: dict, key: str, default: bool) -> bool:
    """A yes/no setting: a JSON boolean, or the words true / false some exporters write; anything else is
    refused (Python's truth would read the word "false" as true)."""
    value = raw.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    word = value.strip().lower() if isinstance(value, str) else None
    if word in ("true", "false"):
        return word == "true"
    raise ModelFormatError(f"the quantisation settings in {folder} have a bad '{key}': {value!r} (true or false)")


def _check_bits_and_group(folder: Path, name: str, bits: int, group_size: int) -> None:
    if bits not in SUPPORTED_BITS:
        raise refuse(
            folder,
            f"{name} with {bits}-bit weights",
            f"{', '.join(map(str, SUPPORTED_BITS))}-bit weights are read; 4-bit is the common choice",
        )
    per = 32 if bits == 3 else 32 // bits
    if group_size != -1 and (group_size <= 0 or group_size % per):
        raise ModelFormatError(
            f"{name} group size {group_size} in {folder} is not supported: use -1 or a positive multiple of {per}"
        )


def _gptq(folder: Path, raw: dict) -> QuantScheme:
    fmt = str(raw.get("format") or raw.get("checkpoint_format") or "gptq").strip().lower()
    if _flag(folder, raw, "is_marlin_format", False):
        fmt = "marlin"
    if fmt not in ("gptq", "gptq_v2"):
        raise refuse(folder, f"GPTQ in the {fmt} layout", f'checkpoint_format "{fmt}"; only gptq and gptq_v2 are read')
    bits = _int(folder, raw, ("bits",))
    group_size = _int(folder, raw, ("group_size",), -1)
    _check_bits_and_group(folder, "GPTQ", bits, group_size)
    desc_act = _flag(folder, raw, "desc_act", False)
    label = (
        f"GPTQ{' v2' if fmt == 'gptq_v2' else ''} {bits}-bit, "
        f"{'one group' if group_size == -1 else f'group {group_size}'}{', act-order' if desc_act else ''}"
    )
    return QuantScheme(
        "gptq", bits, group_size, desc_act, _flag(folder, raw, "sym", True), 0 if fmt == "gptq_v2" else 1, label
    )


def _awq(folder: Path, raw: dict) -> QuantScheme:
    version = str(raw.get("format") or raw.get("version") or "gemm").strip().lower()
    if str(raw.get("backend", "")).strip().lower() == "llm-awq":
        version = "llm-awq"
    if version != "gemm":
        raise refuse(folder, f"AWQ in the {version.upper()} layout", "only AWQ's GEMM layout is read")
    if not _flag(folder, raw, "zero_point", True):
        raise refuse(folder, "AWQ without zero points", "AWQ's GEMM layout is read with its zero points")
    bits = _int(folder, raw, ("bits", "w_bit"))
    group_size = _int(folder, raw, ("group_size", "q_group_size"), -1)
    if bits != 4:
        raise refuse(folder, f"AWQ with {bits}-bit weights", "AWQ's GEMM layout holds 4-bit weights")
    _check_bits_and_group(folder, "AWQ", bits, group_size)
    group = "one group" if group_size == -1 else f"group {group_size}"
    return QuantScheme("awq", 4, group_size, False, False, 0, f"AWQ 4-bit, {group}")


def _autoround(folder: Path, raw: dict) -> QuantScheme:
    """AutoRound's own export (`quant_method: auto-round`) stores one of the layouts above, named by its
    `packing_format` (auto_round/export/export_to_autoround/export.py, AutoRound 0.15): "...awq" is AWQ's GEMM
    layout (bit for bit the auto_awq export's: scripts/quant_fixtures/make_fixtures.py checks it), "...gptq"
    GPTQ v1 (its qlinear_torch_zp stores zeros minus one), "...gptqmodel" and a plain "auto_round" the GPTQ
    layout with zeros as they are (its qlinear_torch)."""
    packing = str(raw.get("packing_format") or "auto_round:auto_gptq").strip().lower()
    data_type = str(raw.get("data_type", "int")).strip().lower()
    if data_type != "int":
        raise refuse(folder, f"AutoRound's {data_type.upper()} format", "integer weights are read")
    if int(raw.get("act_bits") or 16) < 16:
        raise refuse(folder, "AutoRound with quantised activations", "only weight-only schemes are read")
    if "awq" in packing:
        return replace(
            _awq(folder, {**raw, "zero_point": True, "version": "gemm"}),
            label=f"AutoRound (AWQ layout) 4-bit, group {raw.get('group_size', -1)}",
        )
    if "gptqmodel" in packing or "gptq" not in packing:
        return replace(_gptq(folder, {**raw, "checkpoint_format": "gptq_v2"}), label=f"AutoRound {_gptq_words(raw)}")
    return replace(
        _gptq(folder, {**raw, "checkpoint_format": "gptq"}), label=f"AutoRound (GPTQ layout) {_gptq_words(raw)}"
    )


def _gptq_words(raw: dict) -> str:
    group = int(raw.get("group_size", -1))
    return f"{int(raw.get('bits', 4))}-bit, {'one group' if group == -1 else f'group {group}'}"


# compressed-tensors formats other than pack-quantized, in words
_CT_FORMATS = {
    "float-quantized": "FP8 (compressed-tensors float-quantized)",
    "naive-quantized": "8-bit integer weights and activations (compressed-tensors naive-quantized)",
    "int-quantized": "8-bit integer weights and activations (compressed-tensors int-quantized, W8A8)",
    "nvfp4-pack-quantized": "NVFP4 (compressed-tensors)",
    "mxfp4-pack-quantized": "MXFP4 (compressed-tensors)",
    "mxfp8-quantized": "MXFP8 (compressed-tensors)",
    "marlin-24": "2:4 sparse 4-bit (compressed-tensors marlin-24)",
    "sparse-24-bitmask": "2:4 sparse weights (compressed-tensors)",
    "sparse-bitmask": "sparse weights (compressed-tensors)",
    "dense": "unpacked weights with separate scales (compressed-tensors dense)",
}


def _compressed_tensors(folder: Path, raw: dict) -> QuantScheme:
    groups = raw.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise ModelFormatError(f"the compressed-tensors settings in {folder} have no config_groups")
    if raw.get("sparsity_config"):
        raise refuse(folder, "sparse weights (compressed-tensors sparsity)")
    if raw.get("transform_config"):
        raise refuse(folder, "rotated weights (compressed-tensors transforms, e.g. SpinQuant / QuIP)")
    status = str(raw.get("quantization_status", "compressed")).lower()
    if status != "compressed":
        raise refuse(
            folder, f"compressed-tensors weights in the '{status}' state", "only packed (compressed) weights are read"
        )
    top = str(raw.get("format") or "").lower()
    schemes = set()
    for name, group in groups.items():
        if not isinstance(group, dict) or not isinstance(group.get("weights"), dict):
            raise refuse(folder, "compressed-tensors without weight quantisation", f"config group '{name}'")
        fmt = str(group.get("format") or top or "").lower()
        weights = group["weights"]
        kind = str(weights.get("type", "int")).lower()
        if fmt in _CT_FORMATS:
            raise refuse(folder, _CT_FORMATS[fmt])
        if kind == "float":
            raise refuse(folder, f"{_float_name(weights)} (compressed-tensors)")
        if group.get("input_activations") or group.get("output_activations"):
            raise refuse(
                folder,
                "compressed-tensors with quantised activations (e.g. W8A8, W4A8)",
                "only weight-only schemes such as W4A16 are read",
            )
        if fmt not in ("pack-quantized", "mixed-precision", ""):
            raise refuse(folder, f"compressed-tensors '{fmt}'")
        strategy = str(weights.get("strategy") or "").lower()
        if strategy not in ("group", "channel"):
            raise refuse(
                folder, f"compressed-tensors with '{strategy or 'tensor'}' scales", "group and channel scales are read"
            )
        if weights.get("dynamic"):
            raise refuse(folder, "compressed-tensors with dynamic weight scales")
        actorder = weights.get("actorder")
        schemes.add(
            (
                _int(folder, weights, ("num_bits",)),
                _int(folder, weights, ("group_size",), -1) if strategy == "group" else -1,
                _flag(folder, weights, "symmetric", True),
                actorder in ("group", True),
            )
        )
    if len(schemes) > 1:
        raise refuse(folder, "mixed-precision compressed-tensors", "its config groups use different bits or groups")
    bits, group_size, sym, act_order = schemes.pop()
    _check_bits_and_group(folder, "compressed-tensors", bits, group_size)
    group = "channel scales" if group_size == -1 else f"group {group_size}"
    label = (
        f"compressed-tensors W{bits}A16, {'symmetric' if sym else 'asymmetric'}, {group}"
        f"{', act-order' if act_order else ''}"
    )
    return QuantScheme("compressed-tensors", bits, group_size, act_order, sym, 0, label)


def _float_name(weights: dict) -> str:
    bits = weights.get("num_bits")
    return {8: "FP8", 4: "FP4 (NVFP4/MXFP4)"}.get(bits, f"{bits}-bit floating point")


# ----------------------------------------------------------------------------------------------------------
# Safetensors headers


def safetensors_header(path: Path) -> dict:
    """The JSON header of a safetensors file (tensor name -> dtype, shape, data offsets), checked against the
    file's size: a file cut short is damaged.

    Raises: DamagedModelError for a truncated or unreadable file."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            start = handle.read(8)
            if len(start) < 8:
                raise DamagedModelError(f"{path} is empty or cut short: download it again")
            (length,) = struct.unpack("<Q", start)
            if length > size - 8 or length > 100 * 1024**2:
                raise DamagedModelError(f"{path} is cut short (its header is incomplete): download it again")
            header = json_text.loads(handle.read(length))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DamagedModelError(f"{path} cannot be read as a safetensors file ({error}): download it again") from error
    if not isinstance(header, dict):
        raise DamagedModelError(f"{path} has no safetensors header: download it again")
    end = 0
    for name, info in header.items():
        if name == "__metadata__" or not isinstance(info, dict) or "data_offsets" not in info:
            continue
        offsets = info["data_offsets"]
        if not _are_data_offsets(offsets):  # safetensors' own reader takes only [start, end] in whole bytes
            raise DamagedModelError(
                f"{path} has a damaged safetensors header (the data offsets of {name[:200]!r} are not two byte "
                "positions in order): download it again"
            )
        end = max(end, offsets[1])
    if 8 + length + end > size:
        missing = 8 + length + end - size
        raise DamagedModelError(
            f"{path.name} in {path.parent} is {missing:,} bytes shorter than its header says: the file is "
            "incomplete or damaged; download it again"
        )
    return header


def _are_data_offsets(offsets: object) -> bool:
    """[start, end]: whole numbers (not floats, which JSON's Infinity and 1e400 are, nor booleans), start <= end."""
    return (
        isinstance(offsets, list)
        and len(offsets) == 2
        and all(type(offset) is int for offset in offsets)
        and 0 <= offsets[0] <= offsets[1]
    )


def weight_files(folder: Path) -> list[Path]:
    """The safetensors files of a folder: the shards its index names, or every *.safetensors file.

    Raises: DamagedModelError for shards the index names but the folder lacks, ModelFormatError for a
    broken index."""
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        data = _json(index)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise ModelFormatError(f"{index} is not a valid safetensors index (no 'weight_map'): download it again")
        files = [folder / name for name in sorted(set(map(str, weight_map.values())))]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            raise DamagedModelError(
                f"{index.name} in {folder} names {len(missing)} weight file(s) that are missing: {shown}. The "
                "download is incomplete: download the missing files again"
            )
        return files
    return sorted(folder.glob("*.safetensors"))


def check_weight_format(folder: str | Path) -> QuantScheme | None:
    """Everything that can be known about a folder's weights before reading them: its scheme (None: 16-bit),
    every safetensors file whole, config.json's sizes those of the weights (core.modeling.config_shapes), and
    no tensor in a format the settings do not announce (FP8 weights in a folder without settings, EXL2 or HQQ
    tensors, bitsandbytes' quant states).

    A model with recurrent layers (Qwen3.5, Jamba, ...) is refused first, by name (core.modeling.hybrid_layers).

    Raises: UnsupportedFormatError, DamagedModelError, ModelFormatError (as `quant_scheme`, `weight_files`),
    UnsupportedArchitectureError (recurrent layers)."""
    folder = Path(folder)
    check_attention_only(folder)
    scheme = quant_scheme(folder)
    dtype_of: dict[str, str] = {}
    shape_of: dict[str, object] = {}
    for path in weight_files(folder):
        for name, info in safetensors_header(path).items():
            if name != "__metadata__" and isinstance(info, dict):
                dtype_of[name] = str(info.get("dtype", ""))
                shape_of[name] = info.get("shape")
    names = set(dtype_of)
    check_config_against_weights(folder, shape_of)
    dtypes = {dtype for name, dtype in dtype_of.items() if name.startswith("model.layers.")}
    if scheme is not None:
        scale = "weight_scale" if scheme.method == "compressed-tensors" else "scales"
        return replace(
            scheme,
            scale_dtype=_stored_dtype(folder, dtype_of, f".{scale}"),
            bias_dtype=_stored_dtype(folder, dtype_of, ".bias"),
        )
    for ending, what in _TENSOR_SIGNS:
        if any(name.endswith(ending) for name in names):
            if what in ("GPTQ or AWQ", "compressed-tensors"):
                raise ModelFormatError(
                    f"the weights in {folder} are quantised ({what} tensors) but config.json has no "
                    "'quantization_config' (and there is no quantize_config.json): the model's settings are "
                    "missing; download config.json again"
                )
            raise refuse(folder, what)
    if dtypes & _FP8_DTYPES:
        raise refuse(folder, "FP8" if dtypes & {"F8_E4M3", "F8_E5M2"} else "4-bit floating point")
    return None


_FLOAT_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32"}


def _stored_dtype(folder: Path, dtype_of: dict[str, str], ending: str) -> str:
    """The dtype of the decoder layers' tensors ending in `ending` (float16 when there are none)."""
    found = {dtype for name, dtype in dtype_of.items() if name.startswith("model.layers.") and name.endswith(ending)}
    if not found:
        return "float16"
    if len(found) > 1 or not found <= set(_FLOAT_DTYPES):
        raise ModelFormatError(
            f"the '{ending[1:]}' tensors in {folder} are stored as {', '.join(sorted(found))}: "
            "expected one of float16, bfloat16 or float32 for all of them"
        )
    return _FLOAT_DTYPES[found.pop()]


# ----------------------------------------------------------------------------------------------------------
# GGUF files: read whole into memory, so only small ones


def check_gguf(path: Path, ram_bytes: int | None = None) -> None:
    """A GGUF file the engine can load, from one read of its metadata (`gguf_header`: no tensor data): of a
    family the engine runs, and small enough to expand. GGUF files are expanded to 16 or 32 bits when they load
    (transformers dequantises them), whole, with no offloading: one that would need more than `ram_bytes` (None:
    this PC's RAM) even in 16 bits (a 70B k-quant: ~140 GB) is refused before it is read, with what to download
    instead.

    Raises: UnsupportedArchitectureError; UnsupportedFormatError (too big); ModelFormatError for a file that is
    not GGUF (or of a version not read), holds no tensors or names no architecture; DamagedModelError for one cut
    short or otherwise damaged in its header (core.modeling.gguf_header), or whose metadata sizes the model
    otherwise than its tensors do (core.modeling.gguf_shapes)."""
    header = gguf_header(path)
    if header.tensors == 0:
        raise ModelFormatError(f"{path} is a GGUF file with no tensors: it holds no model")
    if header.architecture is None:
        raise ModelFormatError(
            f"{path} does not say what model it holds (its metadata has no general.architecture): download it again"
        )
    check_gguf_architecture(header.architecture, header.name)
    check_gguf_shapes(path, header)
    if ram_bytes is None:
        import psutil

        ram_bytes = psutil.virtual_memory().total
    parameters, file_type = header.parameters, header.file_type
    needed = 2 * parameters
    if needed <= ram_bytes:
        return
    kind = _gguf_file_type(file_type)
    raise UnsupportedFormatError(
        f"{path.name} is a GGUF file{f' ({kind})' if kind else ''} of a {parameters / 1e9:.1f}B-parameter model. "
        f"This app reads GGUF only for small models: it expands the weights to 16 bits or more as it loads them, "
        f"which would take {format_bytes(needed)} of memory, and this PC has {format_bytes(ram_bytes)}. "
        f"{READS}, which it streams to the GPU without expanding them: {INSTEAD}. The file is not damaged"
    )


def _gguf_file_type(file_type: int | None) -> str:
    """llama.cpp's name for a GGUF file type ("Q4_K_M"), when the gguf package knows it."""
    if file_type is None:
        return ""
    try:
        from gguf.constants import LlamaFileType

        return LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    except (ImportError, ValueError):
        return f"file type {file_type}"
