"""The 4-bit layouts of 2025-26 checkpoints, read into the engine's one GPTQ layout.

The fixtures in tests/fixtures/quantized were packed by the formats' own tools (llm-compressor,
compressed-tensors, AutoRound's AWQ export) and carry each tool's own float32 dequantisation: the engine's
weights must equal it bit for bit, and sequential, SpecExec and offloaded decoding of the quantised model
must emit the tokens of its dense twin (the same model with the dequantised weights in plain nn.Linear).
GPTQ v2 and AWQ shapes the fixtures do not cover are packed here from the published formats.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import LlamaConfig, LlamaForCausalLM

from core.modeling.causal_lm import CausalLM
from core.loading.load import load_model
from core.decoding.settings import SamplingParams, TreeSettings
from core.modeling.model_format import check_weight_format
from core.offload import load_offloaded
from core.offload.gptq import GPTQLinear, dequantize_reference
from core.offload.quant_formats import AWQ_ORDER, awq_qweight, awq_qzeros
from conftest import torch_threads
from test_exactness import run_sequential, run_specexec
from test_gptq import IDS, _logits, write_gptq_checkpoint

FIXTURES = Path(__file__).parent / "fixtures" / "quantized"
NAMES = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
LABELS = {
    "awq-gemm-g32": "AWQ 4-bit, group 32",
    "ct-w4a16-actorder-g32": "compressed-tensors W4A16, symmetric, group 32, act-order",
    "ct-w4a16-asym-channel": "compressed-tensors W4A16, asymmetric, channel scales",
    "ct-w4a16-asym-g64": "compressed-tensors W4A16, asymmetric, group 64",
    "ct-w4a16-sym-g32": "compressed-tensors W4A16, symmetric, group 32",
}
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_every_fixture_is_known():
    assert NAMES == sorted(LABELS)


def quantised_linears(lm: CausalLM) -> dict[str, GPTQLinear]:
    return {name: module for name, module in lm.model.named_modules() if isinstance(module, GPTQLinear)}


def expected_rows(module: GPTQLinear, reference: torch.Tensor) -> torch.Tensor:
    """The tool's W [in, out] in the row order the engine keeps (act-order rows sorted by group)."""
    weight = reference.T
    return weight[module.perm.long()] if module.mode == "perm" else weight


@pytest.mark.parametrize("name", NAMES)
def test_weights_equal_the_tools_own_dequantisation_bit_for_bit(name):
    folder = FIXTURES / name
    reference = load_file(str(folder / "reference.safetensors"))
    scheme = check_weight_format(folder)
    lm = load_offloaded(str(folder), "cpu", torch.float32)
    assert lm.report.weight_format == LABELS[name] == scheme.label
    linears = quantised_linears(lm)
    assert len(linears) == len(reference) == 14
    scale_dtype = DTYPES[scheme.scale_dtype]
    for module_name, module in linears.items():
        expected = expected_rows(module, reference[f"{module_name}.weight"])
        assert module.scales.dtype == scale_dtype, module_name
        assert torch.equal(module.dequantize(torch.float32), expected), module_name
        # in the scales' own dtype: the exact value rounded once, as the formats' 16-bit dequantisation does
        assert torch.equal(module.dequantize(scale_dtype), expected.to(scale_dtype)), module_name
    assert {module.mode for module in linears.values()} == ({"perm"} if "actorder" in name else {"groups"})


@pytest.mark.parametrize("name", [name for name in NAMES if name.startswith("ct-") and "actorder" not in name])
def test_compressed_tensors_current_decompressor_agrees_in_its_own_dtype(name):
    """compressed-tensors 0.20 (this environment's) decompresses each linear in the scales' dtype: the engine's
    dequantisation in that dtype is the same bits."""
    from compressed_tensors.compressors import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    folder = FIXTURES / name
    group = json.loads((folder / "config.json").read_text())["quantization_config"]["config_groups"]["group_0"]
    scheme = QuantizationScheme(targets=group["targets"], weights=QuantizationArgs(**group["weights"]))
    packed = load_file(str(folder / "model.safetensors"))
    lm = load_offloaded(str(folder), "cpu", torch.float32)
    for module_name, module in quantised_linears(lm).items():
        state = {
            part: packed[f"{module_name}.{part}"]
            for part in ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point")
            if f"{module_name}.{part}" in packed
        }
        theirs = PackedQuantizationCompressor.decompress(state, scheme)["weight"]
        assert torch.equal(module.dequantize(theirs.dtype), theirs.T), module_name


def dense_twin(folder: Path) -> CausalLM:
    """The fixture's model in float32 with every quantised linear replaced by the tool's dequantised weight."""
    config = LlamaConfig(
        **{
            key: value
            for key, value in json.loads((folder / "config.json").read_text()).items()
            if key != "quantization_config"
        }
    )
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).float().eval()
    stored = load_file(str(folder / "model.safetensors"))
    weights = {
        **{
            key: value
            for key, value in stored.items()
            if key.endswith(("norm.weight", "embed_tokens.weight", "lm_head.weight"))
        },
        **load_file(str(folder / "reference.safetensors")),
    }
    model.load_state_dict({key: value.float() for key, value in weights.items()}, strict=True)
    return CausalLM(model=model, name=f"{folder.name}-dense", eos_token_ids=(0,), max_context=1024)


