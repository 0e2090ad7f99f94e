"""Versions, and which attention backend a masked call gets: with torch 2.11+ and cuDNN newer than 9.15, sm90
and newer cards prefer cuDNN attention, which plans anew per shape (core.modeling.attention). Recorded with
the engine's fix off (torch's own defaults) and on, for the shapes the engine sends: a one-token step and a
32-row tree block of the built-in target, and the draft's grouped search forward."""

from __future__ import annotations

import importlib.metadata
import platform

import torch

from core.bench.gpu_check.random_pair import BUILTIN_SHAPE, SMALL_SHAPE

PACKAGES = (
    "torch",
    "triton",
    "transformers",
    "huggingface-hub",
    "safetensors",
    "tokenizers",
    "numpy",
    "psutil",
    "platformdirs",
    "llguidance",
    "gguf",
    "nvidia-ml-py",
)


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _flags() -> dict[str, object]:
    cuda = torch.backends.cuda
    flags = {
        "flash": cuda.flash_sdp_enabled(),
        "mem_efficient": cuda.mem_efficient_sdp_enabled(),
        "math": cuda.math_sdp_enabled(),
        "cudnn": cuda.cudnn_sdp_enabled(),
    }
    order = getattr(torch._C, "_get_sdp_priority_order", None)  # private: present in 2.11-2.13, may go
    if order is not None:
        names = {int(b): b.name for b in torch.nn.attention.SDPBackend.__members__.values()}
        flags["priority_order"] = [names.get(int(b), str(b)) for b in order()]
    return flags


def _choices(device: torch.device, small: bool) -> dict[str, str]:
    """The backend torch picks (torch._fused_sdp_choice) for the engine's masked attention calls."""
    shape = SMALL_SHAPE if small else BUILTIN_SHAPE
    heads, kv, dim = shape["num_attention_heads"], shape["num_key_value_heads"], shape["head_dim"]
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    names = {int(b): b.name for b in torch.nn.attention.SDPBackend.__members__.values()}
    cases = {  # (query heads, rows, key heads, columns): transformers repeats grouped heads unless stacked
        "one-token step, 500 columns": (heads, 1, heads, 500),
        "tree block of 32 rows, 500 columns": (heads, 32, heads, 500),
        "draft search forward, 32 rows stacked by group, 512 columns": (kv, 32 * heads // kv, kv, 512),
    }
    out = {}
    for name, (q_heads, rows, k_heads, cols) in cases.items():
        q = torch.zeros(1, q_heads, rows, dim, device=device, dtype=dtype)
        k = torch.zeros(1, k_heads, cols, dim, device=device, dtype=dtype)
        mask = torch.zeros(1, 1, rows, cols, device=device, dtype=dtype)
        choice = getattr(torch, "_fused_sdp_choice", None)  # private, present in 2.11-2.13
        out[name] = names.get(int(choice(q, k, k, mask, 0.0, False)), "?") if choice else "unknown"
    return out


def measure(device: torch.device, small: bool) -> dict:
    from core.modeling.attention import steady_attention

    info: dict[str, object] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "packages": {name: _version(name) for name in PACKAGES},
        "torch_cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = {
            "name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_bytes": props.total_memory,
            "multiprocessors": props.multi_processor_count,
        }
    info["attention_default"] = {"flags": _flags(), "choice": _choices(device, small)}
    steady_attention(device)  # the engine's setting (a no-op off CUDA)
    info["attention_engine"] = {"flags": _flags(), "choice": _choices(device, small)}
    return info
