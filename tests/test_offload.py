"""Offloading: the streaming plan, residency planning, the host store, and offloaded models against the
same models in memory (logits and SpecExec tokens). Everything runs on the CPU; the ring runs there with
synchronous copies (`stream_on_cpu`), so slot reuse is checked end to end by the logits."""

from __future__ import annotations

import dataclasses
import itertools
import json

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
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

from core.modeling.causal_lm import CausalLM
from core.decoding.decode_state import DecodeState
from core.errors import (
    InsufficientHostMemoryError,
    InsufficientVRAMError,
    InvalidSettingError,
    ModelFormatError,
    ModelNotFoundError,
    UnsupportedArchitectureError,
)
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
from core.decoding.methods.specexec import specexec_steps
from core.offload import OffloadedLM, OffloadReport, load_offloaded
from core.offload.layout import LAYER_ALIGN, layer_layout
from core.planning.residency import (
    activation_bytes,
    config_kv_bytes,
    default_vram_budget,
    fit_default_budget,
    kv_cache_bytes,
    plan_residency,
    spread_layers,
)
from core.loading.offload_settings import OffloadSettings
from core.offload.schedule import Compute, Copy, check_plan, pass_timeline, plan_pass, plan_prefetch, streamed_layers
from core.planning.host_memory import check_host_memory
from core.offload.pin_budget import PinBudget
from core.offload.weight_store import HostWeightStore
from core.modeling.tree_mask import additive_mask, causal_visibility

from conftest import make_word_tokenizer


pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- the plan ------------------------------------------------------------------------------------------


def test_plan_pass_order_and_slots():
    assert plan_pass(5, (2,), 2) == (
        Copy(0, 0),
        Copy(1, 1),
        Compute(0, 0),
        Copy(3, 0),
        Compute(1, 1),
        Copy(4, 1),
        Compute(2, None),
        Compute(3, 0),
        Compute(4, 1),
    )
    # after a prefetch the leading copies are already in flight
    assert plan_prefetch(5, (2,), 2) == (Copy(0, 0), Copy(1, 1))
    assert plan_pass(5, (2,), 2, prefetched=2)[:2] == (Compute(0, 0), Copy(3, 0))
    # everything resident: no copies at all
    assert plan_pass(3, (0, 1, 2), 2) == (Compute(0, None), Compute(1, None), Compute(2, None))


@pytest.mark.parametrize("n_layers", [1, 2, 5, 8])
@pytest.mark.parametrize("n_slots", [1, 2, 3, 4])
def test_plans_are_safe_across_passes_with_prefetch(n_layers, n_slots):
    for count in range(n_layers + 1):
        for resident in itertools.combinations(range(n_layers), count):
            streamed = streamed_layers(n_layers, resident)
            loaded = None
            for prefetch in (False, True, True):  # pass without prefetch, then passes after a prefetch
                prefetched = len(plan_prefetch(n_layers, resident, n_slots)) if loaded else 0
                check_plan(plan_pass(n_layers, resident, n_slots, prefetched), n_layers, loaded)
                loaded = {c.slot: c.layer for c in plan_prefetch(n_layers, resident, n_slots)} if prefetch else None
            if streamed:
                assert {c.slot for c in plan_pass(n_layers, resident, n_slots) if isinstance(c, Copy)} == set(
                    range(min(n_slots, len(streamed)))
                )


def test_check_plan_rejects_overwriting_a_slot_before_its_compute():
    bad = (Copy(0, 0), Copy(1, 0), Compute(0, 0), Compute(1, 0))
    with pytest.raises(ValueError, match="overwrites layer 0"):
        check_plan(bad, 2)
    with pytest.raises(ValueError, match="computed from slot"):
        check_plan((Copy(0, 0), Compute(1, 0)), 2)


