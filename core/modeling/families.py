"""The model families the engine runs, by config.json's `model_type` (torch-free: the app's import checks a
folder against it, and the installer keeps these families' transformers code, reading this file's source).

The engine runs a model's decoder itself (core.modeling.causal_lm: embed_tokens -> layers(hidden, mask, rope)
-> norm -> lm_head, with its own masks, positions and KV cache), so a family is listed only once that loop is
known to give the model's own logits (tests/test_architectures.py checks each one) and its layers' weights are
sized, streamed and read in 4 bits (core.planning.sizes, core.offload).
"""

from __future__ import annotations

import math
from pathlib import Path

from core.errors import ModelFormatError, UnsupportedArchitectureError
from core.modeling.hybrid_layers import check_attention_only
from core.system import json_text

SUPPORTED_MODEL_TYPES = frozenset(
    {"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe", "olmo2", "glm4"}
)
# the families in words, for people (the DeepSeek R1 distills are Llama and Qwen2 models; GLM-4 is the 0414
# series and its GLM-Z1 reasoning models)
SUPPORTED_IN_WORDS = (
    "Llama, Mistral, Mixtral, Qwen2, Qwen2.5 and Qwen3 (with their mixture-of-experts versions), OLMo 2 and GLM-4"
)
# the families run only from safetensors files, in words: transformers' GGUF reader (integrations.ggml) has none
# for them (tests/test_model_format.py checks GGUF_MODEL_TYPES against the installed transformers)
_NO_GGUF_READER = {"mixtral": "Mixtral", "olmo2": "OLMo 2", "glm4": "GLM-4"}
GGUF_MODEL_TYPES = SUPPORTED_MODEL_TYPES - set(_NO_GGUF_READER)
# GGUF architecture names (general.architecture) that differ from transformers' model_type
_GGUF_ARCHITECTURES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe"}


def gguf_model_type(architecture: str, name: str) -> str:
    """transformers' model_type for a GGUF file's general.architecture and general.name. llama.cpp files Mistral
    models under the llama architecture; transformers tells them apart by name, and so does this."""
    if "llama" in architecture and "mistral" in name.lower():
        return "mistral"
    return _GGUF_ARCHITECTURES.get(architecture, architecture)


def check_gguf_architecture(architecture: str, name: str) -> None:
    """Raises UnsupportedArchitectureError, in words, for a GGUF file of a family the engine cannot run, or
    runs only from its safetensors files (GGUF_MODEL_TYPES)."""
    model_type = gguf_model_type(architecture, name)
    check_architecture(model_type)
    if model_type not in GGUF_MODEL_TYPES:
        raise UnsupportedArchitectureError(
            f"this app runs {_NO_GGUF_READER[model_type]} models from their safetensors files, not from GGUF "
            "files: download the model's own release (a folder with config.json and .safetensors files), or a "
            "GPTQ, AWQ or compressed-tensors 4-bit version of it"
        )


def check_architecture(model_type: object) -> None:
    """Raises UnsupportedArchitectureError, in words, for a model type the decoder loop was not written for."""
    if model_type not in SUPPORTED_MODEL_TYPES:
        supported = ", ".join(sorted(SUPPORTED_MODEL_TYPES))
        raise UnsupportedArchitectureError(
            f"this app cannot run models of type {model_type!r}: it runs {SUPPORTED_IN_WORDS} models and those "
            f"built on them, so pick one of those (model types {supported})"
        )


def check_config_family(config: object, folder: Path) -> None:
    """A model folder's parsed config.json names a family the engine runs (the import and the load check it
    before anything heavy is read). Raises ModelFormatError when it names none; UnsupportedArchitectureError for
    another family, a model with recurrent layers told as such first (not only that its type is unknown)."""
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise ModelFormatError(
            f"the model's settings file config.json in {folder.name} does not say what kind of model it is (it "
            "has no 'model_type'): copy or download the model's config.json again"
        )
    check_attention_only(folder)
    check_architecture(config["model_type"])
    check_config_sizes(config, folder)


