"""GPTQ: unpacking and dequantisation against a reference packer written here (numpy, independent of the
engine's code), and tiny GPTQ checkpoints written here loaded through the offloaded path."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from transformers import (
    Glm4Config,
    Glm4ForCausalLM,
    LlamaConfig,
    LlamaForCausalLM,
    MistralConfig,
    MistralForCausalLM,
    MixtralConfig,
    MixtralForCausalLM,
    Olmo2Config,
    Olmo2ForCausalLM,
    Qwen2Config,
    Qwen2ForCausalLM,
    Qwen2MoeConfig,
    Qwen2MoeForCausalLM,
    Qwen3Config,
    Qwen3ForCausalLM,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
)

from core.modeling.causal_lm import CausalLM
from core.errors import ModelFormatError
from core.offload import is_quantized_folder, load_offloaded
from core.offload.gptq import (
    DequantScratch,
    GPTQLinear,
    GPTQSettings,
    dequantize_reference,
    pack_rows,
    plan_gptq_rows,
    sort_rows_by_group,
    unpack_cols,
    unpack_rows,
)
from core.offload.gptq_loader import read_gptq_settings
from core.modeling.tree_mask import additive_mask, causal_visibility


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- reference packer (the checkpoint format, written from its description) ------------------------------


def _autogptq_pack_3bit(values: np.ndarray) -> np.ndarray:
    """AutoGPTQ's 3-bit packing loop, transliterated: 32 values [32*m, C] -> 3 words [3*m, C], value j of a
    block at bit 3j of its 96 bits (values 10 and 21 straddle a word boundary)."""
    q = values.astype(np.uint64)
    out = np.zeros((q.shape[0] // 32 * 3,) + q.shape[1:], dtype=np.uint64)
    i = row = 0
    while row < out.shape[0]:
        for j in range(i, i + 10):
            out[row] |= q[j] << np.uint64(3 * (j - i))
        i += 10
        out[row] |= q[i] << np.uint64(30)
        row += 1
        out[row] |= (q[i] >> np.uint64(2)) & np.uint64(1)
        i += 1
        for j in range(i, i + 10):
            out[row] |= q[j] << np.uint64(3 * (j - i) + 1)
        i += 10
        out[row] |= q[i] << np.uint64(31)
        row += 1
        out[row] |= (q[i] >> np.uint64(1)) & np.uint64(3)
        i += 1
        for j in range(i, i + 10):
            out[row] |= q[j] << np.uint64(3 * (j - i) + 2)
        i += 10
        row += 1
    return (out & np.uint64(0xFFFFFFFF)).astype(np.uint32)


def ref_pack_rows(q: np.ndarray, bits: int) -> torch.Tensor:
    """[K, N] values -> int32 [K*bits/32, N]: row k goes to word k // per at bit offset bits * (k % per);
    3-bit: AutoGPTQ's layout, 32 rows in 3 words."""
    if bits == 3:
        return torch.from_numpy(_autogptq_pack_3bit(q).view(np.int32).copy())
    per = 32 // bits
    q = q.astype(np.uint32)
    out = np.zeros((q.shape[0] // per, q.shape[1]), dtype=np.uint32)
    for j in range(per):
        out |= q[j::per] << np.uint32(bits * j)
    return torch.from_numpy(out.view(np.int32).copy())


def ref_pack_cols(z: np.ndarray, bits: int) -> torch.Tensor:
    """[G, N] values -> int32 [G, ceil(N*bits/32)], packed along the output dim."""
    if bits == 3:
        padded = np.zeros((z.shape[0], -(-z.shape[1] // 32) * 32), dtype=np.int64)
        padded[:, : z.shape[1]] = z
        return torch.from_numpy(np.ascontiguousarray(_autogptq_pack_3bit(padded.T).T).view(np.int32).copy())
    per = 32 // bits
    z = z.astype(np.uint32)
    out = np.zeros((z.shape[0], -(-z.shape[1] // per)), dtype=np.uint32)
    for j in range(per):
        column = z[:, j::per]
        out[:, : column.shape[1]] |= column << np.uint32(bits * j)
    return torch.from_numpy(out.view(np.int32).copy())


def random_gptq(
    rng, k: int, n: int, bits: int, group_size: int, act_order: bool, zero_offset: int = 1
) -> tuple[dict, torch.Tensor]:
    """Random checkpoint tensors of one linear (asymmetric zeros) and its exact W [K, N] in float64.
    zero_offset 1: the v1 format (zeros stored minus one); 0: gptq_v2 (zeros as they are)."""
    size = k if group_size == -1 else group_size
    groups = k // size
    q = rng.integers(0, 2**bits, (k, n))
    stored_zeros = rng.integers(0, 2**bits, (groups, n))  # v1: the real zero point minus 1; v2: the zero point
    scales = torch.from_numpy(rng.uniform(0.002, 0.05, (groups, n))).half()
    if act_order:
        order = rng.permutation(k)
        g_idx = np.empty(k, dtype=np.int64)
        g_idx[order] = np.arange(k) // size
    else:
        g_idx = np.arange(k) // size
    weight = scales.double()[g_idx] * torch.from_numpy(q - stored_zeros[g_idx] - zero_offset).double()
    tensors = {
        "qweight": ref_pack_rows(q, bits),
        "qzeros": ref_pack_cols(stored_zeros, bits),
        "scales": scales,
        "g_idx": torch.from_numpy(g_idx.astype(np.int32)),
    }
    return tensors, weight


def gptq_linear(tensors: dict, k: int, n: int, bits: int, group_size: int, act_order: bool) -> GPTQLinear:
    """A GPTQLinear on the CPU holding `tensors`, finalised the way the loader does it."""
    linear = GPTQLinear(k, n, GPTQSettings(bits, group_size, desc_act=act_order), False, DequantScratch(), device="cpu")
    for name, value in tensors.items():
        getattr(linear, name).copy_(value)
    mode, perm = plan_gptq_rows(linear.g_idx, group_size)
    if mode == "perm":
        linear.qweight.copy_(sort_rows_by_group(linear.qweight, perm, bits))
        linear.perm.copy_(perm)
    linear.mode = mode
    return linear


# --- unpacking and dequantisation --------------------------------------------------------------------


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_unpack_inverts_reference_packer(bits):
    rng = np.random.default_rng(bits)
    q = rng.integers(0, 2**bits, (64, 24))
    assert torch.equal(unpack_rows(ref_pack_rows(q, bits), bits), torch.from_numpy(q).to(torch.int32))
    assert torch.equal(unpack_cols(ref_pack_cols(q, bits), bits)[:, :24], torch.from_numpy(q).to(torch.int32))
    assert torch.equal(pack_rows(torch.from_numpy(q), bits), ref_pack_rows(q, bits))


@pytest.mark.parametrize("bits", [3, 4, 8])
@pytest.mark.parametrize("group_size", [-1, 32, 64, 128])
@pytest.mark.parametrize("act_order", [False, True])
def test_dequantise_matches_reference(bits, group_size, act_order):
    rng = np.random.default_rng(100 * bits + group_size % 97 + act_order)
    k, n = 256, 64 if bits == 3 else 40
    tensors, weight = random_gptq(rng, k, n, bits, group_size, act_order)
    linear = gptq_linear(tensors, k, n, bits, group_size, act_order)
    expected_mode = "perm" if act_order and group_size != -1 else "groups"
    assert linear.mode == expected_mode
    rows = linear.perm.long() if linear.mode == "perm" else torch.arange(k)
    # float64: exact (scales are fp16 values, q - z small integers)
    assert torch.equal(linear.dequantize(torch.float64), weight[rows])
    # float16: one rounding of the exact product, so it equals the rounded reference
    assert torch.equal(linear.dequantize(torch.float16), weight[rows].half())
    x = torch.randn(7, k, dtype=torch.float64)
    torch.testing.assert_close(linear(x), x @ weight, rtol=1e-12, atol=1e-12)
    assert torch.equal(
        dequantize_reference(
            *(tensors[name] for name in ("qweight", "qzeros", "scales", "g_idx")), bits, dtype=torch.float64
        ),
        weight,
    )


def test_irregular_g_idx_uses_gather_mode():
    rng = np.random.default_rng(7)
    k, n, bits = 64, 16, 4
    tensors, _ = random_gptq(rng, k, n, bits, 32, False)
    g_idx = torch.from_numpy(rng.integers(0, 2, k).astype(np.int32))  # unequal groups: cannot be sorted into blocks
    tensors["g_idx"] = g_idx
    weight = dequantize_reference(
        tensors["qweight"], tensors["qzeros"], tensors["scales"], g_idx, bits, dtype=torch.float64
    )
    linear = gptq_linear(tensors, k, n, bits, 32, True)
    assert linear.mode == "gather"
    x = torch.randn(3, k, dtype=torch.float64)
    torch.testing.assert_close(linear(x), x @ weight, rtol=1e-12, atol=1e-12)


def test_4bit_row_sort_fast_path_equals_generic():
    rng = np.random.default_rng(3)
    q = rng.integers(0, 16, (128, 20))
    perm = torch.from_numpy(rng.permutation(128))
    packed = ref_pack_rows(q, 4)
    assert torch.equal(sort_rows_by_group(packed, perm, 4, column_chunk=7), ref_pack_rows(q[perm.numpy()], 4))


def test_scratch_is_shared_and_reused():
    scratch = DequantScratch()
    a = scratch.matrix(8, 4, torch.float32, torch.device("cpu"))
    b = scratch.matrix(4, 8, torch.float32, torch.device("cpu"))
    assert a.data_ptr() == b.data_ptr()


# --- settings --------------------------------------------------------------------------------------------


def test_settings_from_quantize_config_and_config_json(tmp_path):
    (tmp_path / "quantize_config.json").write_text(
        json.dumps({"bits": 4, "group_size": 128, "desc_act": True, "sym": False})
    )
    assert is_quantized_folder(tmp_path)
    assert read_gptq_settings(tmp_path) == GPTQSettings(4, 128, desc_act=True, sym=False)
    other = tmp_path / "b"
    other.mkdir()
    (other / "config.json").write_text(
        json.dumps({"quantization_config": {"quant_method": "gptq", "bits": 8, "group_size": -1}})
    )
    assert read_gptq_settings(other) == GPTQSettings(8, -1)
    plain = tmp_path / "c"
    plain.mkdir()
    (plain / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert not is_quantized_folder(plain) and read_gptq_settings(plain) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"bits": 5, "group_size": 128}, "stored as GPTQ with 5-bit weights .*cannot read"),
        ({"bits": 4, "group_size": 12}, "group size 12 .* is not supported"),
        ({"bits": 3, "group_size": 16}, "group size 16 .* is not supported: use -1 or a positive multiple of 32"),
        ({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"}, "GPTQ in the marlin layout"),
        ({"group_size": 128}, "lack 'bits'"),
    ],
)
def test_settings_errors(tmp_path, raw, message):
    (tmp_path / "quantize_config.json").write_text(json.dumps(raw))
    with pytest.raises(ModelFormatError, match=message):
        read_gptq_settings(tmp_path)


# --- tiny GPTQ checkpoints through the offloaded loader --------------------------------------------------


def _fp16_round(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().double())


def write_gptq_checkpoint(
    folder, model_type="llama", bits=4, group_size=16, act_order=True, shards=1, drop=(), seed=0, experts=4, v2=False
) -> CausalLM:
    """Quantise a tiny random model (`model_type`: llama, mistral, qwen2, qwen3, olmo2, glm4 or an MoE) with random GPTQ
    tensors, save it in the GPTQ layout, and return the in-memory float64 model whose linears hold exactly the
    dequantised weights. MoE models (mixtral, qwen2_moe, qwen3_moe) get `experts` experts, 2 per token; their
    routers (and Qwen2-MoE's shared-expert gate) stay 16-bit, as in real GPTQ checkpoints. v2: GPTQModel's gptq_v2 format (zero points without v1's minus one)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    common = dict(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=0,
    )
    if model_type == "mixtral":
        config = MixtralConfig(num_local_experts=experts, num_experts_per_tok=2, **common)
        model = MixtralForCausalLM(config)
    elif model_type == "qwen2_moe":  # routed experts plus an always-on shared expert behind a sigmoid gate
        config = Qwen2MoeConfig(
            num_experts=experts,
            num_experts_per_tok=2,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=64,
            **common,
        )
        model = Qwen2MoeForCausalLM(config)
    elif model_type == "qwen3_moe":  # routed experts only, per-head query and key norms
        config = Qwen3MoeConfig(num_experts=experts, num_experts_per_tok=2, moe_intermediate_size=32, **common)
        model = Qwen3MoeForCausalLM(config)
    elif model_type == "qwen2":  # q/k/v carry a bias next to their GPTQ tensors
        config = Qwen2Config(**common)
        model = Qwen2ForCausalLM(config)
    elif model_type == "qwen3":  # per-head query and key norms; heads wider than hidden / heads, as Qwen3's are
        config = Qwen3Config(**common, head_dim=16)
        model = Qwen3ForCausalLM(config)
    elif model_type == "mistral":
        config = MistralConfig(**common)
        model = MistralForCausalLM(config)
    elif model_type == "olmo2":  # norms after each block and across all heads' queries and keys
        config = Olmo2Config(**common)
        model = Olmo2ForCausalLM(config)
    elif model_type == "glm4":  # one quantised linear for the gate and up projections, q/k/v biases
        config = Glm4Config(**common, pad_token_id=None)
        model = Glm4ForCausalLM(config)
    else:
        config = LlamaConfig(**common)
        model = LlamaForCausalLM(config)
    config._attn_implementation = "sdpa"
    config._experts_implementation = "eager"  # the default grouped_mm has no float64 kernel
    model = model.double().eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.1 * torch.randn_like(p))
    _fp16_round(model)
    tensors: dict[str, torch.Tensor] = {}

    def quantise(key: str, k: int, n: int) -> torch.Tensor:
        parts, weight = random_gptq(rng, k, n, bits, group_size, act_order, 0 if v2 else 1)
        for part, value in parts.items():
            tensors[f"{key}.{part}"] = value
        return weight  # [K, N]

    with torch.no_grad():
        for index, layer in enumerate(model.model.layers):
            prefix = f"model.layers.{index}."
            ck = (
                (lambda name: name.replace("mlp.", "block_sparse_moe.", 1))
                if model_type == "mixtral"
                else (lambda name: name)
            )
            linears = {
                name: module
                for name, module in layer.named_modules()
                if isinstance(module, torch.nn.Linear) and not name.endswith("shared_expert_gate")
            }
            for name, module in linears.items():
                module.weight.copy_(quantise(prefix + name, module.in_features, module.out_features).T)
            if model_type in ("mixtral", "qwen2_moe", "qwen3_moe"):
                moe = layer.mlp.experts
                inter = moe.down_proj.shape[2]
                gate, up, down = (
                    ("w1", "w3", "w2") if model_type == "mixtral" else ("gate_proj", "up_proj", "down_proj")
                )
                for e in range(moe.gate_up_proj.shape[0]):
                    base = f"{prefix}{ck('mlp.')}experts.{e}."
                    moe.gate_up_proj[e, :inter] = quantise(base + gate, 32, inter).T
                    moe.gate_up_proj[e, inter:] = quantise(base + up, 32, inter).T
                    moe.down_proj[e] = quantise(base + down, inter, 32).T
            linears = {f"{name}.weight" for name in linears}
            for name, p in layer.named_parameters():
                if name not in linears and "experts" not in name:  # norms, the MoE router: plain fp16
                    tensors[prefix + ck(name)] = p.detach().half().contiguous()
        for name in ("model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"):
            tensors[name] = model.get_parameter(name).detach().half().contiguous()
    for key in drop:
        del tensors[key]
    data = config.to_dict()
    data["quantization_config"] = {
        "quant_method": "gptq",
        "bits": bits,
        "group_size": group_size,
        "desc_act": act_order,
        "sym": False,
        "checkpoint_format": "gptq_v2" if v2 else "gptq",
    }
    (folder / "config.json").write_text(json.dumps(data))
    names = sorted(tensors)
    if shards == 1:
        save_file(tensors, str(folder / "model.safetensors"))
    else:
        weight_map = {}
        for s in range(shards):
            file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            chunk = {name: tensors[name] for name in names[s::shards]}
            save_file(chunk, str(folder / file))
            weight_map.update({name: file for name in chunk})
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return CausalLM(model=model, name="reference", eos_token_ids=(0,), max_context=256)


def _logits(model: CausalLM, ids: list[int]) -> torch.Tensor:
    n = len(ids)
    mask = additive_mask(causal_visibility(0, n, "cpu"), model.dtype)
    return model.forward(torch.tensor(ids), torch.arange(n), mask, model.new_cache())


IDS = [1, 5, 9, 33, 2, 17, 60, 4]


@pytest.mark.parametrize(
    ("model_type", "bits", "group_size", "act_order", "shards"),
    [
        ("llama", 4, 16, True, 1),
        ("llama", 4, -1, False, 2),
        ("llama", 8, 32, True, 3),
        ("qwen2", 4, 32, False, 1),
        ("qwen3", 4, 16, True, 1),
        ("mistral", 4, 32, False, 2),
        ("llama", 3, 32, True, 1),
        ("llama", 3, -1, False, 1),
        ("mixtral", 4, 16, True, 2),
        ("qwen2_moe", 4, 16, True, 1),
        ("qwen2_moe", 3, 32, False, 1),
        ("qwen3_moe", 4, 32, True, 2),
        ("olmo2", 4, 16, True, 1),
        ("glm4", 4, 32, True, 2),
    ],
)
def test_gptq_checkpoint_offloaded_equals_dequantised_in_memory(
    tmp_path, model_type, bits, group_size, act_order, shards
):
    reference = write_gptq_checkpoint(tmp_path, model_type, bits, group_size, act_order, shards)
    progress = []
    offloaded = load_offloaded(
        str(tmp_path),
        "cpu",
        torch.float64,
        resident_layers=1,
        stream_on_cpu=True,
        progress=lambda done, total: progress.append((done, total)),
    )
    assert offloaded.report.weight_format.startswith(f"GPTQ {bits}-bit")
    assert progress[-1][0] == progress[-1][1] and all(a[0] <= b[0] for a, b in zip(progress, progress[1:]))
    torch.testing.assert_close(_logits(offloaded, IDS), _logits(reference, IDS), rtol=1e-9, atol=1e-9)
    # in-RAM mode (no ring) gives the same
    in_ram = load_offloaded(str(tmp_path), "cpu", torch.float64)
    torch.testing.assert_close(_logits(in_ram, IDS), _logits(reference, IDS), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("model_type", ["mixtral", "qwen2_moe", "qwen3_moe"])
def test_gptq_moe_runs_each_token_only_through_its_routed_experts(tmp_path, model_type):
    """8 experts, 2 per token, a 3-token prompt: at most 6 experts per layer are routed. Every expert
    linear sees exactly the tokens routed to it, unrouted experts never run, and logits match."""
    reference = write_gptq_checkpoint(tmp_path, model_type, experts=8)
    offloaded = load_offloaded(str(tmp_path), "cpu", torch.float64)
    routed: dict[int, torch.Tensor] = {}  # layer -> top_k_index [T, 2]
    rows_seen: dict[tuple[int, int], list[int]] = {}  # (layer, expert) -> rows given to its gate linear
    hooks = []
    for index, layer in enumerate(offloaded.decoder_layers):
        experts = layer.mlp.experts
        gate_name = experts.names[0]
        hooks.append(
            layer.mlp.gate.register_forward_hook(
                lambda module, args, out, index=index: routed.__setitem__(index, out[2].clone())
            )
        )
        for e in range(experts.num_experts):
            linear = getattr(getattr(experts, str(e)), gate_name)
            hooks.append(
                linear.register_forward_pre_hook(
                    lambda module, args, key=(index, e): rows_seen.setdefault(key, []).append(args[0].shape[0])
                )
            )
    ids = IDS[:3]
    torch.testing.assert_close(_logits(offloaded, ids), _logits(reference, ids), rtol=1e-9, atol=1e-9)
    for hook in hooks:
        hook.remove()
    unrouted = 0
    for index, top_k_index in routed.items():
        counts = torch.bincount(top_k_index.reshape(-1), minlength=8).tolist()
        for e, count in enumerate(counts):
            assert rows_seen.get((index, e), []) == ([count] if count else [])
            unrouted += count == 0
    assert len(routed) == 3 and unrouted >= 2 * 3


def test_gptq_missing_tensor_is_named(tmp_path):
    write_gptq_checkpoint(tmp_path, drop=("model.layers.1.mlp.down_proj.scales",))
    with pytest.raises(ModelFormatError, match=r"lacks 1 tensors .*model\.layers\.1\.mlp\.down_proj\.scales"):
        load_offloaded(str(tmp_path), "cpu", torch.float64)


@pytest.mark.parametrize(
    ("key", "more", "said"),
    [
        # the embedding is stored unquantised: its shape is compared with config.json before the model is built
        ("vocab_size", 1, r"gives vocab_size as 65, but its weights hold model\.embed_tokens\.weight as \[64, 32\]"),
        # a quantised layer packs its shape: the loader finds it as it fills the layer
        ("intermediate_size", 16, "does config.json belong to these weights"),  # whole words and groups
    ],
)
def test_gptq_wrong_shape_is_explained(tmp_path, key, more, said):
    write_gptq_checkpoint(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data[key] += more
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(ModelFormatError, match=said):
        load_offloaded(str(tmp_path), "cpu", torch.float64)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("bits", [3, 4])
@pytest.mark.parametrize("act_order", [False, True])
def test_cuda_gptq_linear_matches_reference(act_order, bits):
    tensors, weight = random_gptq(np.random.default_rng(0), 512, 256, bits, 128, act_order)
    linear = gptq_linear(tensors, 512, 256, bits, 128, act_order).cuda()
    assert torch.equal(
        linear.dequantize(torch.float16).cpu(),
        weight[linear.perm.long().cpu() if linear.mode == "perm" else torch.arange(512)].half(),
    )
    x = torch.randn(9, 512, dtype=torch.float16, device="cuda")
    torch.testing.assert_close(linear(x).double().cpu(), x.double().cpu() @ weight, rtol=2e-2, atol=2e-2)
