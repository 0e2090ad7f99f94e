"""Model loading: HF folders (sharded or not), .gguf files, the local HF cache, settings, and clear errors.

Everything uses tiny random models written to tmp dirs: no download, no real model, a few seconds in all.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from core.modeling.attention import GROUPED_SDPA
from core.errors import (
    DamagedModelError,
    InvalidSettingError,
    ModelFormatError,
    ModelNotFoundError,
    SpecExecError,
    TokenizerMismatchError,
    UnsupportedArchitectureError,
)
from core.loading.offload_settings import OffloadSettings
from core.loading.load import (
    LoadedModel,
    check_same_tokenizer,
    load_model,
    resolve_device,
    resolve_dtype,
    resolve_spec,
)

VOCAB = 64


def make_tokenizer(
    swap: tuple[int, str] | None = None, size: int = VOCAB, eos: str = "</s>"
) -> PreTrainedTokenizerFast:
    """A WordLevel tokenizer over '</s>', '<s>', '<unk>', 'w3'.. ; `swap=(id, token)` renames one entry."""
    vocab = {"</s>": 0, "<s>": 1, "<unk>": 2, **{f"w{i}": i for i in range(3, size)}}
    if swap is not None:
        token_id, token = swap
        vocab = {t: i for t, i in vocab.items() if i != token_id}
        vocab[token] = token_id
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<s>", eos_token=eos, unk_token="<unk>")


def save_tiny(model, folder: Path, max_shard_size: str | None = None, tokenizer=True) -> Path:
    kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
    model.save_pretrained(folder, **kwargs)
    if tokenizer:
        make_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory, tiny_target) -> Path:
    """The conftest tiny Llama (float64) saved unsharded with a tokenizer; tests copy it before damaging it."""
    return save_tiny(tiny_target.model, tmp_path_factory.mktemp("tiny") / "tiny-llama")


def copy_of(folder: Path, tmp_path: Path, name: str = "model") -> Path:
    target = tmp_path / name
    shutil.copytree(folder, target)
    return target


def logits(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(torch.tensor([ids])).logits


# ----------------------------------------------------------------------------------------------------------
# Folders that load


def test_sharded_folder_gives_the_same_logits_as_the_in_memory_model(tmp_path, tiny_target):
    folder = save_tiny(tiny_target.model, tmp_path / "sharded", max_shard_size="40KB")
    assert (folder / "model.safetensors.index.json").is_file()
    assert len(list(folder.glob("*.safetensors"))) > 1
    messages: list[str] = []

    loaded = load_model(str(folder), dtype="float64", device="cpu", progress=messages.append)

    assert isinstance(loaded, LoadedModel)
    lm = loaded.lm
    ids = [1, 5, 9, 33, 2, 60, 7]
    assert torch.equal(logits(lm.model, ids), logits(tiny_target.model, ids))
    assert lm.name == "sharded"
    assert lm.eos_token_ids == (0,)
    assert lm.max_context == 1024
    assert lm.dtype == torch.float64 and lm.device.type == "cpu"
    assert not lm.model.training
    assert not any(p.requires_grad for p in lm.model.parameters())
    assert (
        lm.model.config._attn_implementation == GROUPED_SDPA
    )  # sdpa, grouped heads read once (core/modeling/attention.py)
    assert loaded.tokenizer("w5 w9").input_ids == [5, 9]
    assert messages and all(isinstance(m, str) for m in messages)


def test_unsharded_folder_casts_dtype_and_unions_eos_ids(tmp_path, tiny_target, tiny_folder):
    folder = copy_of(tiny_folder, tmp_path, "plain")
    generation = json.loads((folder / "generation_config.json").read_text())
    generation["eos_token_id"] = [7, 5, 7]
    (folder / "generation_config.json").write_text(json.dumps(generation))

    lm = load_model(str(folder), dtype="float32", device="cpu").lm

    assert lm.dtype == torch.float32
    assert lm.eos_token_ids == (7, 5, 0)  # generation config's ids first, then the tokenizer's, no repeats
    ids = [1, 4, 8]
    assert torch.allclose(logits(lm.model, ids).double(), logits(tiny_target.model, ids), atol=1e-4)


@pytest.mark.parametrize(
    ("generation_config", "expected"),
    [
        ("[7, 5]", (0,)),  # a list, not an object: its end tokens are lost, not the load
        ('{"eos_token_id": [500, 7, 64]}', (7, 0)),  # ids past the 64 rows of the head can never be sampled
    ],
)
def test_a_folder_s_end_tokens_are_the_ids_its_files_name_within_the_vocabulary(
    tmp_path, tiny_folder, generation_config, expected
):
    folder = copy_of(tiny_folder, tmp_path)
    (folder / "generation_config.json").write_text(generation_config)

    lm = load_model(str(folder), dtype="float32", device="cpu").lm

    assert lm.vocab_size == 64 and lm.eos_token_ids == expected


def test_a_folder_that_names_no_end_token_in_its_vocabulary_still_loads_and_says_so(tmp_path, tiny_folder, caplog):
    folder = copy_of(tiny_folder, tmp_path, "endless")
    for name, eos in (("config.json", 500), ("generation_config.json", [64, 65])):
        settings = json.loads((folder / name).read_text())
        settings["eos_token_id"] = eos
        (folder / name).write_text(json.dumps(settings))
    tokenizer_config = json.loads((folder / "tokenizer_config.json").read_text())
    del tokenizer_config["eos_token"]
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))

    with caplog.at_level("WARNING", logger="core.loading.load"):
        lm = load_model(str(folder), dtype="float32", device="cpu").lm

    assert lm.eos_token_ids == ()
    assert "endless names no token of its vocabulary that ends an answer" in caplog.text


def test_repo_id_is_found_in_the_local_hf_cache_only(tmp_path, tiny_folder, monkeypatch):
    import huggingface_hub.constants

    cache = tmp_path / "hub"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--someone--tiny-llama"
    shutil.copytree(tiny_folder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.chdir(tmp_path)  # so 'someone/tiny-llama' is not a relative path by accident

    lm = load_model("someone/tiny-llama", dtype="float64", device="cpu").lm
    assert lm.name == "someone/tiny-llama"

    with pytest.raises(ModelNotFoundError) as info:
        load_model("someone/not-downloaded", device="cpu")
    message = str(info.value)
    assert "someone/not-downloaded" in message and str(cache) in message and "hf download" in message


# ----------------------------------------------------------------------------------------------------------
# Settings


def test_dtype_and_device_settings():
    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32
    assert resolve_dtype("bfloat16", cpu) == torch.bfloat16
    assert resolve_dtype("float64", cpu) == torch.float64
    assert resolve_device("cpu") == cpu
    assert resolve_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("dtype", ["float8", "fp16", "", "int4"])
def test_bad_dtype_is_an_invalid_setting_even_before_the_path_is_looked_at(dtype):
    with pytest.raises(InvalidSettingError) as info:
        load_model("/no/such/model", dtype=dtype, device="cpu")
    assert repr(dtype) in str(info.value) and "bfloat16" in str(info.value)


@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:x"])
def test_bad_device_is_an_invalid_setting(device):
    with pytest.raises(InvalidSettingError) as info:
        load_model("/no/such/model", device=device)
    assert f"'{device}'" in str(info.value) and "cpu" in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_cuda_says_to_use_cpu():
    with pytest.raises(InvalidSettingError) as info:
        load_model("builtin", device="cuda")
    assert "device 'cuda'" in str(info.value) and "'cpu'" in str(info.value)


# ----------------------------------------------------------------------------------------------------------
# Errors: missing things


def test_missing_path(tmp_path):
    missing = tmp_path / "nowhere" / "model"
    with pytest.raises(ModelNotFoundError) as info:
        load_model(str(missing), device="cpu")
    assert str(missing) in str(info.value)
    assert isinstance(info.value, FileNotFoundError)  # callers may catch the builtin class too


def test_missing_gguf_file(tmp_path):
    with pytest.raises(ModelNotFoundError) as info:
        load_model(str(tmp_path / "model.gguf"), device="cpu")
    assert "model.gguf" in str(info.value)


def test_a_file_that_is_not_a_model(tmp_path):
    stray = tmp_path / "notes.txt"
    stray.write_text("hello")
    with pytest.raises(ModelNotFoundError) as info:
        load_model(str(stray), device="cpu")
    assert "notes.txt" in str(info.value) and "not a model folder" in str(info.value)


def test_folder_without_config(tmp_path, tiny_folder):
    folder = copy_of(tiny_folder, tmp_path)
    (folder / "config.json").unlink()
    with pytest.raises(ModelFormatError) as info:
        load_model(str(folder), device="cpu")
    assert "no config.json" in str(info.value) and str(folder) in str(info.value)


def test_folder_without_weights(tmp_path, tiny_folder):
    folder = copy_of(tiny_folder, tmp_path)
    (folder / "model.safetensors").unlink()
    with pytest.raises(ModelFormatError) as info:
        load_model(str(folder), device="cpu")
    assert "no weights" in str(info.value) and "model.safetensors" in str(info.value)


def test_folder_with_only_pickle_weights(tmp_path, tiny_folder):
    folder = copy_of(tiny_folder, tmp_path)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(ModelFormatError) as info:
        load_model(str(folder), device="cpu")
    assert "safetensors" in str(info.value) and ".bin" in str(info.value)


def test_index_naming_a_missing_shard(tmp_path, tiny_target):
    folder = save_tiny(tiny_target.model, tmp_path / "sharded", max_shard_size="40KB")
    shards = sorted(folder.glob("model-*.safetensors"))
    shards[-1].unlink()
    with pytest.raises(ModelFormatError) as info:
        load_model(str(folder), device="cpu")
    assert shards[-1].name in str(info.value) and "missing" in str(info.value)


def test_truncated_weights_are_called_damaged_before_any_weight_is_read(tmp_path, tiny_folder):
    folder = copy_of(tiny_folder, tmp_path)
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(
        DamagedModelError, match=r"model\.safetensors .* bytes shorter than its header says.*download it again"
    ):
        load_model(str(folder), device="cpu")
    weights.write_bytes(b"\x10")  # not even a header
    with pytest.raises(DamagedModelError, match="cut short"):
        load_model(str(folder), device="cpu")


@pytest.mark.parametrize(
    "damage, words",
    [
        ("drop", r"they lack model\.layers\.0\.mlp\.up_proj\.weight"),
        ("shape", r"model\.norm\.weight is stored as \[7\] where the config needs \[32\]"),
    ],
)
def test_weights_that_do_not_fill_the_model_are_refused_not_made_up(tmp_path, tiny_folder, damage, words):
    """A tensor the config needs that the files lack (a shard cut out of its index, a file edited by hand) was
    filled with random numbers by transformers, which only logged it: the model loaded and answered nonsense.
    A tensor of another shape was transformers' "ignore_mismatched_sizes" error. Both are now a damaged model,
    in words, naming the tensor."""
    from safetensors.torch import load_file, save_file

    folder = copy_of(tiny_folder, tmp_path)
    tensors = load_file(str(folder / "model.safetensors"))
    if damage == "drop":
        del tensors["model.layers.0.mlp.up_proj.weight"]
    else:
        tensors["model.norm.weight"] = torch.ones(7, dtype=torch.float64)
    save_file(tensors, str(folder / "model.safetensors"))
    with pytest.raises(DamagedModelError, match=words + r"\. The download is incomplete .*download the model again"):
        load_model(str(folder), device="cpu")


def test_invalid_config_json(tmp_path, tiny_folder):
    folder = copy_of(tiny_folder, tmp_path)
    (folder / "config.json").write_text("{ not json")
    with pytest.raises(ModelFormatError) as info:
        load_model(str(folder), device="cpu")
    assert "config.json" in str(info.value) and "not valid JSON" in str(info.value)


def test_folder_without_tokenizer(tmp_path, tiny_target):
    folder = save_tiny(tiny_target.model, tmp_path / "no-tokenizer", tokenizer=False)
    with pytest.raises(ModelFormatError) as info:
        load_model(str(folder), device="cpu")
    assert "tokenizer" in str(info.value)


@pytest.mark.parametrize("template", [7, [{"name": "default", "template": {"a": 1}}]])
def test_a_chat_template_that_is_not_text_is_refused_at_load(tmp_path, tiny_folder, template):
    """transformers loads any JSON value as the template; the first prompt then failed with jinja's TypeError,
    which the engine reported as its own bug."""
    folder = copy_of(tiny_folder, tmp_path)
    settings = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "chat_template": template}))
    with pytest.raises(ModelFormatError, match="the chat template of model is not text .*download the model's"):
        load_model(str(folder), device="cpu")


@pytest.mark.parametrize("file", ["config.json", "model.safetensors"])
def test_a_model_file_nested_thousands_deep_is_refused_in_words_at_import_and_load(tmp_path, tiny_folder, file):
    """JSON nested deeper than Python's recursion limit was a RecursionError out of the import and the load."""
    from core.models.importing import check_model_folder

    folder = copy_of(tiny_folder, tmp_path)
    deep = b'{"model_type": "llama", "x": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    if file == "model.safetensors":  # the header of a safetensors file is JSON too
        deep = len(deep).to_bytes(8, "little") + deep
    (folder / file).write_bytes(deep)
    for check in (lambda: check_model_folder(folder), lambda: load_model(str(folder), device="cpu")):
        with pytest.raises(ModelFormatError, match="damaged|not valid JSON|cannot be read as a safetensors"):
            check()