@pytest.mark.parametrize("name", NAMES)
def test_sequential_specexec_and_offloaded_emit_the_dense_twins_tokens(name):
    folder = FIXTURES / name
    twin = dense_twin(folder)
    whole = load_model(str(folder), dtype="float32", device="cpu").lm  # the quantised target, every layer in RAM
    streamed = load_offloaded(str(folder), "cpu", torch.float32, resident_layers=1, stream_on_cpu=True)
    # a 4-bit draft in another fixture's format: the same base model, quantised differently
    other = "ct-w4a16-sym-g32" if name == "awq-gemm-g32" else "awq-gemm-g32"
    draft = load_model(str(FIXTURES / other), dtype="float32", device="cpu", role="draft").lm
    assert quantised_linears(whole) and quantised_linears(streamed) and quantised_linears(draft)
    with torch_threads(1):
        passes = 0
        for seed, temperature in ((0, 0.0), (1, 0.6), (2, 1.0)):
            params = SamplingParams(temperature=temperature, top_p=0.9, seed=seed)
            expected = run_sequential(twin, params, 20)
            assert run_sequential(whole, params, 20) == expected, (name, seed)
            assert run_sequential(streamed, params, 20) == expected, (name, seed)
            got, steps, _ = run_specexec(streamed, draft, params, TreeSettings(16, 6, 4), 20)
            assert got == expected, (name, seed)
            passes += len(steps)
        assert passes < 3 * 20  # the draft was useful: passes accepted several tokens


# --- packers written from the published formats ---------------------------------------------------------


