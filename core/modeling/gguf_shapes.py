"""A GGUF file's metadata checked against its own tensors, before transformers builds the model it describes.

transformers builds a GGUF model from the file's metadata (how many layers, how wide), and only then fills it
with the tensors, reporting those that were missing or of another shape. Metadata that says more than the
tensors hold made it build that first: 20,000 layers of a 2-layer file took 80 s before the refusal, and an
`embedding_length` or `feed_forward_length` a thousand times too large asked for tens of gigabytes, which a
16 GB PC gives by swapping until it stalls. An attention head count of 0 was a ZeroDivisionError blamed on the
tokenizer. Each size that builds the model is checked here against the tensors it describes, from the header
alone (core.modeling.gguf_header), so a damaged or hostile file is refused in words at once.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.errors import DamagedModelError
from core.modeling.gguf_header import MAX_LAYERS, GgufHeader

# (metadata after the architecture's name, the tensor it sizes, which of its dimensions in ggml's order:
# a row's length first, so the embedding is [width, vocabulary] and the feed-forward's up projection
# [width, inner width(, experts)])
_SIZED_BY = (
    ("embedding_length", "token_embd.weight", 0),
    ("vocab_size", "token_embd.weight", 1),
    ("feed_forward_length", "blk.0.ffn_up.weight", 1),
    ("expert_feed_forward_length", "blk.0.ffn_up_exps.weight", 1),
    ("expert_count", "blk.0.ffn_up_exps.weight", 2),
)


def check_gguf_shapes(path: Path, header: GgufHeader) -> None:
    """Raises DamagedModelError, naming what disagrees, when the sizes `header`'s metadata gives the model do
    not match the tensors it lists: the layer count against the layers its tensors name, the width, the
    vocabulary and the feed-forward widths against the tensors they size, the attention heads against the
    first layer's query and key projections. A size the metadata does not give, or a tensor it does not list,
    is not checked: transformers names a missing tensor after the build, which the checked sizes keep as small
    as the file."""
    prefix = f"{header.architecture}."

    def said(key: str) -> int | None:
        return header.sizes.get(prefix + key)

    def damaged(why: str) -> DamagedModelError:
        return DamagedModelError(
            f"{path.name} is damaged: its metadata {why}. Download the file again (from where it came, or "
            "another quantisation of the model)"
        )

    layers = said("block_count")
    if header.past_layers:
        raise damaged(f"names a layer numbered past {MAX_LAYERS - 1:,}, which no model has")
    if layers is not None and (layers <= 0 or header.layers != frozenset(range(layers))):
        holds = f"the tensors of {len(header.layers):,}" if header.layers else "no layer's tensors"
        raise damaged(f"says the model has {layers:,} layer{'' if layers == 1 else 's'}, where the file holds {holds}")
    for key, tensor, dimension in _SIZED_BY:
        size, shape = said(key), header.shapes.get(tensor)
        if size is not None and shape is not None and (dimension >= len(shape) or shape[dimension] != size):
            stored = "x".join(str(n) for n in shape)
            raise damaged(f"gives {key} as {size:,}, where its tensor {tensor} is {stored}")
    _check_heads(said, header, damaged)
    context = said("context_length")
    if context is not None and context <= 0:
        raise damaged(f"gives the model a context of {context} tokens")


def _check_heads(
    said: Callable[[str], int | None], header: GgufHeader, damaged: Callable[[str], DamagedModelError]
) -> None:
    """Attention heads: at least one of each kind, and as many as the first layer's query and key projections
    hold at the head width transformers takes (attention.key_length, else the model's width over the heads)."""
    heads = said("attention.head_count")
    if heads is None:
        return
    kv_heads = said("attention.head_count_kv")
    kv_heads = heads if kv_heads is None else kv_heads
    if heads <= 0 or kv_heads <= 0:
        raise damaged(f"gives its layers {heads} attention heads and {kv_heads} key-value heads")
    width = said("embedding_length")
    head_width = said("attention.key_length") or (width // heads if width else None)
    if not head_width:
        return
    for tensor, count in (("blk.0.attn_q.weight", heads), ("blk.0.attn_k.weight", kv_heads)):
        shape = header.shapes.get(tensor)
        if shape is not None and (len(shape) < 2 or shape[1] != count * head_width):
            stored = "x".join(str(n) for n in shape)
            raise damaged(f"gives {count:,} heads of width {head_width:,} for {tensor}, which holds {stored}")