def test_unsupported_architecture_fails_before_any_weight_is_read(tmp_path):
    folder = tmp_path / "gpt2-ish"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 2}))
    (folder / "model.safetensors").write_bytes(b"garbage: reading this would be a ModelFormatError")
    with pytest.raises(UnsupportedArchitectureError) as info:
        load_model(str(folder), device="cpu")
    assert "gpt2" in str(info.value) and "llama" in str(info.value)


def test_a_config_of_another_layer_count_is_refused_before_the_model_is_built(tmp_path, tiny_folder):
    """A settings file of another model, or one claiming a billion layers (which transformers would build before
    comparing a weight), is refused from the weights' headers, at import and at load."""
    from core.models.importing import check_model_folder

    folder = copy_of(tiny_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10**9}))
    expected = "says it has 1000000000 layers, but its weights hold 2: the settings belong to another model"
    with pytest.raises(ModelFormatError, match=expected):
        check_model_folder(folder)
    with pytest.raises(ModelFormatError, match=expected):
        load_model(str(folder), device="cpu")


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        (
            {"intermediate_size": 10**7},
            "gives intermediate_size as 10,000,000, but its weights hold model.layers.0.mlp.up_proj.weight as [64, 32]",
        ),
        (
            {"hidden_size": 100_000},
            "gives hidden_size as 100,000, but its weights hold model.embed_tokens.weight as [64, 32]",
        ),
        (
            {"vocab_size": 10**7},
            "gives vocab_size as 10,000,000, but its weights hold model.embed_tokens.weight as [64, 32]",
        ),
        (
            {"head_dim": 16},
            "gives 4 attention heads of width 16 for model.layers.0.self_attn.q_proj.weight, but "
            "its weights hold it as [32, 32]",
        ),
        (
            {"num_key_value_heads": 1},
            "gives 1 key-value head of width 8 for model.layers.0.self_attn.k_proj.weight, "
            "but its weights hold it as [16, 32]",
        ),
    ],
)
def test_config_sizes_other_than_the_weights_are_refused_before_the_model_is_built(tmp_path, tiny_folder, sizes, said):
    """transformers builds the model config.json describes before it compares a weight: an intermediate_size
    a thousand times too large asked for 15 GB for this model of kilobytes. The sizes are compared with the
    weights' headers first, at import and at load (core.modeling.config_shapes)."""
    from core.models.importing import check_model_folder

    folder = copy_of(tiny_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **sizes}))
    expected = (
        f"the model's settings file config.json in model {said}: the settings belong to another model; copy or "
        "download the model's config.json again"
    )
    for attempt in (lambda: check_model_folder(folder), lambda: load_model(str(folder), device="cpu")):
        with pytest.raises(ModelFormatError) as info:
            attempt()
        assert str(info.value) == expected


