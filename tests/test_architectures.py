"""Every model family the engine runs: its own decoder loop (core.modeling.causal_lm) gives the model's own
logits, on a causal prompt and on a tree, and the size arithmetic the fit and the speed model use counts its
parameters as the model has them.

The engine never calls a model's forward: it runs embed -> decoder layers -> norm -> lm_head itself, with its
own masks, positions and KV cache, so a family whose layers wanted something else (another mask, scaled
embeddings, capped logits) would decode plausible but wrong text. Each family is checked here in float64 on a
tiny model with random weights; norms and biases are perturbed so that none is the identity. Two variants add
what releases configure beyond a family's defaults: scaled rotary positions and tied embeddings.
"""

from __future__ import annotations

import json

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    LlamaConfig,
    MistralConfig,
    MixtralConfig,
    Qwen2Config,
    Qwen2MoeConfig,
    Qwen3Config,
    Qwen3MoeConfig,
)

from core.errors import InvalidSettingError
from core.modeling.causal_lm import CausalLM
from core.modeling.families import SUPPORTED_MODEL_TYPES, attention_window
from core.modeling.tree_mask import additive_mask, ancestor_matrix, causal_visibility
from core.planning.sizes import ModelShape
from conftest import run_cli
from test_loading import make_tokenizer
from test_offload import COMMON, CONFIGS  # one tiny config per family, as the offload tests build them

