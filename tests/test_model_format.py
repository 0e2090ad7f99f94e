"""Formats the engine does not read are refused before any weight is read, in words that name the format, say
what the app reads and what to download instead; only damaged files are called damaged. Checked on the
library call, `specexec generate --target`, `specexec models import` and the engine's error event."""

from __future__ import annotations

import json
import random
import re
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from conftest import run_cli
from json_mutation import mutated_json
from core.engine.events import error_event
from core.errors import DamagedModelError, ModelFormatError, UnsupportedArchitectureError, UnsupportedFormatError
from core.modeling.families import GGUF_MODEL_TYPES, SUPPORTED_MODEL_TYPES
from core.modeling.gguf_header import GgufHeader, gguf_header
from core.modeling.model_format import check_gguf, check_weight_format, quant_scheme, safetensors_header

LLAMA = {
    "model_type": "llama",
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
}
READS = "This app reads 4-bit GPTQ, AWQ (GEMM) and compressed-tensors W4A16 models"


def ct_group(weights: dict, **extra) -> dict:
    return {
        "quant_method": "compressed-tensors",
        "quantization_status": "compressed",
        "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, **extra}},
    }


FP8 = {"num_bits": 8, "type": "float", "strategy": "channel", "symmetric": True}
INT8 = {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True}
REFUSED = {
    "fp8-compressed-tensors": (
        dict(
            ct_group(FP8, input_activations={"num_bits": 8, "type": "float", "dynamic": True}), format="float-quantized"
        ),
        "FP8 (compressed-tensors float-quantized)",
    ),
    "fp8-method": ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "stored as FP8"),
    "mxfp4": ({"quant_method": "mxfp4"}, "stored as MXFP4"),
    "bitsandbytes-nf4": (
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"},
        "bitsandbytes 4-bit",
    ),
    "exl2-method": ({"quant_method": "exl2", "bits": 4.65}, "EXL2"),
    "hqq": ({"quant_method": "hqq", "nbits": 4}, "stored as HQQ"),
    "awq-gemv": (
        {"quant_method": "awq", "version": "gemv", "bits": 4, "group_size": 128, "zero_point": True},
        "AWQ in the GEMV layout",
    ),
    "awq-marlin": (
        {"quant_method": "awq", "version": "marlin", "bits": 4, "group_size": 128, "zero_point": True},
        "AWQ in the MARLIN layout",
    ),
    "awq-llm-awq": (
        {"quant_method": "awq", "backend": "llm-awq", "bits": 4, "group_size": 128},
        "AWQ in the LLM-AWQ layout",
    ),
    "gptq-marlin": (
        {"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"},
        "GPTQ in the marlin layout",
    ),
    "w8a8-int": (
        dict(ct_group(INT8, input_activations={"num_bits": 8, "type": "int", "dynamic": True}), format="int-quantized"),
        "W8A8",
    ),
    "w4a8": (
        ct_group(
            {**INT8, "num_bits": 4, "strategy": "group", "group_size": 128},
            input_activations={"num_bits": 8, "type": "int"},
            format="pack-quantized",
        ),
        "quantised activations",
    ),
    "nvfp4": (
        dict(
            ct_group({"num_bits": 4, "type": "float", "strategy": "tensor_group", "group_size": 16}),
            format="nvfp4-pack-quantized",
        ),
        "NVFP4",
    ),
    "unknown": ({"quant_method": "fancy-quant", "bits": 3}, "'fancy-quant' quantisation"),
    "auto-round-mxfp4": (
        {
            "quant_method": "auto-round",
            "bits": 4,
            "group_size": 32,
            "data_type": "mx_fp",
            "packing_format": "auto_round:llm_compressor",
        },
        "AutoRound's MX_FP format",
    ),
}


def model_folder(path: Path, quantization: dict | None = None, tensors: dict | None = None, cut: int = 0) -> Path:
    """A folder with config.json (and `quantization` as its quantization_config) and one safetensors file of
    `tensors` (name -> numpy array); `cut` bytes removed from its end."""
    path.mkdir(parents=True, exist_ok=True)
    config = dict(LLAMA, **({"quantization_config": quantization} if quantization is not None else {}))
    (path / "config.json").write_text(json.dumps(config))
    weights = path / "model.safetensors"
    save_file(tensors or {"model.norm.weight": np.ones(32, dtype=np.float16)}, str(weights))
    if cut:
        weights.write_bytes(weights.read_bytes()[:-cut])
    return path


def assert_plain_refusal(message: str, what: str) -> None:
    assert what in message, message
    assert READS in message and "-AWQ" in message and "quantized.w4a16" in message and "16-bit original" in message
    assert "download them again" not in message and "download it again" not in message