def test_a_mixture_of_experts_config_counts_its_experts_in_the_weights(tmp_path):
    """Qwen3-MoE's num_experts against the experts the first layer's tensors number, its moe_intermediate_size
    against the first expert's up projection."""
    from safetensors.numpy import save_file

    from core.modeling.model_format import check_weight_format

    folder = tmp_path / "moe"
    folder.mkdir()
    tensors = {"model.embed_tokens.weight": np.zeros((64, 32), np.float16)}
    for expert in range(4):
        for part, shape in (("gate_proj", (16, 32)), ("up_proj", (16, 32)), ("down_proj", (32, 16))):
            tensors[f"model.layers.0.mlp.experts.{expert}.{part}.weight"] = np.zeros(shape, np.float16)
    save_file(tensors, str(folder / "model.safetensors"))
    config = {
        "model_type": "qwen3_moe",
        "num_hidden_layers": 1,
        "hidden_size": 32,
        "vocab_size": 64,
        "num_experts": 4,
        "moe_intermediate_size": 16,
    }
    for changed, said in (
        ({}, None),
        ({"num_experts": 4_000}, "says each layer has 4,000 experts, but its weights hold 4 in the first layer"),
        (
            {"moe_intermediate_size": 10**6},
            "gives moe_intermediate_size as 1,000,000, but its weights hold "
            "model.layers.0.mlp.experts.0.up_proj.weight as [16, 32]",
        ),
    ):
        (folder / "config.json").write_text(json.dumps({**config, **changed}))
        if said is None:
            assert check_weight_format(folder) is None
            continue
        with pytest.raises(ModelFormatError, match=re.escape(said)):
            check_weight_format(folder)


