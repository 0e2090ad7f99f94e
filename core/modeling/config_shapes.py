"""A model folder's config.json against the shapes of the weights it describes, from the safetensors headers
alone (core.modeling.model_format reads them).

transformers builds the model from config.json before it compares any weight with it: a settings file of
another model failed late and in transformers' words, one that claims a billion layers built them first, and
an `intermediate_size` a thousand times too large asked for 15 GB for a model of kilobytes (a 16 GB PC gives
that by swapping until it stalls). So the sizes that build the model are checked against the tensors they
describe first: the layer count, the vocabulary and width (the embedding), the feed-forward and expert widths
and the expert count (the first layer's), the attention heads (the first layer's query and key projections).
Only tensors stored unquantised are compared (a quantised layer packs its shape; its embedding is not).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

from core.errors import ModelFormatError
from core.system import json_text

_LAYER_NAME = re.compile(r"^model\.layers\.(\d+)\.")  # a decoder layer's tensors in a checkpoint
_FIRST_EXPERT = re.compile(r"^model\.layers\.0\.mlp\.experts\.(\d+)\.")  # Qwen-MoE's experts, one by one
# (config.json's size, the tensor it sizes, which of its dimensions: torch's order, a row's count first, and how
# many times the size that dimension is: GLM-4's gate_up_proj holds the gate's rows and the up projection's)
_SIZED_BY = (
    ("vocab_size", "model.embed_tokens.weight", 0, 1),
    ("hidden_size", "model.embed_tokens.weight", 1, 1),
    ("intermediate_size", "model.layers.0.mlp.up_proj.weight", 0, 1),
    ("intermediate_size", "model.layers.0.mlp.gate_up_proj.weight", 0, 2),
    ("moe_intermediate_size", "model.layers.0.mlp.experts.0.up_proj.weight", 0, 1),
)


def check_config_against_weights(folder: Path, shapes: dict[str, object]) -> None:
    """config.json's sizes against `shapes` (every tensor's name and its shape as its safetensors header
    lists it).

    Raises: ModelFormatError naming the size and the tensor when they differ: the settings belong to another
    model. Nothing when config.json cannot be read, or a size or tensor is absent (other checks speak to
    those, and transformers names a missing tensor after the build, which the checked sizes keep small)."""
    try:
        config = json_text.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return
    if not isinstance(config, dict):
        return

    def size(key: str) -> int | None:
        value = config.get(key)
        return value if json_text.is_whole(value) else None

    def another_model(said: str, held: str) -> ModelFormatError:
        return ModelFormatError(
            f"the model's settings file config.json in {folder.name} {said}, but its weights {held}: the settings "
            "belong to another model; copy or download the model's config.json again"
        )

    _check_layers(size, shapes, another_model)
    for key, tensor, dimension, times in _SIZED_BY:
        said, shape = size(key), _shape(shapes.get(tensor))
        if said is not None and shape is not None and (dimension >= len(shape) or shape[dimension] != times * said):
            raise another_model(f"gives {key} as {said:,}", f"hold {tensor} as {list(shape)}")
    experts = {int(match[1]) for name in shapes if (match := _FIRST_EXPERT.match(name))}
    said = size("num_experts")
    if said is not None and experts and said != max(experts) + 1:
        raise another_model(f"says each layer has {said:,} experts", f"hold {max(experts) + 1:,} in the first layer")
    _check_heads(size, shapes, another_model)


def _check_layers(
    size: Callable[[str], int | None], shapes: dict[str, object], another_model: Callable[[str, str], ModelFormatError]
) -> None:
    """num_hidden_layers against the decoder layers the weights hold (model.layers.N.*)."""
    held = {int(match.group(1)) for name in shapes if (match := _LAYER_NAME.match(name))}
    declared = size("num_hidden_layers")
    if held and declared is not None and declared != max(held) + 1:
        raise another_model(f"says it has {declared} layers", f"hold {max(held) + 1}")


def _check_heads(
    size: Callable[[str], int | None], shapes: dict[str, object], another_model: Callable[[str, str], ModelFormatError]
) -> None:
    """The first layer's query and key projections hold the heads config.json gives, at its head width
    (head_dim, else the width over the heads, as transformers takes it)."""
    heads, width = size("num_attention_heads"), size("hidden_size")
    if not heads or heads < 0:
        return  # a count of 0 or less is refused with the config's other checks (core.modeling.families)
    kv_heads = size("num_key_value_heads") or heads
    head_width = size("head_dim") or (width // heads if width else None)
    if not head_width:
        return
    for tensor, count, kind in (
        ("model.layers.0.self_attn.q_proj.weight", heads, "attention head"),
        ("model.layers.0.self_attn.k_proj.weight", kv_heads, "key-value head"),
    ):
        shape = _shape(shapes.get(tensor))
        if shape is not None and shape[0] != count * head_width:
            heads_said = f"{count:,} {kind}{'' if count == 1 else 's'} of width {head_width:,}"
            raise another_model(f"gives {heads_said} for {tensor}", f"hold it as {list(shape)}")


def _shape(listed: object) -> tuple[int, ...] | None:
    """A tensor's shape as a safetensors header lists it, when it is one (a list of whole numbers)."""
    if isinstance(listed, list) and listed and all(type(n) is int for n in listed):
        return tuple(listed)
    return None