@pytest.mark.parametrize("name", REFUSED)
def test_unread_formats_are_refused_by_name_before_any_weight_is_read(tmp_path, name):
    quantization, what = REFUSED[name]
    # the weight file is cut short: the refusal names the format, so no weight file was even opened
    folder = model_folder(tmp_path / name, quantization, cut=10)
    with pytest.raises(UnsupportedFormatError) as info:
        check_weight_format(folder)
    assert_plain_refusal(str(info.value), what)


@pytest.mark.parametrize(
    ("tensors", "what"),
    [
        (
            {
                "model.layers.0.self_attn.q_proj.q_weight": np.zeros((4, 8), dtype=np.int32),
                "model.layers.0.self_attn.q_proj.q_invperm": np.zeros(32, dtype=np.int16),
            },
            "EXL2 (ExLlamaV2)",
        ),
        ({"model.layers.0.mlp.experts.gate_up_proj_blocks": np.zeros((2, 8), dtype=np.uint8)}, "MXFP4"),
        ({"model.layers.0.mlp.down_proj.weight.absmax": np.zeros(4, dtype=np.float32)}, "bitsandbytes"),
    ],
)
def test_formats_known_by_their_tensors_when_config_json_says_nothing(tmp_path, tensors, what):
    with pytest.raises(UnsupportedFormatError) as info:
        check_weight_format(model_folder(tmp_path / "m", tensors=tensors))
    assert_plain_refusal(str(info.value), what)


def test_fp8_weights_without_settings_are_named_from_the_header(tmp_path):
    folder = model_folder(tmp_path / "m")
    header = json.dumps(
        {"model.layers.0.mlp.down_proj.weight": {"dtype": "F8_E4M3", "shape": [4, 4], "data_offsets": [0, 16]}}
    )
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0" * 16)
    with pytest.raises(UnsupportedFormatError) as info:
        check_weight_format(folder)
    assert_plain_refusal(str(info.value), "stored as FP8")


def test_read_formats_are_described(tmp_path):
    awq = quant_scheme(
        model_folder(
            tmp_path / "awq",
            {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "GEMM"},
        )
    )
    assert (awq.method, awq.bits, awq.group_size, awq.zero_offset, awq.label) == (
        "awq",
        4,
        128,
        0,
        "AWQ 4-bit, group 128",
    )
    old_awq = tmp_path / "old-awq"
    model_folder(old_awq)
    (old_awq / "quant_config.json").write_text(
        json.dumps({"w_bit": 4, "q_group_size": 64, "zero_point": True, "version": "GEMM"})
    )
    assert quant_scheme(old_awq).label == "AWQ 4-bit, group 64"
    v2 = quant_scheme(
        model_folder(tmp_path / "v2", {"quant_method": "gptq", "bits": 4, "group_size": 128, "format": "gptq_v2"})
    )
    assert (v2.zero_offset, v2.label) == (0, "GPTQ v2 4-bit, group 128")
    w4 = quant_scheme(
        model_folder(
            tmp_path / "ct",
            dict(
                ct_group(
                    {
                        "num_bits": 4,
                        "type": "int",
                        "strategy": "group",
                        "group_size": 128,
                        "symmetric": True,
                        "actorder": "weight",
                    }
                ),
                format="pack-quantized",
            ),
        )
    )
    assert (w4.method, w4.desc_act, w4.zero_offset) == ("compressed-tensors", False, 0)
    assert quant_scheme(model_folder(tmp_path / "plain")) is None


def test_autoround_exports_are_read_as_the_layout_their_packing_format_names(tmp_path):
    """AutoRound's own export stores GPTQ v1 (auto_gptq packing: zeros minus one), GPTQ with plain zeros (its
    own and gptqmodel packing) or AWQ GEMM (auto_awq packing)."""

    def scheme(packing):
        folder = tmp_path / packing.replace(":", "_")
        return quant_scheme(
            model_folder(
                folder,
                {"quant_method": "auto-round", "bits": 4, "group_size": 128, "sym": True, "packing_format": packing},
            )
        )

    assert (scheme("auto_round:auto_gptq").method, scheme("auto_round:auto_gptq").zero_offset) == ("gptq", 1)
    assert (scheme("auto_round").method, scheme("auto_round").zero_offset) == ("gptq", 0)
    assert (scheme("auto_round:gptqmodel").method, scheme("auto_round:gptqmodel").zero_offset) == ("gptq", 0)
    awq = scheme("auto_round:auto_awq")
    assert (awq.method, awq.zero_offset, awq.label) == ("awq", 0, "AutoRound (AWQ layout) 4-bit, group 128")


