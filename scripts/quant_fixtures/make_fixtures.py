"""Pack the tiny quantised checkpoints of tests/fixtures/quantized with each format's own tool, and save beside
each the tool's own dequantisation of every quantised linear (reference.safetensors, float32, keyed
"<module>.weight", [out, in]): the tests load the checkpoint through the engine and compare.

Run with the tools' environment (scripts/quant_fixtures/setup_tools.sh makes it):
    .venv-llmc/bin/python scripts/quant_fixtures/make_fixtures.py [name ...]

Fixtures (a 2-layer Llama, hidden 64, intermediate 128, vocabulary 64 = the tests' word tokenizer):
- ct-w4a16-sym-g32: llm-compressor 0.14 (QuantizationModifier, round-to-nearest), bfloat16 model, symmetric,
  group 32; reference: compressed-tensors 0.19's PackedQuantizationCompressor.decompress.
- ct-w4a16-asym-g64: the same tools, float16 model, asymmetric (packed zero points), group 64.
- ct-w4a16-asym-channel: the same tools, float16 model, asymmetric, one scale per output channel.
- ct-w4a16-actorder-g32: compressed-tensors 0.12.2's own compress_weight with a shuffled g_idx (act-order,
  `actorder: group`; the current tools no longer write it), bfloat16; reference: its decompress_weight.
- awq-gemm-g32: AutoRound 0.15's auto_awq export (AutoAWQ's GEMM layout), float16, asymmetric, group 32;
  reference: AutoAWQ 0.2.9's awq/utils/packing_utils.dequantize_gemm. AutoRound's own format ("auto_round")
  is exported too: its tensors are checked equal to these, and its quantization_config is kept beside them
  (autoround_native_quantization_config.json).
The scales are cast to float32 before each reference dequantises, so the reference is exact (q - z and the
16-bit scales multiply without rounding in float32).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "fixtures" / "quantized"
VENV = ROOT / ".venv-llmc"
KEEP = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "reference.safetensors",
    "autoround_native_quantization_config.json",
)


def save_base(folder: Path, dtype: torch.dtype) -> None:
    """The dense model every fixture quantises (seeded, so each run makes the same one) and its tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=0,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    with torch.no_grad():
        model.lm_head.weight.mul_(8.0)  # peaked distributions, as a trained model's: trees get accepted
    model.to(dtype).save_pretrained(folder)
    backend = Tokenizer(models.WordLevel(vocab={f"w{i}": i for i in range(64)}, unk_token="w2"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="w0", bos_token="w1", unk_token="w2")
    tokenizer.chat_template = (
        "{% for m in messages %}w3 {{ m['role'] }} {{ m['content'] }} w4 {% endfor %}"
        "{% if add_generation_prompt %}w3 assistant {% endif %}"
    )
    tokenizer.save_pretrained(folder)


def finish(source: Path, name: str, reference: dict[str, torch.Tensor]) -> None:
    """Copy the tool's files into tests/fixtures/quantized/<name> with the reference beside them."""
    from safetensors.torch import save_file

    target = OUT / name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    save_file(
        {key: value.float().contiguous() for key, value in reference.items()}, str(source / "reference.safetensors")
    )
    for file in KEEP:
        if (source / file).exists():
            shutil.copy2(source / file, target / file)
    print(f"{name}: {sum(f.stat().st_size for f in target.iterdir()) / 1024:.0f} KB, {len(reference)} linears")


def tensors(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def llm_compressor(name: str, dtype: torch.dtype, weights: dict) -> None:
    """Round-to-nearest W4A16 by llm-compressor; reference by compressed-tensors' own decompress."""
    from compressed_tensors.compressors import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        base, out = Path(tmp) / "base", Path(tmp) / "out"
        save_base(base, dtype)
        model = AutoModelForCausalLM.from_pretrained(base, dtype=dtype)
        recipe = QuantizationModifier(
            config_groups={"group_0": {"targets": ["Linear"], "weights": weights}}, ignore=["lm_head"]
        )
        oneshot(model=model, recipe=recipe)
        model.save_pretrained(out, save_compressed=True)
        for file in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy2(base / file, out / file)
        group = json.loads((out / "config.json").read_text())["quantization_config"]["config_groups"]["group_0"]
        scheme = QuantizationScheme(targets=group["targets"], weights=QuantizationArgs(**group["weights"]))
        packed = tensors(out)
        reference = {}
        for key in packed:
            if key.endswith(".weight_packed"):
                module = key.removesuffix(".weight_packed")
                state = {
                    part: packed[f"{module}.{part}"]
                    for part in ("weight_packed", "weight_scale", "weight_shape", "weight_zero_point")
                    if f"{module}.{part}" in packed
                }
                state["weight_scale"] = state["weight_scale"].float()
                reference[f"{module}.weight"] = PackedQuantizationCompressor.decompress(state, scheme)["weight"]
        finish(out, name, reference)


def ct_actorder(name: str) -> None:
    """Act-order (weight_g_idx) with compressed-tensors 0.12.2's own packer, run in a child process that puts
    that version first on the path."""
    env = dict(os.environ, PYTHONPATH=str(VENV / "extra" / "ct012"))
    subprocess.run([sys.executable, __file__, "--ct012", name], check=True, env=env)


def ct012_actorder(name: str, group_size: int = 32) -> None:
    import compressed_tensors
    from compressed_tensors.compressors import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs
    from safetensors.torch import save_file

    assert compressed_tensors.__version__.startswith("0.12"), compressed_tensors.__version__
    weights = {
        "num_bits": 4,
        "type": "int",
        "symmetric": True,
        "strategy": "group",
        "group_size": group_size,
        "actorder": "group",
        "dynamic": False,
    }
    args = QuantizationArgs(**weights)
    compressor = PackedQuantizationCompressor()
    generator = torch.Generator().manual_seed(1)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        save_base(out, torch.bfloat16)
        dense = tensors(out)
        packed, reference = {}, {}
        for key, weight in dense.items():
            module = key.removesuffix(".weight")
            if not key.startswith("model.layers.") or not key.endswith("_proj.weight"):
                packed[key] = weight
                continue
            n, k = weight.shape
            order = torch.randperm(k, generator=generator)  # the order GPTQ would have visited the columns in
            g_idx = torch.empty(k, dtype=torch.int32)
            g_idx[order] = torch.arange(k, dtype=torch.int32) // group_size
            columns = [weight.float()[:, g_idx == g] for g in range(k // group_size)]
            scale = torch.stack([c.abs().amax(dim=1) / 7.5 for c in columns], dim=1).clamp_min(1e-4).to(torch.bfloat16)
            zero = torch.zeros(n, k // group_size, dtype=torch.int8)
            compressed = compressor.compress_weight(weight, scale, args, zero_point=zero, g_idx=g_idx)
            packed.update({f"{module}.{part}": value for part, value in compressed.items()})
            packed[f"{module}.weight_scale"] = scale
            packed[f"{module}.weight_g_idx"] = g_idx
            reference[key] = compressor.decompress_weight(
                {
                    "weight_packed": compressed["weight_packed"],
                    "weight_scale": scale.float(),
                    "weight_shape": compressed["weight_shape"],
                    "weight_g_idx": g_idx,
                },
                args,
            )
        save_file(packed, str(out / "model.safetensors"))
        config = json.loads((out / "config.json").read_text())
        config["quantization_config"] = {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": weights,
                    "input_activations": None,
                    "output_activations": None,
                    "format": "pack-quantized",
                }
            },
            "ignore": ["lm_head"],
            "kv_cache_scheme": None,
            "sparsity_config": {},
            "transform_config": {},
            "version": compressed_tensors.__version__,
        }
        (out / "config.json").write_text(json.dumps(config, indent=2))
        finish(out, name, reference)


def awq_autoround(name: str) -> None:
    """AutoRound's auto_awq export (round-to-nearest: iters=0); reference by AutoAWQ's dequantize_gemm."""
    from auto_round import AutoRound

    spec = importlib.util.spec_from_file_location(
        "awq_packing_utils", VENV / "extra" / "autoawq" / "awq" / "utils" / "packing_utils.py"
    )
    packing = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(packing)
    with tempfile.TemporaryDirectory() as tmp:
        base, out = Path(tmp) / "base", Path(tmp) / "out"
        save_base(base, torch.float16)
        native = Path(tmp) / "native"
        for target, fmt in ((out, "auto_awq"), (native, "auto_round")):
            AutoRound(str(base), bits=4, group_size=32, sym=False, iters=0, device_map="cpu").quantize_and_save(
                str(target), format=fmt
            )
        written = next(path.parent for path in out.rglob("model.safetensors"))
        # AutoRound's own format with asymmetric weights packs AWQ's GEMM layout: the same bytes, another config
        native_written = next(path.parent for path in native.rglob("model.safetensors"))
        native_tensors = tensors(native_written)
        assert native_tensors.keys() == tensors(written).keys() and all(
            torch.equal(native_tensors[key], value) for key, value in tensors(written).items()
        )
        native_config = json.loads((native_written / "config.json").read_text())["quantization_config"]
        (written / "autoround_native_quantization_config.json").write_text(json.dumps(native_config, indent=2))
        config = json.loads((written / "config.json").read_text())["quantization_config"]
        packed = tensors(written)
        reference = {}
        for key in packed:
            if key.endswith(".qweight"):
                module = key.removesuffix(".qweight")
                reference[f"{module}.weight"] = packing.dequantize_gemm(
                    packed[key],
                    packed[f"{module}.qzeros"],
                    packed[f"{module}.scales"].float(),
                    config["bits"],
                    config["group_size"],
                ).T
        finish(written, name, reference)


FIXTURES = {
    "ct-w4a16-sym-g32": lambda name: llm_compressor(
        name, torch.bfloat16, {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 32}
    ),
    "ct-w4a16-asym-g64": lambda name: llm_compressor(
        name, torch.float16, {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "group", "group_size": 64}
    ),
    "ct-w4a16-asym-channel": lambda name: llm_compressor(
        name, torch.float16, {"num_bits": 4, "type": "int", "symmetric": False, "strategy": "channel"}
    ),
    "ct-w4a16-actorder-g32": ct_actorder,
    "awq-gemm-g32": awq_autoround,
}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--ct012"]:
        ct012_actorder(sys.argv[2])
    else:
        for fixture in sys.argv[1:] or FIXTURES:
            FIXTURES[fixture](fixture)