def awq_pack(values: np.ndarray) -> torch.Tensor:
    """[R, C] 4-bit values -> AWQ's int32 [R, C/8]: nibble i of word c holds column 8c + AWQ_ORDER[i] (AutoAWQ's
    WQLinear_GEMM.from_linear and gptqmodel's pack_awq, as vLLM's awq_triton.py unpacks them)."""
    v = values.astype(np.uint32)
    out = np.zeros((v.shape[0], v.shape[1] // 8), dtype=np.uint32)
    for i, column in enumerate(AWQ_ORDER):
        out |= v[:, column::8] << np.uint32(4 * i)
    return torch.from_numpy(out.view(np.int32).copy())


@pytest.mark.parametrize(("k", "n", "group"), [(256, 96, 128), (64, 32, -1), (1024, 8, 32), (128, 4096 + 64, 64)])
def test_awq_conversion_against_a_packer_from_the_published_format(k, n, group):
    rng = np.random.default_rng(k + n)
    size = k if group == -1 else group
    q = rng.integers(0, 16, (k, n))
    z = rng.integers(0, 16, (k // size, n))
    scales = torch.from_numpy(rng.uniform(0.001, 0.05, (k // size, n))).half()
    # W[k, n] = (q - z) * s: AutoAWQ's dequantize_gemm / vLLM's awq_dequantize
    expected = torch.from_numpy(q - np.repeat(z, size, axis=0)).double() * scales.double().repeat_interleave(size, 0)
    qweight = awq_qweight(awq_pack(q), (k // 8, n))
    qzeros = awq_qzeros(awq_pack(z), (k // size, n // 8))
    g_idx = torch.arange(k, dtype=torch.int32) // size
    got = dequantize_reference(qweight, qzeros, scales, g_idx, 4, zero_offset=0, dtype=torch.float64)
    assert torch.equal(got, expected)


def test_gptq_v2_keeps_its_zero_points_as_they_are(tmp_path):
    """GPTQModel's gptq_v2 stores the zero point itself where v1 stores it minus one (the difference vLLM's
    gptq_v2 support had to add): a v2 checkpoint whose zeros are 0 or 15 reads exactly."""
    reference = write_gptq_checkpoint(tmp_path, bits=4, group_size=16, act_order=True, v2=True)
    assert check_weight_format(tmp_path).label == "GPTQ v2 4-bit, group 16, act-order"
    offloaded = load_offloaded(str(tmp_path), "cpu", torch.float64, resident_layers=1, stream_on_cpu=True)
    torch.testing.assert_close(_logits(offloaded, IDS), _logits(reference, IDS), rtol=1e-9, atol=1e-9)


def test_a_tiny_awq_and_compressed_tensors_model_run_from_the_command_line(tmp_path, capsys):
    """The issue's report: these used to fail with '... requires gptqmodel / compressed-tensors ... damaged'."""
    from conftest import run_cli

    awq, ct = (shutil.copytree(FIXTURES / name, tmp_path / name) for name in ("awq-gemm-g32", "ct-w4a16-asym-g64"))
    for target, draft in ((awq, ct), (ct, awq)):  # each a 4-bit target and a 4-bit draft
        result = run_cli(
            capsys,
            "generate",
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--prompt",
            "w5 w6 w7",
            "--max-new-tokens",
            "6",
            "--temperature",
            "0",
            "--json",
        )
        assert result.returncode == 0, result.stderr
        output = json.loads(result.stdout)
        assert 1 <= len(output["token_ids"]) <= 6 and output["finish_reason"] in ("eos", "length")


def test_compressed_tensors_bf16_scales_are_kept_and_a_changed_weight_shape_is_named(tmp_path):
    folder = Path(shutil.copytree(FIXTURES / "ct-w4a16-sym-g32", tmp_path / "m"))
    tensors = load_file(str(folder / "model.safetensors"))
    key = "model.layers.1.mlp.down_proj.weight_scale"
    tensors[key] = tensors[key][:, :-1].contiguous()
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(Exception, match=r"model\.layers\.1\.mlp\.down_proj\.weight_scale.*does config\.json belong"):
        load_offloaded(str(folder), "cpu", torch.float32)


@pytest.mark.parametrize(
    ("bits", "group", "sym"), [(3, 32, False), (8, 64, True), (8, -1, False), (4, 128, False), (2, 32, True)]
)
def test_compressed_tensors_other_widths_with_its_own_packer(bits, group, sym):
    """compressed-tensors 0.20's own pack_to_int32 packs random weights and zero points of other widths and
    group sizes (its dense bit streams: 3-bit values straddle words); its decompressor is the reference."""
    from compressed_tensors.compressors import PackedQuantizationCompressor
    from compressed_tensors.compressors.pack_quantized.helpers import pack_to_int32
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme

    from core.modeling.model_format import QuantScheme
    from core.offload.quant_formats import CheckpointFormat

    generator = torch.Generator().manual_seed(bits * 100 + (group if group > 0 else 1))
    n, k = 96, 256
    groups = 1 if group == -1 else k // group
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    q = torch.randint(low, high + 1, (n, k), generator=generator, dtype=torch.int8)
    scale = (torch.rand(n, groups, generator=generator) * 0.05 + 0.001).to(torch.bfloat16)
    state = {"weight_packed": pack_to_int32(q, bits), "weight_scale": scale, "weight_shape": torch.tensor([n, k])}
    weights = {
        "num_bits": bits,
        "type": "int",
        "symmetric": sym,
        "strategy": "channel" if group == -1 else "group",
        **({} if group == -1 else {"group_size": group}),
    }
    if not sym:
        zero = torch.randint(low, high + 1, (n, groups), generator=generator, dtype=torch.int8)
        state["weight_zero_point"] = pack_to_int32(zero, bits, packed_dim=0)
    scheme = QuantizationScheme(targets=["Linear"], weights=QuantizationArgs(**weights))
    theirs = PackedQuantizationCompressor.decompress({**state, "weight_scale": scale.float()}, scheme)["weight"]

    fmt = CheckpointFormat(QuantScheme("compressed-tensors", bits, group, sym=sym, zero_offset=0))
    per, words = (32, 3) if bits == 3 else (32 // bits, 1)
    shapes = {"qweight": (k // per * words, n), "qzeros": (groups, -(-n // per) * words), "scales": (groups, n)}
    ours = {}
    for part, tensor in state.items():
        translated = fmt.translate(f"model.layers.0.mlp.down_proj.{part}")
        if translated is None:
            continue
        name, convert = translated
        entry = name.rpartition(".")[2]
        ours[entry] = convert(tensor, shapes[entry])
    if sym:
        ours["qzeros"] = fmt.default("x.qzeros", shapes["qzeros"], group)
    g_idx = fmt.default("x.g_idx", (k,), group)
    got = dequantize_reference(ours["qweight"], ours["qzeros"], ours["scales"], g_idx, bits, zero_offset=0)
    assert torch.equal(got, theirs.T)


def test_autoround_own_export_reads_as_the_tools_awq_layout(tmp_path):
    """AutoRound's own format ('auto_round', asymmetric) wrote the same tensors as its auto_awq export
    (make_fixtures.py checks that when it makes the fixture) under another quantization_config: read with that
    config, every linear is still the reference bit for bit."""
    folder = Path(shutil.copytree(FIXTURES / "awq-gemm-g32", tmp_path / "native"))
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = json.loads((folder / "autoround_native_quantization_config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config))
    assert config["quantization_config"]["quant_method"] == "auto-round"
    reference = load_file(str(folder / "reference.safetensors"))
    lm = load_offloaded(str(folder), "cpu", torch.float32)
    assert lm.report.weight_format == "AutoRound (AWQ layout) 4-bit, group 32"
    for name, module in quantised_linears(lm).items():
        assert torch.equal(module.dequantize(torch.float32), reference[f"{name}.weight"].T), name
