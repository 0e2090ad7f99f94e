"""Bytes of a model's parts from its shape alone: pure arithmetic, no torch.

One source of truth for two users: the loader (which builds real layer modules and packs them with
`core.offload.layout`, whose alignment rules and GPTQ buffer shapes live here) and the fit prediction
(`core.models.fit`, which runs in the app's process, where torch is never imported, and only knows the
catalog's shapes). tests/test_sizes.py checks that `decoder_layer_bytes` equals the packed size of the
layer the loader really builds, for every supported architecture, 16-bit and GPTQ.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

GIB = 1024**3
TENSOR_ALIGN = 256  # bytes; every tensor starts at a multiple of this inside its layer
LAYER_ALIGN = 4096  # bytes; every layer's size is rounded up to this (one page)
# GPTQ dequantisation temporaries besides the scratch matrix (one int32 chunk, see gptq.CHUNK_ELEMENTS)
GPTQ_TEMP_BYTES = 128 * 1024**2
DTYPE_BYTES = {"int32": 4, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
# checkpoint names of (gate, up, down) for MoE experts, per model type
EXPERT_NAMES = {
    "mixtral": ("w1", "w3", "w2"),
    "qwen2_moe": ("gate_proj", "up_proj", "down_proj"),
    "qwen3_moe": ("gate_proj", "up_proj", "down_proj"),
}
# model types whose attention normalises queries and keys (q_norm, k_norm): per head (Qwen3), or across all
# heads at once (OLMo 2, whose norms are as wide as the projections)
QK_NORM_TYPES = frozenset({"qwen3", "qwen3_moe"})
WIDE_QK_NORM_TYPES = frozenset({"olmo2"})
# model types whose MLP computes its gate and up projections in one linear, gate_up_proj (GLM-4)
FUSED_GATE_UP_TYPES = frozenset({"glm4"})
# the norms of a decoder layer where a family has others than a norm before attention and one before the MLP:
# OLMo 2 normalises each block's output instead, GLM-4 both its input and its output
LAYER_NORMS = {
    "olmo2": ("post_attention_layernorm", "post_feedforward_layernorm"),
    "glm4": ("input_layernorm", "post_attention_layernorm", "post_self_attn_layernorm", "post_mlp_layernorm"),
}
DEFAULT_LAYER_NORMS = ("input_layernorm", "post_attention_layernorm")
# Which attention projections carry biases, as transformers builds each family: Qwen2 always on q/k/v,
# Qwen2-MoE on q/k/v as its `qkv_bias` says (true by default), Mistral and Mixtral never; the others on q/k/v
# as `attention_bias` says (true by default for GLM-4 only), and on the output projection too for OUTPUT_BIAS_TYPES
BIASED_BY_DEFAULT = frozenset({"glm4"})
UNBIASED_TYPES = frozenset({"mistral", "mixtral"})
OUTPUT_BIAS_TYPES = frozenset({"llama", "qwen3", "qwen3_moe", "olmo2"})


def round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


def packed_layer_bytes(tensor_nbytes: Iterable[int]) -> int:
    """Size of one layer's packed buffer: each tensor starts 256-byte aligned, the layer is page aligned.

    The order of the tensors does not matter: every start offset is a multiple of TENSOR_ALIGN, so each
    tensor takes exactly its size rounded up to TENSOR_ALIGN.
    """
    return round_up(max(sum(round_up(n, TENSOR_ALIGN) for n in tensor_nbytes), 1), LAYER_ALIGN)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor a module holds: `name` inside the module, shape, and dtype name (a DTYPE_BYTES key)."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        count = 1
        for size in self.shape:
            count *= size
        return count * DTYPE_BYTES[self.dtype]


def block_shape(bits: int) -> tuple[int, int]:
    """(values, int32 words) of the smallest whole GPTQ packing block: (32 / bits, 1), or (32, 3) for 3-bit
    (AutoGPTQ packs 32 three-bit values into three words, two of them straddling a word boundary)."""
    return (32, 3) if bits == 3 else (32 // bits, 1)


def packed_rows(values: int, bits: int) -> int:
    """int32 words holding `values` packed values (rounded up to whole blocks)."""
    per, words = block_shape(bits)
    return -(-values // per) * words


def gptq_linear_tensors(
    in_features: int,
    out_features: int,
    bits: int,
    group_size: int,
    desc_act: bool,
    bias: bool,
    scale_dtype: str = "float16",
    bias_dtype: str = "float16",
) -> tuple[TensorSpec, ...]:
    """The buffers of a GPTQLinear (see core.offload.gptq for their meaning), in registration order: the one
    4-bit layout every quantised format (GPTQ, AWQ, compressed-tensors) is converted into at load time."""
    groups = 1 if group_size == -1 else -(-in_features // group_size)
    specs = [
        TensorSpec("qweight", (packed_rows(in_features, bits), out_features), "int32"),
        TensorSpec("qzeros", (groups, packed_rows(out_features, bits)), "int32"),
        TensorSpec("scales", (groups, out_features), scale_dtype),
        TensorSpec("g_idx", (in_features,), "int32"),
    ]
    if desc_act:
        specs.append(TensorSpec("perm", (in_features,), "int32"))
    if bias:
        specs.append(TensorSpec("bias", (out_features,), bias_dtype))
    return tuple(specs)


@dataclass(frozen=True)
class ModelShape:
    """What sizes a decoder-only model: the transformers config fields of that name.

    The attribute names are transformers' own, so `core.planning.residency` (KV cache and activation bytes)
    takes a ModelShape wherever it takes a config.
    """

    model_type: str
    num_hidden_layers: int
    hidden_size: int
    intermediate_size: int  # the MLP's width; an MoE model's, each expert's
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    head_dim: int
    num_local_experts: int = 0
    tie_word_embeddings: bool = False
    attention_bias: bool = False  # biases on the query, key and value projections (output_bias: on o_proj)
    num_experts_per_tok: int = 0  # experts each token is routed to (MoE; 0 for a dense model)
    shared_expert_intermediate_size: int = 0  # Qwen2-MoE's expert every token goes through (0: none)

    @classmethod
    def from_config(cls, config: Any) -> "ModelShape":
        """From a transformers config object or a config.json-style mapping (the catalog's `config`)."""
        if isinstance(config, Mapping):

            def get(key: str, default: Any = None) -> Any:
                return config.get(key, default)
        else:

            def get(key: str, default: Any = None) -> Any:
                return getattr(config, key, default)

        model_type = str(get("model_type"))
        heads = int(get("num_attention_heads"))
        hidden = int(get("hidden_size"))
        # Mixtral names its experts num_local_experts; Qwen's MoE configs say num_experts, and give the experts'
        # width as moe_intermediate_size (their intermediate_size is a dense MLP's, which no layer has when every
        # layer is sparse, as in every Qwen MoE release: decoder_sparse_step 1, no mlp_only_layers).
        experts = int(get("num_local_experts") or get("num_experts") or 0)
        width = get("moe_intermediate_size") if experts else None
        return cls(
            model_type=model_type,
            num_hidden_layers=int(get("num_hidden_layers")),
            hidden_size=hidden,
            intermediate_size=int(width or get("intermediate_size")),
            num_attention_heads=heads,
            num_key_value_heads=int(get("num_key_value_heads") or heads),
            vocab_size=int(get("vocab_size")),
            head_dim=int(get("head_dim") or hidden // heads),
            num_local_experts=experts,
            num_experts_per_tok=int(get("num_experts_per_tok") or 0),
            shared_expert_intermediate_size=int(get("shared_expert_intermediate_size") or 0) if experts else 0,
            tie_word_embeddings=bool(get("tie_word_embeddings", False)),
            attention_bias=_attention_bias(model_type, get),
        )

    @property
    def output_bias(self) -> bool:
        """Whether the attention's output projection (o_proj) carries a bias."""
        return self.attention_bias and self.model_type in OUTPUT_BIAS_TYPES

    @property
    def parameters(self) -> int:
        """Parameter count (decoder layers + embeddings + lm_head), every expert of an MoE model included."""
        return self._parameters(max(self.num_local_experts, 1))

    @property
    def active_parameters(self) -> int:
        """Parameters one token is multiplied by (only its routed experts; all of them when the config does not
        say how many): the FLOPs of one token are twice this."""
        if not self.num_local_experts:
            return self.parameters
        return self._parameters(self.num_experts_per_tok or self.num_local_experts)

    def _parameters(self, experts: int) -> int:
        h, kv = self.hidden_size, self.num_key_value_heads * self.head_dim
        q = self.num_attention_heads * self.head_dim
        attention = 2 * h * q + 2 * h * kv
        mlp = 3 * h * (self.intermediate_size * experts + self.shared_expert_intermediate_size)
        embeddings = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return self.num_hidden_layers * (attention + mlp) + embeddings


def _attention_bias(model_type: str, get: Callable[[str, Any], Any]) -> bool:
    """Whether the query, key and value projections carry biases (the rules above BIASED_BY_DEFAULT)."""
    if model_type == "qwen2":
        return True
    if model_type == "qwen2_moe":
        return bool(get("qkv_bias", True))
    return model_type not in UNBIASED_TYPES and bool(get("attention_bias", model_type in BIASED_BY_DEFAULT))


@dataclass(frozen=True)
class WeightFormat:
    """How decoder weights are stored: GPTQ (`bits` set) or 16-bit; `dtype` is the compute dtype, in which
    16-bit weights, norms and unquantised linears are held."""

    bits: int | None = None
    group_size: int = -1
    desc_act: bool = False
    dtype: str = "float16"


def _linear(name: str, in_f: int, out_f: int, bias: bool, fmt: WeightFormat) -> list[TensorSpec]:
    if fmt.bits is not None:
        specs = gptq_linear_tensors(in_f, out_f, fmt.bits, fmt.group_size, fmt.desc_act, bias)
    else:
        specs = (TensorSpec("weight", (out_f, in_f), fmt.dtype),) + (
            (TensorSpec("bias", (out_f,), fmt.dtype),) if bias else ()
        )
    return [TensorSpec(f"{name}.{spec.name}", spec.shape, spec.dtype) for spec in specs]


def decoder_layer_tensors(shape: ModelShape, fmt: WeightFormat) -> list[TensorSpec]:
    """Every tensor of one decoder layer as the loader builds it (transformers 5 module layout, GPTQ
    linears swapped in for quantised checkpoints; an MoE router stays unquantised)."""
    h, i, hd = shape.hidden_size, shape.intermediate_size, shape.head_dim
    q, kv, bias = shape.num_attention_heads * hd, shape.num_key_value_heads * hd, shape.attention_bias
    specs = (
        _linear("self_attn.q_proj", h, q, bias, fmt)
        + _linear("self_attn.k_proj", h, kv, bias, fmt)
        + _linear("self_attn.v_proj", h, kv, bias, fmt)
        + _linear("self_attn.o_proj", q, h, shape.output_bias, fmt)
    )
    if shape.model_type in QK_NORM_TYPES:
        specs += [
            TensorSpec("self_attn.q_norm.weight", (hd,), fmt.dtype),
            TensorSpec("self_attn.k_norm.weight", (hd,), fmt.dtype),
        ]
    elif shape.model_type in WIDE_QK_NORM_TYPES:
        specs += [
            TensorSpec("self_attn.q_norm.weight", (q,), fmt.dtype),
            TensorSpec("self_attn.k_norm.weight", (kv,), fmt.dtype),
        ]
    experts = shape.num_local_experts
    if experts:
        specs += _linear("mlp.gate", h, experts, False, WeightFormat(dtype=fmt.dtype))
        if fmt.bits is not None:
            gate, up, down = EXPERT_NAMES[shape.model_type]
            for e in range(experts):
                specs += (
                    _linear(f"mlp.experts.{e}.{gate}", h, i, False, fmt)
                    + _linear(f"mlp.experts.{e}.{up}", h, i, False, fmt)
                    + _linear(f"mlp.experts.{e}.{down}", i, h, False, fmt)
                )
        else:
            specs += [
                TensorSpec("mlp.experts.gate_up_proj", (experts, 2 * i, h), fmt.dtype),
                TensorSpec("mlp.experts.down_proj", (experts, h, i), fmt.dtype),
            ]
        shared = shape.shared_expert_intermediate_size
        if shared:  # Qwen2-MoE: quantised like any MLP; its one-output gate cannot pack, so it stays 16-bit
            specs += (
                _linear("mlp.shared_expert.gate_proj", h, shared, False, fmt)
                + _linear("mlp.shared_expert.up_proj", h, shared, False, fmt)
                + _linear("mlp.shared_expert.down_proj", shared, h, False, fmt)
                + _linear("mlp.shared_expert_gate", h, 1, False, WeightFormat(dtype=fmt.dtype))
            )
    elif shape.model_type in FUSED_GATE_UP_TYPES:
        specs += _linear("mlp.gate_up_proj", h, 2 * i, False, fmt) + _linear("mlp.down_proj", i, h, False, fmt)
    else:
        specs += (
            _linear("mlp.gate_proj", h, i, False, fmt)
            + _linear("mlp.up_proj", h, i, False, fmt)
            + _linear("mlp.down_proj", i, h, False, fmt)
        )
    norms = LAYER_NORMS.get(shape.model_type, DEFAULT_LAYER_NORMS)
    return specs + [TensorSpec(f"{norm}.weight", (h,), fmt.dtype) for norm in norms]


def decoder_layer_bytes(shape: ModelShape, fmt: WeightFormat) -> int:
    """Bytes of one packed decoder layer: what the host store holds and one host-to-device copy moves."""
    return packed_layer_bytes(spec.nbytes for spec in decoder_layer_tensors(shape, fmt))


def embedding_bytes(shape: ModelShape, dtype: str = "float16") -> int:
    """The embedding table (vocabulary x hidden)."""
    return shape.vocab_size * shape.hidden_size * DTYPE_BYTES[dtype]


def non_layer_bytes(shape: ModelShape, dtype: str = "float16") -> int:
    """Embeddings, the final norm and the lm_head (shared with the embeddings when tied)."""
    tables = 1 if shape.tie_word_embeddings else 2
    return tables * embedding_bytes(shape, dtype) + shape.hidden_size * DTYPE_BYTES[dtype]


def largest_gptq_linear(shape: ModelShape) -> int:
    """in * out of the largest quantised linear: the size of the shared dequantisation scratch matrix."""
    h, i = shape.hidden_size, max(shape.intermediate_size, shape.shared_expert_intermediate_size)
    if shape.model_type in FUSED_GATE_UP_TYPES:
        i *= 2
    q, kv = shape.num_attention_heads * shape.head_dim, shape.num_key_value_heads * shape.head_dim
    return max(h * q, h * kv, h * i)


def gptq_scratch_bytes(largest_linear: int, dtype_bytes: int) -> int:
    """VRAM of GPTQ dequantisation: the scratch matrix plus one int32 chunk (0 for a 16-bit model)."""
    return largest_linear * dtype_bytes + (GPTQ_TEMP_BYTES if largest_linear else 0)


def largest_checkpoint_tensor(shape: ModelShape, fmt: WeightFormat, checkpoint_dtype: str = "float16") -> int:
    """Bytes of the biggest single tensor in the checkpoint (read whole while loading): the embedding or
    lm_head matrix, or the largest layer tensor (16-bit MoE experts count fused, an upper bound)."""
    layer = max(spec.nbytes for spec in decoder_layer_tensors(shape, fmt))
    return max(embedding_bytes(shape, checkpoint_dtype), layer)


def format_bytes(nbytes: float) -> str:
    """Bytes for a person, the one rule for every size the CLI prints and the app shows (files, downloads,
    RAM, VRAM, free disk): units of 1024 named KB, MB, GB, TB as Windows and the cards' boxes name them, one
    decimal ("42.4 GB", "98.2 MB", "24.0 GB"); under 1 KB whole bytes. One unit for all, so that a
    download's size, the free disk and the RAM it needs compare at a glance, and the same file reads the
    same in the wizard, `specexec models ...` and the model manager."""
    value = float(nbytes)
    if abs(value) < 1024:
        return f"{value:.0f} B"
    for unit in ("KB", "MB", "GB"):
        value /= 1024
        if abs(value) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} TB"