def test_timeline_copy_bound_compute_bound_and_prefetch():
    plan = plan_pass(4, (), 2)
    # copy-bound: the pass ends one compute after the last copy
    assert pass_timeline(plan, [1.0] * 4, [0.5] * 4) == pytest.approx(4.5)
    # compute-bound: one copy, then back-to-back computes
    assert pass_timeline(plan, [0.5] * 4, [1.0] * 4) == pytest.approx(4.5)
    # prefetched during the draft: the first two copies are off the critical path
    prefetched = plan_pass(4, (), 2, prefetched=2)
    assert pass_timeline(prefetched, [1.0] * 4, [0.5] * 4, ready={0: 0.0, 1: 0.0}) == pytest.approx(3.0)
    # a resident layer in the middle costs no copy and its compute hides under the others' copies
    assert pass_timeline(plan_pass(5, (2,), 2), [1.0] * 5, [0.5] * 5) == pytest.approx(4.5)


# --- residency ----------------------------------------------------------------------------------------


def test_spread_layers():
    assert spread_layers(10, 3) == (1, 5, 8)
    assert spread_layers(4, 4) == (0, 1, 2, 3)
    assert spread_layers(5, 0) == ()
    assert spread_layers(80, 20)[:3] == (2, 6, 10)


def test_plan_residency_under_budget():
    layers = [100] * 10
    plan = plan_residency(layers, budget_bytes=50 + 2 * 100 + 300, fixed_bytes=50, n_slots=2)
    assert len(plan.resident) == 3 and plan.n_slots == 2
    assert plan.streamed_bytes_per_pass == 700 and plan.device_bytes == 550
    assert len(plan_residency(layers, 549, 50, 2).resident) == 2
    everything = plan_residency(layers, 1050, 50, 2)
    assert (
        everything.resident == tuple(range(10)) and everything.n_slots == 0 and everything.streamed_bytes_per_pass == 0
    )
    assert plan_residency(layers, None, 0, 2, resident_layers=4).resident == (1, 3, 6, 8)
    assert "3/10 layers resident" in plan.summary()


def test_plan_residency_errors():
    with pytest.raises(InsufficientVRAMError, match="Lower the tree budget"):
        plan_residency([100] * 10, 200, fixed_bytes=50, n_slots=2)
    with pytest.raises(InsufficientVRAMError, match="use fewer resident layers"):
        plan_residency([100] * 10, 500, fixed_bytes=50, n_slots=2, resident_layers=5)
    with pytest.raises(InvalidSettingError, match="'auto' or a count"):
        plan_residency([100] * 10, 500, resident_layers="most")
    with pytest.raises(InvalidSettingError, match="at least 1 slot"):
        plan_residency([100] * 10, 500, n_slots=0)


def test_default_budget_is_free_vram_minus_draft_caches_activations_and_margin():
    assert default_vram_budget(1000, 100, 50, 20, 30, margin_bytes=10) == 790
    assert kv_cache_bytes(2, 8, 128, 300, 2) == 2 * 2 * 8 * 300 * 128 * 2  # preallocated rows, no doubling
    config = LlamaConfig(
        hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2, vocab_size=100
    )
    assert activation_bytes(config, 2048, 4096, 2) > activation_bytes(config, 64, 4096, 2)


def _default_budget(config, free, tree, draft_weights=10**6, draft_kv=10**5):
    """default_vram_budget spelled out for a tree of `tree` tokens and a 4096-token context (fp16)."""
    return default_vram_budget(
        free,
        draft_weights,
        config_kv_bytes(config, 4096 + tree + 1, 2),
        draft_kv,
        activation_bytes(config, tree, 4096, 2),
    )