def test_a_fused_gate_and_up_projection_is_twice_the_config_s_width(tmp_path):
    """GLM-4 keeps its MLP's gate and up projections in one tensor, gate_up_proj, of 2 x intermediate_size rows:
    its real width passes and a settings file claiming another is refused before the model is built."""
    from safetensors.numpy import save_file

    from core.modeling.model_format import check_weight_format

    folder = tmp_path / "glm4"
    folder.mkdir()
    tensors = {
        "model.embed_tokens.weight": np.zeros((64, 32), np.float16),
        "model.layers.0.mlp.gate_up_proj.weight": np.zeros((128, 32), np.float16),
        "model.layers.0.mlp.down_proj.weight": np.zeros((32, 64), np.float16),
    }
    save_file(tensors, str(folder / "model.safetensors"))
    config = {"model_type": "glm4", "num_hidden_layers": 1, "hidden_size": 32, "vocab_size": 64}
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 64}))
    assert check_weight_format(folder) is None
    (folder / "config.json").write_text(json.dumps({**config, "intermediate_size": 128}))
    said = "gives intermediate_size as 128, but its weights hold model.layers.0.mlp.gate_up_proj.weight as [128, 32]"
    with pytest.raises(ModelFormatError, match=re.escape(said)):
        check_weight_format(folder)