def test_yes_no_settings_are_read_as_written_and_nonsense_is_refused(tmp_path):
    """Python's truth read "desc_act": "false" as act-order and "is_marlin_format": "false" as Marlin (a GPTQ
    model refused for a layout it does not use); the words true / false are read as such, anything else is
    refused naming the setting."""
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": 128}

    def scheme(name, **settings):
        return quant_scheme(model_folder(tmp_path / name, dict(gptq, **settings)))

    worded = scheme("worded", desc_act="false", sym="False", is_marlin_format="false")
    assert (worded.desc_act, worded.sym, worded.label) == (False, False, "GPTQ 4-bit, group 128")
    assert scheme("act-order", desc_act="TRUE").desc_act and scheme("none", desc_act=None).desc_act is False
    for name, bad in (("yes", "yes"), ("number", 1), ("list", [True])):
        with pytest.raises(ModelFormatError, match=f"bad 'desc_act': {re.escape(repr(bad))}"):
            scheme(name, desc_act=bad)
    awq = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "GEMM"}
    with pytest.raises(UnsupportedFormatError, match="AWQ without zero points"):
        quant_scheme(model_folder(tmp_path / "awq", dict(awq, zero_point="false")))
    ct = ct_group({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128, "symmetric": "maybe"})
    with pytest.raises(ModelFormatError, match="bad 'symmetric'"):
        quant_scheme(model_folder(tmp_path / "ct", ct))


def test_mixed_precision_compressed_tensors_is_refused(tmp_path):
    raw = ct_group({"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128})
    raw["config_groups"]["group_1"] = {
        "targets": ["re:.*down_proj"],
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
    }
    with pytest.raises(UnsupportedFormatError, match="mixed-precision compressed-tensors"):
        quant_scheme(model_folder(tmp_path / "m", raw))


@pytest.mark.parametrize(
    "offsets",
    # Infinity, 1e400 (a float too big, which JSON reads as inf) and NaN were an OverflowError's or a
    # comparison's way past the check; safetensors' own reader takes whole byte positions only
    ['"x"', "[0]", '[0, "end"]', "[0, null]", "{}", "[0, Infinity]", "[0, 1e400]", "[0, NaN]", "[0, 2.0]"]
    + ["[0, true]", "[-4, 2]", "[2, 0]", "[0, 1, 2]"],
)
def test_a_safetensors_header_with_offsets_that_are_not_numbers_is_damaged(tmp_path, offsets):
    header = f'{{"w": {{"dtype": "F16", "shape": [2], "data_offsets": {offsets}}}}}'.encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 4)
    with pytest.raises(DamagedModelError, match="damaged safetensors header.*download it again"):
        safetensors_header(path)


def test_only_damaged_files_are_called_damaged(tmp_path):
    with pytest.raises(DamagedModelError, match="shorter than its header says.*download it again"):
        check_weight_format(model_folder(tmp_path / "cut", cut=4))
    sharded = model_folder(tmp_path / "sharded")
    (sharded / "model.safetensors").rename(sharded / "model-00001-of-00002.safetensors")
    (sharded / "model.safetensors.index.json").write_text(
        json.dumps(
            {
                "weight_map": {
                    "model.norm.weight": "model-00001-of-00002.safetensors",
                    "lm_head.weight": "model-00002-of-00002.safetensors",
                }
            }
        )
    )
    with pytest.raises(DamagedModelError, match="model-00002-of-00002.safetensors.*download the missing files again"):
        check_weight_format(sharded)


def test_the_command_line_refuses_an_fp8_model_in_words(tmp_path, capsys, monkeypatch):
    folder = model_folder(tmp_path / "Llama-3.3-70B-Instruct-FP8", REFUSED["fp8-compressed-tensors"][0])
    result = run_cli(capsys, "generate", "--target", str(folder), "--prompt", "hi", "--max-new-tokens", "2")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert_plain_refusal(result.stderr, "FP8")
    models = tmp_path / "models"
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(models))
    monkeypatch.setenv("SPECEXEC_CONFIG_DIR", str(tmp_path / "config"))
    result = run_cli(capsys, "models", "import", str(folder))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert_plain_refusal(result.stderr, "FP8")
    assert not models.exists() or not any(models.iterdir())  # nothing was copied


def test_the_engine_tells_the_app_what_to_do_for_each_kind_of_format_error():
    unsupported = error_event("r1", UnsupportedFormatError("stored as FP8"))
    damaged = error_event("r2", DamagedModelError("model.safetensors is cut short"))
    other = error_event("r3", ModelFormatError("no config.json"))
    assert unsupported.kind == damaged.kind == other.kind == "model_format"
    assert "GPTQ, AWQ or compressed-tensors W4A16" in unsupported.hint and "again" not in unsupported.hint
    assert "download them again" in damaged.hint
    assert "again" not in other.hint