def test_default_budget_lowers_the_tree_until_the_minimum_fits():
    config = LlamaConfig(
        hidden_size=1024,
        intermediate_size=4096,
        num_attention_heads=8,
        num_key_value_heads=8,
        num_hidden_layers=4,
        vocab_size=32000,
    )
    minimum = 200 * 1024**2
    fit = lambda free, tree: fit_default_budget(config, free, 2, 4096, 10**6, 10**5, minimum, tree)  # noqa: E731
    # plenty of VRAM: the requested tree, and exactly the default budget
    roomy = fit(64 * 1024**3, 2048)
    assert not roomy.lowered and roomy.tree_budget == 2048
    assert roomy.budget_bytes == _default_budget(config, 64 * 1024**3, 2048)
    # just too little for 2048 tokens of activations: the tree is halved until the minimum fits
    free = minimum - _default_budget(config, 0, 256) + 1
    assert _default_budget(config, free, 512) < minimum <= _default_budget(config, free, 256)
    tight = fit(free, 2048)
    assert tight.lowered and (tight.requested_tree_budget, tight.tree_budget) == (2048, 256)
    assert tight.budget_bytes == _default_budget(config, free, 256) >= minimum
    report = OffloadReport("GPTQ 4-bit", 80, (), 2, 1, 80, 2, 1, 80, True, True, tight.budget_bytes, tight)
    assert "Tree budget lowered from 2048 to 256 draft tokens per pass" in report.summary()
    # not even one token: a clear error saying where the memory goes
    with pytest.raises(
        InsufficientVRAMError,
        match=r"even with a tree budget of 1 token.*the draft model [\d.]+ [KM]?B, the KV caches for 4096 tokens",
    ):
        fit(minimum // 2, 2048)


def test_draft_kv_cache_is_reserved_in_the_default_budget(tiny_draft):
    settings = OffloadSettings(tree_budget=96).with_draft(tiny_draft)
    expected = config_kv_bytes(tiny_draft.config, tiny_draft.kv_rows, 8)  # float64 tiny draft, its preallocated rows
    assert settings.draft_kv_bytes == expected > 0
    assert OffloadSettings().with_draft(None).draft_kv_bytes == 0


def test_generation_caps_the_tree_at_the_targets_limit(tiny_target, tiny_draft):
    """A target short of VRAM for big trees (max_tree_tokens) gets trees no bigger, and the same tokens."""
    capped = dataclasses.replace(tiny_target, max_tree_tokens=5)
    params = SamplingParams(temperature=0.6, seed=1)
    settings = DecodingSettings(tree=TreeSettings(budget=64, max_depth=8, expand=8), max_new_tokens=20)
    chunks = list(stream_generate(capped, tiny_draft, make_word_tokenizer(), [1, 5, 9], params, settings))
    assert max(c.stats.tree_size for c in chunks) == 5
    expected = list(
        stream_generate(
            tiny_target,
            None,
            make_word_tokenizer(),
            [1, 5, 9],
            params,
            dataclasses.replace(settings, method="sequential"),
        )
    )
    assert [t for c in chunks for t in c.token_ids] == [t for c in expected for t in c.token_ids]


# --- host store ---------------------------------------------------------------------------------------


def test_store_is_one_exact_allocation():
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=3
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    layouts = [layer_layout(layer) for layer in model.model.layers]
    store = HostWeightStore(layouts, pin=False)
    assert store.nbytes == sum(layout.nbytes for layout in layouts)  # no power-of-two rounding
    assert all(layout.nbytes % LAYER_ALIGN == 0 for layout in layouts)
    assert store.buffer.data_ptr() % LAYER_ALIGN == 0
    base = store.buffer.data_ptr()
    for i in range(3):
        assert store.layer_bytes(i).data_ptr() == base + store.offsets[i]
        q = store.tensor(i, "self_attn.q_proj.weight")
        assert q.shape == (32, 32) and q.dtype == torch.float16
        assert base + store.offsets[i] <= q.data_ptr() < base + store.offsets[i] + layouts[i].nbytes
    assert not store.pinned


def test_store_is_page_locked_layer_by_layer_until_the_system_refuses():
    """Windows locks about half of RAM: the layers locked before a refusal stay locked (each a whole page
    range), the rest copy from pageable memory, and the store says how much is locked."""
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=4
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    layouts = [layer_layout(layer) for layer in model.model.layers]
    locked: list[tuple[int, int]] = []

    def lock_two_layers(layer: torch.Tensor) -> bool:
        if len(locked) == 2:
            return False
        locked.append((layer.data_ptr(), layer.numel()))
        return True

    budget = PinBudget(None, lock_two_layers)
    store = HostWeightStore(layouts, pin=True, budget=budget)
    assert locked == [(store.layer_bytes(i).data_ptr(), layouts[i].nbytes) for i in (0, 1)]
    assert all(pointer % LAYER_ALIGN == 0 for pointer, _ in locked)
    assert store.pinned_bytes == layouts[0].nbytes + layouts[1].nbytes and not store.pinned
    assert store.pinned_layers == {0, 1} and budget.refused and budget.locked_bytes == store.pinned_bytes
    everything = HostWeightStore(layouts, pin=True, budget=PinBudget(None, lambda layer: True))
    assert everything.pinned and everything.pinned_bytes == everything.nbytes


def test_host_memory_check_message():
    with pytest.raises(InsufficientHostMemoryError, match=r"need 2\.0 GB .* only 1\.0 GB is available"):
        check_host_memory(2 * 1024**3, 1024**3)


# --- tiny models written to disk ------------------------------------------------------------------------

COMMON = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    bos_token_id=1,
    eos_token_id=0,
)
CONFIGS = {
    "llama": lambda: LlamaConfig(**COMMON),
    "mistral": lambda: MistralConfig(**COMMON),
    "qwen2": lambda: Qwen2Config(**COMMON),
    "mixtral": lambda: MixtralConfig(num_local_experts=4, num_experts_per_tok=2, **COMMON),
    "qwen2_moe": lambda: Qwen2MoeConfig(
        num_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=48,
        shared_expert_intermediate_size=40,
        decoder_sparse_step=1,
        **COMMON,
    ),
    "qwen3": lambda: Qwen3Config(**COMMON),
    "qwen3_moe": lambda: Qwen3MoeConfig(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=48, **COMMON),
    "olmo2": lambda: Olmo2Config(**COMMON),  # norms after each block, not before; query and key norms
    # GLM-4's releases: fused gate and up projections, four norms per layer, rotary on half of each head; its
    # default padding id (151329) lies past the tiny vocabulary
    "glm4": lambda: Glm4Config(**COMMON, pad_token_id=None),
}