@pytest.mark.parametrize(
    "change, words",
    [
        ({"num_attention_heads": 0}, "gives num_attention_heads as 0, which no model has"),  # transformers divides
        ({"hidden_size": -32}, "gives hidden_size as -32, which no model has"),  # torch.empty(-32): a traceback
        ({"vocab_size": 0}, "gives vocab_size as 0, which no model has"),
        ({"max_position_embeddings": "lots"}, "gives max_position_embeddings as 'lots', which no model has"),
        ({"num_key_value_heads": 3}, "has 4 attention heads and 3 key-value heads, which no model has"),
        ({"rms_norm_eps": -1}, "gives rms_norm_eps as -1, which no model has"),
        ({"rope_parameters": {"rope_type": "default", "rope_theta": float("nan")}}, "rope_parameters.rope_theta"),
        # GLM-4's rotary share of each head: transformers sized a range by it (-1: a RuntimeError blamed on the
        # weights; 5, more than the head, loaded)
        (
            {"rope_parameters": {"rope_type": "default", "rope_theta": 1e4, "partial_rotary_factor": -1}},
            "gives rope_parameters.partial_rotary_factor as -1, which no model has",
        ),
        ({"partial_rotary_factor": 5}, "gives partial_rotary_factor as 5, which no model has"),
        ({"quantization_config": False}, "gives quantization_config as False, where a model has a group of settings"),
    ],
)
@pytest.mark.parametrize("offload", ["off", "on"])
def test_a_config_with_sizes_no_model_has_is_refused_in_words_at_import_and_load(
    tmp_path, tiny_folder, change, words, offload
):
    """Each of these reached transformers or torch and came back as its own error (a ZeroDivisionError blamed
    on the tokenizer where the offloaded loader read the tokenizer first, a RuntimeError traceback) or, for a
    NaN rotary base, as an answer of garbage."""
    from core.models.importing import check_model_folder

    folder = copy_of(tiny_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    assert config["num_attention_heads"] == 4 and "rope_theta" in config["rope_parameters"]  # what the cases change
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ModelFormatError, match="copy or download the model's config.json again") as info:
        check_model_folder(folder)
    assert words in str(info.value)
    with pytest.raises(ModelFormatError, match="copy or download the model's config.json again") as info:
        load_model(str(folder), device="cpu", offload=OffloadSettings(mode=offload))
    assert words in str(info.value)


