"""Models that mix recurrent layers with attention, refused by name before a weight is read (torch-free: read
from config.json alone).

SpecExec checks a whole tree of drafted continuations in one target pass: every tree node attends to its own
ancestors through a tree mask over one KV cache. An attention layer allows that (a token's keys and values do
not depend on its siblings); a recurrent layer does not: its state after a token is a running summary of every
token before it, so each branch of the tree would need its own copy of that state, and the engine keeps one.
Qwen3.5 and Qwen3-Next (Gated DeltaNet "linear_attention" layers), Jamba, Bamba, Falcon-H1, Granite 4 hybrids,
Nemotron-H, Zamba (Mamba layers), LFM2 (short convolutions) and RecurrentGemma are such models. Sliding-window
attention (Gemma 3's "sliding_attention") is attention and is not refused here.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.errors import UnsupportedArchitectureError
from core.system import json_text

# config.json layer kinds that carry a recurrent state, in words for people
RECURRENT_KINDS = {
    "linear_attention": "linear-attention (Gated DeltaNet)",
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "conv": "short-convolution",
    "recurrent": "recurrent",
    "ssm": "state-space",
    "rwkv": "RWKV",
    "deltanet": "DeltaNet",
    "gated_deltanet": "Gated DeltaNet",
}
# model types made of recurrent layers throughout, or whose configs do not list their layers' kinds
RECURRENT_MODEL_TYPES = {
    "mamba": "Mamba",
    "mamba2": "Mamba-2",
    "rwkv": "RWKV",
    "rwkv7": "RWKV",
    "recurrent_gemma": "RecurrentGemma",
    "xlstm": "xLSTM",
    "zamba": "Zamba",
    "zamba2": "Zamba2",
    "falcon_mamba": "Falcon Mamba",
    "falcon_h1": "Mamba",
    "bamba": "Mamba",
    "jamba": "Mamba",
    "nemotron_h": "Mamba",
    "qwen3_next": "linear-attention",
}
# config keys that list each layer's kind (transformers' names differ by model family)
_LAYER_LISTS = ("layer_types", "layers_block_type", "block_types", "layer_block_types")
INSTEAD = (
    'pick a model with attention in every layer instead: Qwen3 ("Qwen/Qwen3-8B", or its -AWQ / -GPTQ '
    "versions), Llama 3.x, Mistral or Qwen2.5"
)


def recurrent_layers(config: dict) -> tuple[str, int, int] | None:
    """(the recurrent kind in words, how many layers have it, how many layers there are) when the config
    describes a model with recurrent layers; None for attention in every layer. A multimodal config's
    `text_config` is read the same way."""
    model_type = str(config.get("model_type", ""))
    for key in _LAYER_LISTS:
        kinds = config.get(key)
        if isinstance(kinds, list) and kinds:
            recurrent = [str(kind).lower() for kind in kinds if str(kind).lower() in RECURRENT_KINDS]
            if recurrent:
                return RECURRENT_KINDS[recurrent[0]], len(recurrent), len(kinds)
    pattern = config.get("hybrid_override_pattern")  # Nemotron-H: "M-M-M*-..." (M: Mamba, *: attention)
    if isinstance(pattern, str) and "M" in pattern:
        return "Mamba", pattern.count("M"), len(pattern.replace("-", "")) or len(pattern)
    if config.get("attn_layer_period") is not None or config.get("attn_layer_offset") is not None:  # Jamba
        layers = int(config.get("num_hidden_layers") or 0)
        period = int(config.get("attn_layer_period") or 0)
        return "Mamba", layers - (layers // period if period else 0), layers
    if model_type in RECURRENT_MODEL_TYPES:
        layers = int(config.get("num_hidden_layers") or config.get("n_layer") or 0)
        return RECURRENT_MODEL_TYPES[model_type], layers, layers
    text = config.get("text_config")
    return recurrent_layers(text) if isinstance(text, dict) else None


def check_attention_only(folder: str | Path) -> None:
    """Refuse a model folder whose config.json describes recurrent layers, naming them and what to pick.

    Raises: UnsupportedArchitectureError (nothing when config.json is missing or unreadable: the format
    checks say so in their own words)."""
    path = Path(folder) / "config.json"
    try:
        config = json_text.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return
    if not isinstance(config, dict):
        return
    found = recurrent_layers(config)
    if found is None:
        return
    kind, recurrent, total = found
    name = config.get("model_type") or (config.get("architectures") or ["this architecture"])[0]
    share = f"{recurrent} of its {total} layers are" if recurrent < total else "its layers are"
    raise UnsupportedArchitectureError(
        f"the model in {folder} ({name}) cannot be run by this app: {share} {kind} layers, which keep a running "
        "state instead of attending to earlier tokens. SpecExec checks a whole tree of drafted tokens in one pass, "
        "and each branch of the tree would need its own copy of that state. "
        f"{INSTEAD}. The files are not damaged; downloading them again will not help"
    )