def save_tiny(folder, model_type: str, dtype: torch.dtype, seed: int = 0) -> None:
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(CONFIGS[model_type]())
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or name.endswith("bias"):
                p.add_(0.1 * torch.randn_like(p))  # non-trivial norms and biases
    model.to(dtype).save_pretrained(str(folder))


def in_memory(folder, dtype) -> CausalLM:
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, attn_implementation="sdpa").eval()
    return CausalLM(model=model, name="in-memory", eos_token_ids=(0,), max_context=256)


def logits(model: CausalLM, ids: list[int], cache=None) -> torch.Tensor:
    cache = model.new_cache() if cache is None else cache
    n = len(ids)
    mask = additive_mask(causal_visibility(cache.length, n, "cpu"), model.dtype)
    return model.forward(torch.tensor(ids), torch.arange(cache.length, cache.length + n), mask, cache)


IDS = [1, 7, 22, 3, 40, 9, 13]


@pytest.mark.parametrize(
    ("model_type", "dtype"),
    [
        ("llama", torch.float16),
        ("mistral", torch.bfloat16),
        ("qwen2", torch.float16),
        ("mixtral", torch.bfloat16),
        ("qwen2_moe", torch.float16),
        ("qwen3", torch.bfloat16),
        ("qwen3_moe", torch.float16),
        ("olmo2", torch.bfloat16),
        ("glm4", torch.float16),
    ],
)
def test_16bit_offloaded_equals_in_memory(tmp_path, model_type, dtype):
    save_tiny(tmp_path, model_type, dtype)
    reference = in_memory(tmp_path, torch.float32)
    offloaded = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=1, n_slots=2, stream_on_cpu=True)
    assert isinstance(offloaded, OffloadedLM) and isinstance(offloaded, CausalLM)
    assert offloaded.vocab_size == reference.vocab_size and offloaded.dtype == torch.float32
    # two passes: the second runs on top of the first's KV cache and after a prefetch
    cache_a, cache_b = reference.new_cache(), offloaded.new_cache()
    torch.testing.assert_close(logits(offloaded, IDS, cache_b), logits(reference, IDS, cache_a), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(
        logits(offloaded, [5, 6], cache_b), logits(reference, [5, 6], cache_a), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize(
    ("generation_config", "expected"),
    [
        ('{"eos_token_id": ["x", -1, true, [3], 5, 0]}', (5, 0)),  # only ids that name a token, each once
        ('{"eos_token_id": [5000, 5]}', (5, 0)),  # past the head's rows: no token
        ("[1, 2]", (0,)),  # not an object
        ('{"eos_token_id": 7', (0,)),  # cut short
        (b"\xff\xfe", (0,)),  # not text
    ],
)
def test_an_offloaded_model_s_end_tokens_are_the_ids_its_files_name(tmp_path, generation_config, expected):
    save_tiny(tmp_path, "llama", torch.float16)  # config.json: eos_token_id 0
    path = tmp_path / "generation_config.json"
    path.write_bytes(generation_config if isinstance(generation_config, bytes) else generation_config.encode())
    model = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=0, stream_on_cpu=True)
    assert model.eos_token_ids == expected


def test_ring_trace_follows_the_plan_and_reuses_slots(tmp_path):
    save_tiny(tmp_path, "llama", torch.float16)
    probe = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=0, stream_on_cpu=True)
    layer, fixed = probe.report.layer_bytes, probe.report.device_fixed_bytes
    # budget for the non-layer weights and exactly one resident layer plus two slots
    model = load_offloaded(
        str(tmp_path), "cpu", torch.float32, vram_budget_bytes=fixed + 3 * layer, stream_on_cpu=True, record_trace=True
    )
    assert model.report.resident_layers == (2,) and model.report.n_slots == 2
    assert model.report.bytes_streamed_per_pass == 3 * layer
    reference = in_memory(tmp_path, torch.float32)
    for _ in range(3):
        torch.testing.assert_close(logits(model, IDS), logits(reference, IDS), rtol=1e-5, atol=1e-5)
    first = plan_pass(4, (2,), 2) + plan_prefetch(4, (2,), 2)
    later = plan_pass(4, (2,), 2, prefetched=2) + plan_prefetch(4, (2,), 2)
    assert model.streamer.trace == list(first + later + later)
    assert [a.layer for a in model.streamer.trace if isinstance(a, Copy) and a.slot == 0][:4] == [0, 3, 0, 3]