@pytest.mark.parametrize(
    "change, words",
    [
        ({"dtype": "float128"}, "float128"),
        ({"use_cache": 100000}, "Field 'use_cache' expected bool, got int"),  # transformers 5 says it in 2 lines
        ({"hidden_act": "int8"}, "names the activation 'int8', which transformers does not have"),  # was a KeyError
    ],
)
def test_a_config_transformers_cannot_read_is_blamed_on_the_config_not_the_tokenizer(
    tmp_path, tiny_folder, change, words
):
    folder = copy_of(tiny_folder, tmp_path)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    for offload in ("off", "on"):  # the offloaded and 4-bit loaders read the tokenizer before their weights
        with pytest.raises(ModelFormatError, match="transformers cannot read the config of model") as info:
            load_model(str(folder), device="cpu", offload=OffloadSettings(mode=offload))
        message = str(info.value)
        assert words in message and message.endswith("copy or download the model's config.json again")
        assert "tokenizer" not in message and "\n" not in message


def test_a_draft_that_scores_more_tokens_than_its_target_is_refused(tmp_path):
    """Same tokenizer, but the draft has 64 rows and the target 40: the draft could propose a token the
    target's embedding has no row for. The other way round is a working pair (tests/test_generation.py)."""
    from conftest import make_tiny_llama
    from core.loading.pair import load_pair

    small = save_tiny(make_tiny_llama(0, vocab=40).model, tmp_path / "small")
    large = save_tiny(make_tiny_llama(1, vocab=64).model, tmp_path / "large")
    settings = OffloadSettings(mode="off")
    with pytest.raises(TokenizerMismatchError, match="scores 64 tokens and the target .* only 40"):
        load_pair(str(small), str(large), offload=settings, device="cpu")
    target, draft = load_pair(str(large), str(small), offload=settings, device="cpu")
    assert (target.lm.vocab_size, draft.lm.vocab_size) == (64, 40)


def test_a_model_with_recurrent_layers_is_told_why_at_load(tmp_path):
    folder = tmp_path / "qwen3-next"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_next", "num_hidden_layers": 4}))
    with pytest.raises(UnsupportedArchitectureError, match="each branch of the tree would need its own copy"):
        load_model(str(folder), device="cpu")