# Sizes a config.json of these families may give; each must be a whole number above 0 where it is given (a
# missing one takes transformers' default; NULLABLE_SIZES may also be null).
SIZE_FIELDS = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "max_position_embeddings",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
    "num_experts",
    "num_local_experts",
    "num_experts_per_tok",
)
NULLABLE_SIZES = ("head_dim", "num_key_value_heads")  # null: derived from the other sizes
# Numbers that must be above 0 and finite where given (at the top level, or in transformers 5's rope_parameters).
NUMBER_FIELDS = ("rope_theta", "rms_norm_eps")
# Shares that must be above 0 and at most 1 where given: GLM-4's part of each head that takes rotary positions
# (0.5; transformers sizes a range by it, and more than the whole head or none is no model)
FRACTION_FIELDS = ("partial_rotary_factor",)
# Groups of settings that must be JSON objects where given (transformers calls their methods: `false` was an
# AttributeError blamed on the weights).
GROUP_FIELDS = ("quantization_config", "text_config", "rope_parameters", "rope_scaling")


def check_config_sizes(config: dict, folder: Path) -> None:
    """A config.json's sizes are whole numbers above 0, its query heads share its key-value heads evenly, and
    its rotary base and norm epsilon are numbers above 0: checked on the file's own values, before transformers
    reads it (which divides by some: a zero was a ZeroDivisionError blamed on the tokenizer) or builds a model
    of them (a negative size was a traceback; a NaN base answered garbage); its groups of settings are objects.
    Raises ModelFormatError in words."""

    def broken(what: str) -> ModelFormatError:
        return ModelFormatError(
            f"the model's settings file config.json in {folder.name} {what}: copy or download the model's "
            "config.json again"
        )

    for name in SIZE_FIELDS:
        if name not in config or (config[name] is None and name in NULLABLE_SIZES):
            continue
        value = config[name]
        if not json_text.is_whole(value) or value < 1:
            raise broken(f"gives {name} as {value!r}, which no model has")
    for name in GROUP_FIELDS:
        if config.get(name) is not None and not isinstance(config[name], dict):
            raise broken(f"gives {name} as {config[name]!r}, where a model has a group of settings")
    rope = config.get("rope_parameters") or {}
    numbers = {name: config[name] for name in NUMBER_FIELDS if name in config}
    numbers |= {f"rope_parameters.{name}": rope[name] for name in NUMBER_FIELDS if name in rope}
    for name, value in numbers.items():
        if not json_text.is_number(value) or not 0 < value < math.inf:
            raise broken(f"gives {name} as {value!r}, which no model has")
    shares = {name: config[name] for name in FRACTION_FIELDS if config.get(name) is not None}  # null: the default
    shares |= {f"rope_parameters.{name}": rope[name] for name in FRACTION_FIELDS if rope.get(name) is not None}
    for name, value in shares.items():
        if not json_text.is_number(value) or not 0 < value <= 1:
            raise broken(f"gives {name} as {value!r}, which no model has")
    heads, kv_heads = config.get("num_attention_heads"), config.get("num_key_value_heads")
    if isinstance(heads, int) and isinstance(kv_heads, int) and heads % kv_heads:
        raise broken(
            f"has {heads} attention heads and {kv_heads} key-value heads, which no model has (each key-value "
            "head serves the same number of attention heads)"
        )


def attention_window(config: object) -> int | None:
    """How many tokens back the model's sliding-window layers attend (themselves included), or None when every
    layer attends to the whole context: Mistral 7B v0.1's 4,096 (Mistral and Mixtral read `sliding_window`,
    which later releases set to null), a Qwen config's that turns `use_sliding_window` on for some of its
    layers (transformers then marks them "sliding_attention" in `layer_types`). `config`: a transformers config.

    The engine's layers attend to the whole context, which is exactly the window's attention while the context
    fits in the window: the loaders take the window as the model's context limit, so its answers stay the
    model's own (a longer conversation drops its oldest turns, as at any model's limit)."""
    window = getattr(config, "sliding_window", None)
    if not json_text.is_whole(window) or window <= 0:
        return None  # Qwen2-MoE's configs say 0 for none
    if getattr(config, "use_sliding_window", True) is False:
        return None
    layer_types = getattr(config, "layer_types", None)
    if isinstance(layer_types, (list, tuple)) and "sliding_attention" not in layer_types:
        return None
    return window


def context_limit(config: object) -> int:
    """The most tokens of context the model answers as itself: its `max_position_embeddings`, or its attention
    window when that is shorter (attention_window says why). `config`: a transformers config. Every loader
    plans the KV caches within it. Raises ModelFormatError when the config has no usable length."""
    length = getattr(config, "max_position_embeddings", None)
    if not json_text.is_whole(length) or length < 1:
        raise ModelFormatError(
            f"the model's settings file config.json has no usable max_position_embeddings ({length!r}): copy or "
            "download the model's config.json again"
        )
    return min(length, attention_window(config) or length)