def test_failed_pass_resets_prefetch_and_next_pass_is_correct(tmp_path):
    save_tiny(tmp_path, "llama", torch.float16)
    model = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=0, n_slots=2, stream_on_cpu=True)
    reference = in_memory(tmp_path, torch.float32)
    logits(model, IDS)  # leaves a prefetch in flight
    bad_mask = torch.zeros(1, 1, 2, 3)
    with pytest.raises(RuntimeError):
        model.forward(torch.tensor(IDS), torch.arange(len(IDS)), bad_mask, model.new_cache())
    assert model.streamer.plan()[0] == Copy(0, 0)  # the prefetch state was dropped
    torch.testing.assert_close(logits(model, IDS), logits(reference, IDS), rtol=1e-5, atol=1e-5)


def test_specexec_over_offloaded_target_emits_the_same_tokens(tmp_path, tiny_target, tiny_draft):
    tiny_target.model.save_pretrained(str(tmp_path))
    offloaded = load_offloaded(str(tmp_path), "cpu", torch.float64, resident_layers=0, n_slots=1, stream_on_cpu=True)
    tree = TreeSettings(budget=16, max_depth=6, expand=4)
    prompt = [1, 5, 9, 12]
    for params in (SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, seed=3)):
        outputs = []
        for target in (tiny_target, offloaded):
            state = DecodeState.fresh(prompt, target, tiny_draft)
            tokens = [t for step in specexec_steps(state, target, tiny_draft, params, tree, 16) for t in step.token_ids]
            outputs.append(tokens)
        assert outputs[0] == outputs[1] and len(outputs[0]) == 16


def test_progress_and_report(tmp_path):
    save_tiny(tmp_path, "llama", torch.float16)
    calls = []
    model = load_offloaded(
        str(tmp_path), "cpu", torch.float32, progress=lambda done, total: calls.append((done, total))
    )
    total = calls[-1][1]
    assert calls[-1][0] == total and [c[0] for c in calls] == sorted(c[0] for c in calls)
    assert total == sum(p.numel() * 2 for p in in_memory(tmp_path, torch.float16).model.parameters())
    assert not model.report.streaming and "nothing streams" in model.report.summary()
    assert model.report.host_store_bytes >= 4 * model.report.layer_bytes - 4 * LAYER_ALIGN


# --- errors ---------------------------------------------------------------------------------------------