def test_all_errors_are_spec_exec_errors():
    for cls in (
        ModelNotFoundError,
        ModelFormatError,
        UnsupportedArchitectureError,
        InvalidSettingError,
        TokenizerMismatchError,
    ):
        assert issubclass(cls, SpecExecError)


# ----------------------------------------------------------------------------------------------------------
# GGUF


def write_tiny_gguf(
    path: Path,
    architecture: str = "llama",
    seed: int = 0,
    leave_out: str | None = None,
    sizes: dict[str, int] | None = None,
) -> dict[str, np.ndarray]:
    """A tiny float32 GGUF (2 layers, vocab 64, byte-level BPE tokenizer), without the tensor `leave_out` if
    given, its metadata giving `sizes` (block_count, embedding_length, ...) instead of the tensors' own where
    given; returns the tensors written."""
    import gguf

    vocab, hidden, layers, inter, heads, kv_heads = VOCAB, 32, 2, 64, 4, 2
    said = {
        "context_length": 256,
        "embedding_length": hidden,
        "block_count": layers,
        "feed_forward_length": inter,
        "head_count": heads,
        "head_count_kv": kv_heads,
        "vocab_size": vocab,
        **(sizes or {}),
    }
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_name("tiny test model")
    for key, value in said.items():
        getattr(writer, f"add_{key}")(value)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    tokens = ["</s>", "<s>", "<unk>"] + [chr(ord("a") + i) for i in range(26)] + [f"t{i}" for i in range(vocab - 29)]
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(tokens)
    writer.add_token_types([3, 3, 2] + [1] * (vocab - 3))
    writer.add_token_scores([0.0] * vocab)
    writer.add_token_merges([])
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(0)
    writer.add_unk_token_id(2)
    rng = np.random.default_rng(seed)
    tensors: dict[str, np.ndarray] = {}

    def add(name, shape):
        tensors[name] = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        if name != leave_out:
            writer.add_tensor(name, tensors[name])

    add("token_embd.weight", (vocab, hidden))
    add("output_norm.weight", (hidden,))
    add("output.weight", (vocab, hidden))
    kv = kv_heads * hidden // heads
    for i in range(layers):
        for name, shape in [
            ("attn_norm", (hidden,)),
            ("ffn_norm", (hidden,)),
            ("attn_q", (hidden, hidden)),
            ("attn_k", (kv, hidden)),
            ("attn_v", (kv, hidden)),
            ("attn_output", (hidden, hidden)),
            ("ffn_gate", (inter, hidden)),
            ("ffn_up", (inter, hidden)),
            ("ffn_down", (hidden, inter)),
        ]:
            add(f"blk.{i}.{name}.weight", shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return tensors


def test_gguf_file_loads_dequantised_into_a_plain_model(tmp_path):
    path = tmp_path / "tiny-q.gguf"
    tensors = write_tiny_gguf(path)

    loaded = load_model(str(path), device="cpu")

    lm = loaded.lm
    assert lm.name == "tiny-q"
    assert lm.eos_token_ids == (0,)
    assert lm.max_context == 256
    assert lm.vocab_size == VOCAB and len(lm.decoder_layers) == 2
    assert lm.dtype == torch.float32 and not lm.model.training
    assert lm.model.config._attn_implementation == GROUPED_SDPA
    assert type(lm.model.model.layers[0].mlp.down_proj) is torch.nn.Linear
    assert torch.equal(lm.model.model.embed_tokens.weight, torch.from_numpy(tensors["token_embd.weight"]))
    assert torch.equal(
        lm.model.model.layers[1].mlp.down_proj.weight, torch.from_numpy(tensors["blk.1.ffn_down.weight"])
    )
    assert loaded.tokenizer.eos_token_id == 0


def test_a_gguf_without_a_tensor_its_metadata_needs_is_refused_not_made_up(tmp_path):
    """As for a folder: transformers filled the missing layer with random numbers, and the file answered."""
    path = tmp_path / "cut.gguf"
    write_tiny_gguf(path, leave_out="blk.1.ffn_up.weight")
    with pytest.raises(
        DamagedModelError, match=r"cut\.gguf .* do not match its own metadata: they lack model\.layers\.1"
    ):
        load_model(str(path), device="cpu")


def test_gguf_with_an_unsupported_architecture(tmp_path):
    path = tmp_path / "other.gguf"
    write_tiny_gguf(path, architecture="gpt2")
    with pytest.raises(UnsupportedArchitectureError) as info:
        load_model(str(path), device="cpu")
    assert "gpt2" in str(info.value)


def test_file_named_gguf_that_is_not_one(tmp_path):
    path = tmp_path / "fake.gguf"
    path.write_bytes(b"this is not a gguf file at all" * 10)
    with pytest.raises(ModelFormatError) as info:
        load_model(str(path), device="cpu")
    assert "fake.gguf" in str(info.value) and "GGUF" in str(info.value)


def test_folder_holding_one_gguf_means_that_file(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "m.Q4_0.gguf").write_bytes(b"GGUF")
    kind, path, name = resolve_spec(str(tmp_path / "repo"))
    assert (kind, path.name, name) == ("gguf", "m.Q4_0.gguf", "repo")
    (tmp_path / "repo" / "m.Q8_0.gguf").write_bytes(b"GGUF")
    with pytest.raises(ModelFormatError) as info:
        resolve_spec(str(tmp_path / "repo"))
    assert "m.Q4_0.gguf" in str(info.value) and "m.Q8_0.gguf" in str(info.value)


# ----------------------------------------------------------------------------------------------------------
# Tokenizer agreement between draft and target


def test_identical_tokenizers_pass():
    check_same_tokenizer(make_tokenizer(), make_tokenizer(), "target-7b", "draft-1b")
    tok = make_tokenizer()
    check_same_tokenizer(tok, tok, "a", "a")


def test_different_token_is_reported_with_its_id():
    with pytest.raises(TokenizerMismatchError) as info:
        check_same_tokenizer(make_tokenizer(), make_tokenizer(swap=(17, "zebra")), "big-target", "small-draft")
    message = str(info.value)
    assert "big-target" in message and "small-draft" in message
    assert "id 17" in message and "'w17'" in message and "'zebra'" in message


def test_different_vocab_sizes_are_reported():
    with pytest.raises(TokenizerMismatchError) as info:
        check_same_tokenizer(make_tokenizer(size=64), make_tokenizer(size=80), "t", "d")
    assert "64" in str(info.value) and "80" in str(info.value) and "vocab" in str(info.value)


def test_different_special_token_ids_are_reported():
    with pytest.raises(TokenizerMismatchError) as info:
        check_same_tokenizer(make_tokenizer(), make_tokenizer(eos="w3"), "t", "d")
    assert "eos" in str(info.value) and "0" in str(info.value) and "3" in str(info.value)


def test_a_gguf_load_parses_the_file_once_and_leaves_gguf_as_it_was(tmp_path, monkeypatch):
    """transformers reads a GGUF file for its config, its tokenizer and its weights: the load parses it once
    (a 49k-token vocabulary takes ~10 s a parse), and gguf's own names are back in place afterwards."""
    import gguf

    path = tmp_path / "tiny-q.gguf"
    write_tiny_gguf(path)
    parsed: list[str] = []
    real_reader = gguf.GGUFReader

    def counting_reader(file, mode="r"):
        parsed.append(str(file))
        return real_reader(file, mode)

    monkeypatch.setattr(gguf, "GGUFReader", counting_reader)
    real_map = gguf.get_tensor_name_map
    loaded = load_model(str(path), device="cpu")
    assert parsed == [str(path)], parsed
    assert loaded.lm.vocab_size == VOCAB and loaded.tokenizer.eos_token_id == 0
    assert gguf.GGUFReader is counting_reader and gguf.get_tensor_name_map is real_map