def gguf_string(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


def write_gguf_header(
    path: Path,
    parameters_per_tensor: int,
    tensors: int,
    file_type: int = 15,
    architecture: str | None = "llama",
    name: str | None = None,
) -> Path:
    """A GGUF file's header and tensor list (general.architecture and .name where given, general.file_type, a
    token list, and `tensors` 1-D tensors), no tensor data."""
    entries = [gguf_string("general.file_type") + struct.pack("<II", 4, file_type)]
    if architecture is not None:
        entries.insert(0, gguf_string("general.architecture") + struct.pack("<I", 8) + gguf_string(architecture))
    if name is not None:
        entries.append(gguf_string("general.name") + struct.pack("<I", 8) + gguf_string(name))
    tokens = [gguf_string(f"t{i}") for i in range(5)]
    entries.append(gguf_string("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, len(tokens)) + b"".join(tokens))
    body = b"GGUF" + struct.pack("<IQQ", 3, tensors, len(entries)) + b"".join(entries)
    for index in range(tensors):
        body += gguf_string(f"blk.{index}.weight") + struct.pack("<IQIQ", 1, parameters_per_tensor, 12, 0)
    path.write_bytes(body)
    return path


def test_a_big_models_gguf_is_refused_before_it_is_read(tmp_path, capsys):
    big = write_gguf_header(tmp_path / "Llama-3.3-70B-Instruct-Q4_K_M.gguf", 880_000_000, 80)
    assert gguf_header(big) == GgufHeader(80, 70_400_000_000, 15, "llama", "", layers=frozenset(range(80)))
    with pytest.raises(UnsupportedFormatError) as info:
        check_gguf(big, ram_bytes=64 * 1024**3)
    message = str(info.value)
    assert "GGUF file (Q4_K_M) of a 70.4B-parameter model" in message and "131.1 GB" in message
    assert_plain_refusal(message, "reads GGUF only for small models")
    check_gguf(write_gguf_header(tmp_path / "small.gguf", 1_000_000, 30), ram_bytes=64 * 1024**3)  # fine
    result = run_cli(capsys, "generate", "--target", str(big), "--prompt", "hi")
    assert result.returncode == 2 and "70.4B-parameter" in result.stderr and "Traceback" not in result.stderr


def test_a_gguf_file_s_family_is_read_from_its_metadata_and_refused_before_it_is_copied(tmp_path):
    from core.models.importing import import_model

    def header(name: str, architecture: str | None, model_name: str | None = None) -> Path:
        return write_gguf_header(tmp_path / f"{name}.gguf", 1000, 2, architecture=architecture, name=model_name)

    assert gguf_header(header("moe", "qwen3moe", "Qwen3 30B A3B")) == GgufHeader(
        2, 2000, 15, "qwen3moe", "Qwen3 30B A3B", layers=frozenset({0, 1})
    )
    check_gguf(tmp_path / "moe.gguf")  # qwen3moe is Qwen3-MoE
    check_gguf(header("mistral", "llama", "Mistral 7B Instruct"))  # llama.cpp's name for Mistral
    with pytest.raises(
        UnsupportedArchitectureError, match="this app cannot run models of type 'gemma3': it runs Llama"
    ):
        import_model(header("gemma", "gemma3"), tmp_path / "models")
    with pytest.raises(ModelFormatError, match="does not say what model it holds"):
        import_model(header("nameless", None), tmp_path / "models")
    assert not (tmp_path / "models").exists()  # nothing was copied


def test_a_gguf_file_of_a_family_run_only_from_safetensors_is_refused_with_what_to_download(tmp_path):
    """OLMo 2 and GLM-4 run from their safetensors releases; transformers has no GGUF reader for them, so their
    GGUF files are refused before they are copied, saying what to download (not that the family is unknown)."""
    from core.models.importing import import_model

    for architecture, said in (("olmo2", "OLMo 2"), ("glm4", "GLM-4")):
        path = write_gguf_header(tmp_path / f"{architecture}.gguf", 1000, 2, architecture=architecture, name="x")
        with pytest.raises(UnsupportedArchitectureError) as info:
            import_model(path, tmp_path / "models")
        assert f"runs {said} models from their safetensors files, not from GGUF files: download" in str(info.value)
    assert not (tmp_path / "models").exists()


def test_the_gguf_families_are_those_transformers_reads():
    """GGUF files load through transformers' GGUF reader: every family listed as GGUF-readable has one there,
    and every family the engine runs that has one is listed (a transformers upgrade that adds one shows here)."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    assert GGUF_MODEL_TYPES == SUPPORTED_MODEL_TYPES & set(GGUF_CONFIG_MAPPING)


def test_awq_and_compressed_tensors_folders_import(tmp_path):
    """`models import` checks a folder with the same reader the loader uses: the formats it reads go in."""
    from core.models.importing import import_model

    fixtures = Path(__file__).parent / "fixtures" / "quantized"
    for name in ("awq-gemm-g32", "ct-w4a16-actorder-g32"):
        imported = import_model(fixtures / name, tmp_path / "models")
        assert (imported / "model.safetensors").read_bytes() == (fixtures / name / "model.safetensors").read_bytes()


QWEN35_TEXT = {
    "model_type": "qwen3_5_text",
    "num_hidden_layers": 8,
    "full_attention_interval": 4,
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2,
}
HYBRIDS = {
    "qwen3.5": (
        {"model_type": "qwen3_5", "architectures": ["Qwen3_5ForConditionalGeneration"], "text_config": QWEN35_TEXT},
        "6 of its 8 layers are linear-attention (Gated DeltaNet)",
    ),
    "qwen3-next": ({**QWEN35_TEXT, "model_type": "qwen3_next"}, "(qwen3_next)"),
    "granite-4-hybrid": ({"model_type": "granitemoehybrid", "layer_types": ["mamba"] * 3 + ["attention"]}, "Mamba"),
    "nemotron-h": ({"model_type": "nemotron_h", "hybrid_override_pattern": "M-M-M*-M-"}, "Mamba"),
    "jamba": (
        {"model_type": "jamba", "num_hidden_layers": 32, "attn_layer_period": 8, "attn_layer_offset": 4},
        "28 of its 32 layers are Mamba",
    ),
    "lfm2": ({"model_type": "lfm2", "layer_types": ["conv", "conv", "full_attention"]}, "short-convolution"),
    "mamba": ({"model_type": "mamba", "num_hidden_layers": 4}, "its layers are Mamba"),
    "falcon-h1": ({"model_type": "falcon_h1", "num_hidden_layers": 24}, "(falcon_h1)"),
}


@pytest.mark.parametrize("name", HYBRIDS)
def test_models_with_recurrent_layers_are_refused_by_name_at_import(tmp_path, name):
    """A tree of drafts needs one state per branch, which recurrent layers cannot share: Qwen3.5 and the other
    hybrids are refused from config.json alone (the weights are cut short: none is read), saying what to pick."""
    from core.models.importing import check_model_folder

    config, what = HYBRIDS[name]
    folder = model_folder(tmp_path / name, cut=10)
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitectureError) as info:
        check_model_folder(folder)
    message = str(info.value)
    assert what in message and "each branch of the tree would need its own copy" in message, message
    assert "pick a model with attention in every layer instead: Qwen3" in message and "not damaged" in message


def test_sliding_window_attention_is_not_taken_for_recurrence(tmp_path):
    folder = model_folder(tmp_path / "gemma")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "layer_types": ["sliding_attention", "full_attention"]}))
    assert check_weight_format(folder) is None


def read_or_refused(check: Callable[[], object]) -> str:
    """ "read" where `check()` returns, "refused" where it raises a ModelFormatError in words; any other exception
    (a crash the person importing the file would see) fails the test."""
    try:
        check()
    except ModelFormatError as error:
        assert str(error)
        return "refused"
    return "read"


def test_seeded_mutations_of_a_safetensors_header_are_read_or_refused_in_words(tmp_path):
    """1,000 mutations of a real folder's safetensors header (values replaced by every JSON type and some
    hostile ones, keys deleted or added; the length kept true): `check_weight_format` reads each or refuses it
    with a ModelFormatError. Found this way: offsets of Infinity or 1e400 (an OverflowError)."""
    folder = model_folder(tmp_path / "m", tensors={f"model.layers.{i}.w": np.ones(4, np.float16) for i in range(2)})
    (folder / "config.json").write_text(json.dumps(dict(LLAMA, num_hidden_layers=2)))
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header, body = json.loads(data[8 : 8 + length]), data[8 + length :]
    chosen = random.Random(38)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(1_000):
        text = json.dumps(mutated_json(header, chosen, ["model.layers.0.x.qweight", "__metadata__", "w"])).encode()
        weights.write_bytes(struct.pack("<Q", len(text)) + text + body)
        outcomes[read_or_refused(lambda: check_weight_format(folder))] += 1
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes
