"""Random GPTQ layers and a tiny GPTQ model folder, made on the spot: the doctor runs on a user's machine,
where no test checkpoint exists, and must exercise the same loader, packing and kernels a real model does.

Packed with the engine's own `pack_rows` (its inverse, `unpack_rows`, is tested against an independent
packer in tests/test_gptq.py), and finalised with the loader's own `finalize_gptq_layer`.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from core.offload.gptq import DequantScratch, GPTQLinear, GPTQSettings, pack_rows
from core.offload.gptq_loader import finalize_gptq_layer
from core.planning.sizes import block_shape

# Scales of ordinary layers; TINY_SCALES are float16 subnormals (below 6.1e-5), which a kernel that flushes
# denormals to zero would get wrong.
SCALES = (0.002, 0.05)
TINY_SCALES = (6e-8, 6e-5)


def random_gptq_tensors(
    generator: torch.Generator,
    k: int,
    n: int,
    bits: int,
    group_size: int,
    act_order: bool,
    scales: tuple[float, float] = SCALES,
) -> dict[str, torch.Tensor]:
    """Checkpoint tensors of one random K x N linear (v1 zeros, asymmetric): qweight, qzeros, scales, g_idx."""
    size = k if group_size == -1 else group_size
    groups = -(-k // size)
    q = torch.randint(0, 2**bits, (k, n), generator=generator)
    per = block_shape(bits)[0]
    zeros = torch.zeros(groups, -(-n // per) * per, dtype=torch.int64)
    zeros[:, :n] = torch.randint(0, 2**bits, (groups, n), generator=generator)
    low, high = scales
    scale = (torch.rand(groups, n, generator=generator, dtype=torch.float64) * (high - low) + low).half()
    g_idx = torch.arange(k, dtype=torch.int32) // size
    if act_order:
        g_idx = g_idx[torch.argsort(torch.rand(k, generator=generator))]
    return {
        "qweight": pack_rows(q, bits),
        "qzeros": pack_rows(zeros.T, bits).T.contiguous(),
        "scales": scale,
        "g_idx": g_idx.contiguous(),
    }


def finalised_linear(
    tensors: dict[str, torch.Tensor],
    k: int,
    n: int,
    bits: int,
    group_size: int,
    act_order: bool,
    device: torch.device | str = "cpu",
) -> GPTQLinear:
    """A GPTQLinear holding `tensors` on `device`, in the mode the loader would choose (act-order rows
    re-packed sorted by group)."""
    linear = GPTQLinear(k, n, GPTQSettings(bits, group_size, desc_act=act_order), False, DequantScratch(), device="cpu")
    for name, value in tensors.items():
        getattr(linear, name).copy_(value)
    finalize_gptq_layer(linear, lambda name: getattr(linear, name.rpartition(".")[2]))
    return linear.to(device)


def write_tiny_gptq_model(
    folder: str | Path, bits: int = 4, group_size: int = 32, act_order: bool = True, seed: int = 0
) -> None:
    """A 4-layer random Llama (hidden 128, vocab 512) as a GPTQ checkpoint folder the offload loader reads.

    Norms and the embedding/LM head stay float16, as in real GPTQ checkpoints; weights are scaled so the
    greedy choice is clear (far from ties that rounding could flip between a GPU and the CPU).
    """
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    generator = torch.Generator().manual_seed(seed)
    config = LlamaConfig(
        vocab_size=512,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        bos_token_id=1,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    with torch.device("meta"):
        model = LlamaForCausalLM(config)
    tensors: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name != "lm_head":
            parts = random_gptq_tensors(generator, module.in_features, module.out_features, bits, group_size, act_order)
            tensors.update({f"{name}.{part}": value for part, value in parts.items()})
    for name, parameter in model.named_parameters():
        if name.endswith("norm.weight"):
            tensors[name] = (1 + 0.1 * torch.randn(parameter.shape, generator=generator)).half()
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            tensors[name] = torch.randn(parameter.shape, generator=generator).half()
    data = config.to_dict()
    data["quantization_config"] = {
        "quant_method": "gptq",
        "bits": bits,
        "group_size": group_size,
        "desc_act": act_order,
        "sym": False,
    }
    (folder / "config.json").write_text(json.dumps(data), encoding="utf-8")
    save_file(tensors, str(folder / "model.safetensors"))