# the same families as their releases configure them: Llama 3's rope scaling and Llama 3.2's tied embeddings,
# Qwen3's YaRN for long contexts (rotary_emb computes them; the loop passes its output to every layer)
VARIANTS = {
    "llama-3.2": lambda: LlamaConfig(
        **COMMON,
        tie_word_embeddings=True,
        rope_parameters={
            "rope_type": "llama3",
            "rope_theta": 500000.0,
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    ),
    "qwen3-yarn": lambda: Qwen3Config(
        **{**COMMON, "max_position_embeddings": 32},
        rope_parameters={
            "rope_type": "yarn",
            "rope_theta": 10000.0,
            "factor": 4.0,
            "original_max_position_embeddings": 8,
        },
    ),
}
CASES = {**CONFIGS, **VARIANTS}
PROMPT = [1, 7, 22, 3, 40, 9, 13]


def test_every_supported_family_is_checked_here():
    assert set(CONFIGS) == set(SUPPORTED_MODEL_TYPES)


def tiny(case: str) -> CausalLM:
    torch.manual_seed(0)
    # transformers' grouped-matmul experts take no float64; the eager ones compute the same sum
    model = AutoModelForCausalLM.from_config(
        CASES[case](), dtype=torch.float64, attn_implementation="sdpa", experts_implementation="eager"
    ).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                parameter.add_(0.1 * torch.randn_like(parameter))
    return CausalLM(model=model, name=case, eos_token_ids=(0,), max_context=256)


def own_logits(lm: CausalLM, ids: list[int]) -> torch.Tensor:
    """The model's own forward over `ids` from an empty cache: logits [len(ids), V]."""
    with torch.no_grad():
        return lm.model(torch.tensor([ids])).logits[0]


@pytest.mark.parametrize("case", CASES)
def test_the_decoder_loop_gives_the_model_s_own_logits(case):
    lm = tiny(case)
    cache = lm.new_cache()
    first = lm.forward(
        torch.tensor(PROMPT[:5]), torch.arange(5), additive_mask(causal_visibility(0, 5, "cpu"), lm.dtype), cache
    )
    after = lm.forward(  # two more on top of the cache
        torch.tensor(PROMPT[5:]), torch.arange(5, 7), additive_mask(causal_visibility(5, 2, "cpu"), lm.dtype), cache
    )
    torch.testing.assert_close(torch.cat([first, after]), own_logits(lm, PROMPT), rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_each_row_of_a_tree_gives_the_logits_of_its_own_path(case):
    """A tree of 5 nodes on a cached prompt (two branches from the prompt's end, one two deep, one with two
    children): each node's logits are the model's own after the prompt and that node's path alone."""
    lm = tiny(case)
    tokens, parents = [30, 31, 32, 33, 34], torch.tensor([-1, 0, -1, 2, 2])
    depths = torch.tensor([0, 1, 0, 1, 1])
    cache = lm.new_cache()
    prefix = len(PROMPT)
    lm.forward(
        torch.tensor(PROMPT), torch.arange(prefix), additive_mask(causal_visibility(0, prefix, "cpu"), lm.dtype), cache
    )
    visible = torch.cat([torch.ones(len(tokens), prefix, dtype=torch.bool), ancestor_matrix(parents)], dim=1)
    scored = lm.forward(torch.tensor(tokens), prefix + depths, additive_mask(visible, lm.dtype), cache)
    for node, token in enumerate(tokens):
        path = [token]
        parent = int(parents[node])
        while parent >= 0:
            path.insert(0, tokens[parent])
            parent = int(parents[parent])
        torch.testing.assert_close(scored[node], own_logits(lm, PROMPT + path)[-1], rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_the_size_arithmetic_counts_the_model_s_parameters(case):
    """ModelShape reads each family's config (Qwen's MoE configs name their experts and widths their own way)
    and counts every parameter but the few small vectors it leaves out: norms, biases and routers."""
    config = CASES[case]()
    model = AutoModelForCausalLM.from_config(config)
    small = ("norm", "bias", "mlp.gate.", "shared_expert_gate")
    counted = sum(p.numel() for name, p in model.named_parameters() if not any(part in name for part in small))
    shape = ModelShape.from_config(config)
    assert shape.parameters == counted
    # a config.json as a mapping (the catalog, an imported folder), in transformers' names and in the names the
    # models' own files use where transformers maps them (Qwen3-MoE's files say num_experts)
    as_files_name = {attribute: name for name, attribute in config.attribute_map.items()}
    assert ModelShape.from_config(config.to_dict()) == shape
    assert ModelShape.from_config({as_files_name.get(k, k): v for k, v in config.to_dict().items()}) == shape


@pytest.mark.parametrize("family", ["qwen3_moe", "olmo2", "glm4"])
def test_a_newer_family_s_folder_decodes_with_specexec_the_tokens_sequential_decoding_gives(tmp_path, capsys, family):
    """The newest families end to end: folders loaded by the real loader (Qwen3-MoE through transformers' own
    experts kernel), in float32, a draft of the same shape with other weights, `specexec generate`: same seed,
    same tokens."""
    folders = {}
    for role, seed in (("target", 0), ("draft", 1)):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(CONFIGS[family](), dtype=torch.float32)
        folders[role] = tmp_path / role
        model.save_pretrained(folders[role])
        make_tokenizer().save_pretrained(folders[role])
    tokens = {}
    for method in ("specexec", "sequential"):
        result = run_cli(
            capsys,
            "generate",
            "--target",
            str(folders["target"]),
            "--draft",
            str(folders["draft"]),
            "--prompt",
            "w5 w9 w12",
            "--method",
            method,
            "--dtype",
            "float32",
            "--device",
            "cpu",
            "--temperature",
            "1",
            "--seed",
            "3",
            "--max-new-tokens",
            "16",
            "--budget",
            "8",
            "--json",
        )
        assert result.returncode == 0, result.stderr
        tokens[method] = json.loads(result.stdout)["token_ids"]
    assert tokens["specexec"] == tokens["sequential"] and len(tokens["sequential"]) > 0


WINDOWS = {  # a config as releases write it -> the tokens its sliding-window layers see (None: the whole context)
    "mistral-7b-v0.1": (lambda: MistralConfig(**COMMON, sliding_window=4096), 4096),
    "mistral-7b-v0.2": (lambda: MistralConfig(**COMMON, sliding_window=None), None),
    "mixtral": (lambda: MixtralConfig(**COMMON), None),
    "llama": (lambda: LlamaConfig(**COMMON), None),
    "qwen2.5": (lambda: Qwen2Config(**COMMON, use_sliding_window=False, sliding_window=131072), None),
    "qwen2-window-on": (
        lambda: Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=1024, max_window_layers=2),
        1024,
    ),
    "qwen2-moe": (lambda: Qwen2MoeConfig(**COMMON), None),  # its configs say sliding_window 0
    "qwen3": (lambda: Qwen3Config(**COMMON, use_sliding_window=False, sliding_window=4096), None),
    "qwen3-moe-window-on": (lambda: Qwen3MoeConfig(**COMMON, use_sliding_window=True, sliding_window=512), 512),
}


@pytest.mark.parametrize("case", WINDOWS)
def test_attention_window_reads_each_family_s_config(case):
    make, window = WINDOWS[case]
    assert attention_window(make()) == window


def test_a_sliding_window_model_s_context_ends_where_the_engine_stops_being_the_model(tmp_path, capsys):
    """Mistral 7B v0.1's layers see the last 4,096 tokens; the engine's see the whole context. Here the window is
    12 tokens: the loaded model's context is 12 (streamed from host RAM too), at 12 tokens the engine's logits
    are the model's own on every row, at 13 the model's last row (which sees tokens 1-12) is not the engine's,
    and a longer prompt or context is refused in words instead of answered by another model."""
    from core.loading.load import load_model
    from core.offload import load_offloaded

    window = 12
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(MistralConfig(**COMMON, sliding_window=window), dtype=torch.float64)
    model.save_pretrained(tmp_path / "mistral")
    make_tokenizer().save_pretrained(tmp_path / "mistral")
    loaded = load_model(str(tmp_path / "mistral"), dtype="float64", device="cpu")
    assert loaded.lm.max_context == window
    offloaded = load_offloaded(str(tmp_path / "mistral"), "cpu", torch.float64, resident_layers=1, stream_on_cpu=True)
    assert offloaded.max_context == window  # the streaming loader reads the same limit
    with pytest.raises(InvalidSettingError, match="longer than mistral supports: use at most 12 tokens"):
        load_model(str(tmp_path / "mistral"), dtype="float64", device="cpu", context_length=64)
    ids = [(7 * i + 3) % 60 + 3 for i in range(window + 1)]
    lm = loaded.lm
    ours = lm.forward(
        torch.tensor(ids),
        torch.arange(len(ids)),
        additive_mask(causal_visibility(0, len(ids), "cpu"), lm.dtype),
        lm.new_cache(),
    )
    reference = AutoModelForCausalLM.from_pretrained(  # transformers' own attention, which applies the window
        tmp_path / "mistral", dtype=torch.float64, attn_implementation="sdpa"
    ).eval()
    with torch.no_grad():
        theirs = reference(torch.tensor([ids])).logits[0]
    torch.testing.assert_close(ours[:window], theirs[:window], rtol=0, atol=1e-12)
    assert (ours[window] - theirs[window]).abs().max() > 1e-6
    prompt = " ".join(f"w{i}" for i in ids)
    result = run_cli(
        capsys, "generate", "--target", str(tmp_path / "mistral"), "--prompt", prompt, "--method", "sequential"
    )
    assert result.returncode == 2 and "context window is 12 tokens" in result.stderr, result.stderr
