"""The model families the engine runs, by config.json's `model_type` (torch-free: the app's import checks a
folder against it, and the installer keeps these families' transformers code, reading this file's source).

The engine runs a model's decoder itself (core.modeling.causal_lm: embed_tokens -> layers(hidden, mask, rope)
-> norm -> lm_head, with its own masks, positions and KV cache), so a family is listed only once that loop is
known to give the model's own logits (tests/test_architectures.py checks each one) and its layers' weights are
sized, streamed and read in 4 bits (core.planning.sizes, core.offload).
"""

from __future__ import annotations

from pathlib import Path

from core.errors import ModelFormatError, UnsupportedArchitectureError
from core.modeling.hybrid_layers import check_attention_only

SUPPORTED_MODEL_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen3", "qwen2_moe", "qwen3_moe"})
# the families in words, for people (the DeepSeek R1 distills are Llama and Qwen2 models)
SUPPORTED_IN_WORDS = "Llama, Mistral, Mixtral, Qwen2, Qwen2.5 and Qwen3 (with their mixture-of-experts versions)"
# GGUF architecture names (general.architecture) that differ from transformers' model_type
_GGUF_ARCHITECTURES = {"qwen2moe": "qwen2_moe", "qwen3moe": "qwen3_moe"}


def gguf_model_type(architecture: str, name: str) -> str:
    """transformers' model_type for a GGUF file's general.architecture and general.name. llama.cpp files Mistral
    models under the llama architecture; transformers tells them apart by name, and so does this."""
    if "llama" in architecture and "mistral" in name.lower():
        return "mistral"
    return _GGUF_ARCHITECTURES.get(architecture, architecture)


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


def attention_window(config: object) -> int | None:
    """How many tokens back the model's sliding-window layers attend (themselves included), or None when every
    layer attends to the whole context: Mistral 7B v0.1's 4,096 (Mistral and Mixtral read `sliding_window`,
    which later releases set to null), a Qwen config's that turns `use_sliding_window` on for some of its
    layers (transformers then marks them "sliding_attention" in `layer_types`). `config`: a transformers config.

    The engine's layers attend to the whole context, which is exactly the window's attention while the context
    fits in the window: the loaders take the window as the model's context limit, so its answers stay the
    model's own (a longer conversation drops its oldest turns, as at any model's limit)."""
    window = getattr(config, "sliding_window", None)
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
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
    if isinstance(length, bool) or not isinstance(length, int) or length < 1:
        raise ModelFormatError(
            f"the model's settings file config.json has no usable max_position_embeddings ({length!r}): copy or "
            "download the model's config.json again"
        )
    return min(length, attention_window(config) or length)