def test_host_ram_is_checked_before_loading(tmp_path):
    save_tiny(tmp_path, "llama", torch.float16)
    calls = []
    with pytest.raises(InsufficientHostMemoryError, match="not enough free RAM"):
        load_offloaded(
            str(tmp_path), "cpu", torch.float32, progress=lambda d, t: calls.append(d), available_ram_bytes=1000
        )
    assert calls == []


def test_loader_errors(tmp_path):
    with pytest.raises(ModelNotFoundError):
        load_offloaded(str(tmp_path / "nope"), "cpu", torch.float32)
    (tmp_path / "config.json").write_text(json.dumps(LlamaConfig(**COMMON).to_dict()))
    with pytest.raises(ModelFormatError, match="no safetensors weights"):
        load_offloaded(str(tmp_path), "cpu", torch.float32)
    other = tmp_path / "gpt2"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    (other / "model.safetensors").write_bytes(b"")
    with pytest.raises(UnsupportedArchitectureError, match="cannot run models of type 'gpt2'"):
        load_offloaded(str(other), "cpu", torch.float32)
    if not torch.cuda.is_available():
        with pytest.raises(InvalidSettingError, match="no CUDA GPU"):
            load_offloaded(str(tmp_path), "cuda", torch.float16)


def test_missing_16bit_tensor_is_named(tmp_path):
    from safetensors.torch import load_file, save_file

    save_tiny(tmp_path, "llama", torch.float16)
    tensors = load_file(str(tmp_path / "model.safetensors"))
    del tensors["model.layers.3.mlp.up_proj.weight"]
    save_file(tensors, str(tmp_path / "model.safetensors"))
    with pytest.raises(ModelFormatError, match=r"model\.layers\.3\.mlp\.up_proj\.weight"):
        load_offloaded(str(tmp_path), "cpu", torch.float32)


# --- GPU (skipped without CUDA) -------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
@pytest.mark.parametrize("resident_layers", [0, 1, "auto"])
def test_cuda_streaming_equals_cpu(tmp_path, resident_layers):
    save_tiny(tmp_path, "llama", torch.float16)
    reference = in_memory(tmp_path, torch.float32)
    model = load_offloaded(
        str(tmp_path),
        "cuda",
        torch.float32,
        vram_budget_bytes=None if resident_layers == "auto" else 2**30,
        resident_layers=resident_layers,
        record_trace=True,
    )
    assert model.device.type == "cuda"
    for _ in range(3):
        torch.testing.assert_close(logits(model, IDS).cpu(), logits(reference, IDS), rtol=1e-4, atol=1e-4)
    copies = [a for a in model.streamer.trace if isinstance(a, Copy)]
    n_streamed = 4 - len(model.report.resident_layers)
    assert len(copies) == (3 * n_streamed + model.streamer.n_slots if n_streamed else 0)
    assert model.report.pinned or not n_streamed  # the host store holds the streamed layers only
    assert model.report.host_store_bytes == n_streamed * model.report.layer_bytes


def test_bench_runs_on_cpu_with_a_note(capsys):
    from core.bench.offload import add_arguments, run
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--device",
            "cpu",
            "--layers",
            "1",
            "--width-divisor",
            "8",
            "--tree-sizes",
            "1,4",
            "--context",
            "8",
            "--vram-budgets",
            "1,12",
            "--json",
        ]
    )
    assert run(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert "no CUDA GPU present" in result["note"]
    gptq, fp16 = result["formats"]
    assert [row["tree_size"] for row in gptq["passes"]] == [1, 4]
    assert all(row["pass_s"] > 0 and 0 <= row["hidden_fraction"] <= 1 for row in gptq["passes"] + fp16["passes"])
    assert "Lower the tree budget" in gptq["residency"][0]["error"]
    assert gptq["residency"][1]["resident_layers"] > fp16["residency"][1]["resident_layers"]
    # the dequantisation-only column: on the CPU the eager reference runs
    assert gptq["dequant_path"] == "eager reference" and gptq["reference_dequant_s_per_layer"] is None
    assert all(row["dequant_s"] > 0 for row in gptq["passes"])
    assert fp16["dequant_path"] is None and all(row["dequant_s"] == 0 for row in fp16["passes"])
