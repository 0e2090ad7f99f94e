"""The pure size arithmetic (core.planning.sizes) equals what the loader really builds, and the planning
modules the app's fit prediction imports stay free of torch."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from torch import nn
from transformers import (
    Glm4Config,
    LlamaConfig,
    MistralConfig,
    MixtralConfig,
    Olmo2Config,
    Qwen2Config,
    Qwen2MoeConfig,
    Qwen3Config,
    Qwen3MoeConfig,
)

from core.offload.gptq import DequantScratch, GPTQSettings
from core.offload.gptq_loader import EXPERT_PREFIX, quantize_layers
from core.offload.layout import layer_layout
from core.offload.meta_model import build_meta_model, top_level_tensors
from core.planning.sizes import (
    EXPERT_NAMES,
    ModelShape,
    WeightFormat,
    decoder_layer_bytes,
    decoder_layer_tensors,
    largest_gptq_linear,
    non_layer_bytes,
    packed_layer_bytes,
)

SMALL = dict(
    hidden_size=64,
    intermediate_size=96,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_hidden_layers=2,
    vocab_size=128,
)
CONFIGS = {
    "llama": LlamaConfig(**SMALL),
    "llama-bias": LlamaConfig(**SMALL, attention_bias=True),  # on the output projection too
    "qwen3-bias": Qwen3Config(**SMALL, head_dim=16, attention_bias=True),
    "mistral-bias-said": MistralConfig(**SMALL, attention_bias=True),  # Mistral's layers have none whatever it says
    "qwen2": Qwen2Config(**SMALL),
    "qwen3": Qwen3Config(**SMALL, head_dim=16),  # per-head query and key norms
    "mistral": MistralConfig(**SMALL),
    "mixtral": MixtralConfig(**SMALL, num_local_experts=3),
    # a shared expert wider than the routed ones, as in Qwen2-MoE's releases
    "qwen2_moe": Qwen2MoeConfig(
        **SMALL, num_experts=3, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=128
    ),
    "qwen3_moe": Qwen3MoeConfig(**SMALL, num_experts=3, num_experts_per_tok=2, moe_intermediate_size=32, head_dim=16),
    "tied": LlamaConfig(**SMALL, tie_word_embeddings=True),
    "olmo2": Olmo2Config(**SMALL),  # query and key norms as wide as their projections; norms after each block
    "glm4": Glm4Config(**SMALL, pad_token_id=None),  # gate and up in one linear (the scratch's largest); biases
    "glm4-no-bias": Glm4Config(**SMALL, pad_token_id=None, attention_bias=False),
}
GPTQ = {
    "none": None,
    "4bit-g32-actorder": GPTQSettings(4, 32, desc_act=True),
    "8bit-g-1": GPTQSettings(8, -1),
    "2bit-g32": GPTQSettings(2, 32),
}


def _gptq_keys(model: nn.Module, model_type: str) -> set[str]:
    """The qweight names a GPTQ checkpoint of this model has (every decoder linear but an MoE router and
    Qwen2-MoE's one-output shared-expert gate)."""
    keys = set()
    for index, layer in enumerate(model.model.layers):
        for name, module in layer.named_modules():
            if isinstance(module, nn.Linear) and name not in ("mlp.gate", "mlp.shared_expert_gate"):
                keys.add(f"model.layers.{index}.{name}.qweight")
        if model_type in EXPERT_PREFIX:
            first = EXPERT_NAMES[model_type][0]
            keys.add(f"model.layers.{index}.{EXPERT_PREFIX[model_type]}.0.{first}.qweight")
    return keys


@pytest.mark.parametrize("gptq", GPTQ, ids=list(GPTQ))
@pytest.mark.parametrize("name", CONFIGS, ids=list(CONFIGS))
def test_layer_bytes_match_the_loaders_layout(name: str, gptq: str) -> None:
    config, settings = CONFIGS[name], GPTQ[gptq]
    model = build_meta_model(config, torch.float16)
    largest = 0
    if settings is not None:
        largest = quantize_layers(
            model, config.model_type, _gptq_keys(model, config.model_type), settings, DequantScratch()
        )
    shape = ModelShape.from_config(config)
    fmt = WeightFormat(
        bits=settings.bits if settings else None,
        group_size=settings.group_size if settings else -1,
        desc_act=settings.desc_act if settings else False,
        dtype="float16",
    )
    layout = layer_layout(model.model.layers[0])
    assert decoder_layer_bytes(shape, fmt) == layout.nbytes
    # tensor by tensor, not only in bytes: a tiny layer's page rounding would hide a norm counted twice
    listed = {spec.name: (spec.shape, spec.nbytes) for spec in decoder_layer_tensors(shape, fmt)}
    assert listed == {entry.name: (entry.shape, entry.nbytes) for entry in layout.entries}
    top = {id(t): t for _, _, _, t in top_level_tensors(model).values()}
    assert non_layer_bytes(shape, "float16") == sum(t.numel() * t.element_size() for t in top.values())
    if settings is not None:
        assert largest_gptq_linear(shape) == largest


def test_packing_rounds_each_tensor_then_the_layer() -> None:
    assert packed_layer_bytes([]) == 4096
    assert packed_layer_bytes([1, 1]) == 4096  # two tensors of 256 bytes each
    assert packed_layer_bytes([4096, 1]) == 8192
    assert packed_layer_bytes([256] * 16) == 4096 and packed_layer_bytes([256] * 17) == 8192


def test_llama2_70b_gptq_layer_by_hand() -> None:
    """80 layers of TheBloke's Llama-2-70B-Chat-GPTQ main branch (4-bit, one group, act-order)."""
    shape = ModelShape("llama", 80, 8192, 28672, 64, 8, 32000, 128)

    # per linear (in, out): qweight in*out/2, qzeros out/2, scales 2*out, g_idx 4*in, perm 4*in
    def linear(i: int, o: int) -> int:
        return i * o // 2 + o // 2 + 2 * o + 8 * i

    by_hand = (
        2 * linear(8192, 8192) + 2 * linear(8192, 1024) + 2 * linear(8192, 28672) + linear(28672, 8192) + 2 * 2 * 8192
    )
    assert by_hand == 428_684_288  # every tensor is a multiple of 256 bytes; the layer is rounded to a page:
    assert (
        decoder_layer_bytes(shape, WeightFormat(bits=4, group_size=-1, desc_act=True)) == 428_687_360
    )  # 104,660 pages


def test_planning_modules_import_without_torch() -> None:
    code = (
        "import sys; import core.planning.residency, core.planning.sizes, core.planning.host_memory, "
        "core.models.fit, core.models.speed, core.models.gpu_specs, core.hardware.probe, core.cli.hw, "
        "core.cli.models_recommend; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_chat_checks_its_flags_without_torch() -> None:
    """`specexec chat` (and `serve`, through the same functions) refuses a bad flag before the engine starts, and
    reading its decoding, load and sampling flags loads no torch: that took ~10 s of imports in the CLI process,
    on top of the engine's own."""
    code = (
        "import sys\n"
        "from core.cli.main import build_parser\n"
        "from core.cli.options import decoding_settings, engine_load_settings, sampling_params\n"
        "parser = build_parser('chat')\n"
        "args = parser.parse_args(['chat', '--budget', 'auto', '--offload', 'on', '--temperature', '0.5'])\n"
        "assert decoding_settings(args).auto_budget and engine_load_settings(args)['offload'] == 'on'\n"
        "assert sampling_params(args).temperature == 0.5\n"
        "try:\n"
        "    decoding_settings(parser.parse_args(['chat', '--max-depth', '0']))\n"
        "except Exception as error:\n"
        "    print(type(error).__name__)\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["InvalidSettingError", "False"], out.stderr
