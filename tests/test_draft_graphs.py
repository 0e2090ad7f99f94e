"""The draft's CUDA graphs inside the memory plan (issue 31): the shapes they are captured at, the VRAM they
keep (computed on the meta device, and the torch-free estimate the app's fit uses), the grouped-head
attention every model runs, and on a GPU the capture itself."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import Glm4Config, LlamaConfig, LlamaForCausalLM, Olmo2Config, Qwen2Config
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from core.decoding import captured_forward
from core.modeling.attention import grouped_sdpa_attention
from core.modeling.causal_lm import CausalLM
from core.decoding.graph_memory import PeakMemoryMode, planned_graph_bytes, search_forward_peak_bytes
from core.planning.graph_plan import (
    CUBLAS_WORKSPACE_BYTES,
    GROWTH,
    MAX_WIDTHS,
    SMALL_STEP,
    column_bucket,
    column_buckets,
    draft_graph_bytes,
    grouped_attention,
    scratch_estimate_bytes,
    search_width,
)
from core.modeling.tree_mask import additive_mask

MIB = 1024**2


@pytest.mark.parametrize("capacity", [300, 2305, 4096 + 257, 4096 + 1025, 8192 + 257, 32768 + 257])
def test_column_buckets_are_few_cover_every_need_and_overshoot_little(capacity):
    buckets = column_buckets(capacity)
    assert buckets == sorted(set(buckets)) and buckets[-1] == capacity
    assert len(buckets) <= 20  # 10-11 for a 4k context, 19 for 32k: a graph each, at most, per width
    for needed in range(1, capacity + 1, 7):
        bucket = column_bucket(needed, capacity)
        assert bucket in buckets and needed <= bucket <= capacity
        # never more than a step of columns, or GROWTH times the need, of masked attention
        assert bucket <= max(needed * GROWTH + SMALL_STEP, needed + 2 * SMALL_STEP) or bucket == capacity


def test_search_width_follows_the_budget():
    assert search_width(16) == 16 and search_width(256) == 32 and search_width(1024) == 128
    assert search_width(64, expand=8) == 8


def _qkv(heads: int, kv_heads: int, rows: int, cols: int, dim: int, generator: torch.Generator):
    def randn(*shape):
        return torch.randn(*shape, generator=generator, dtype=torch.float64)

    visible = torch.rand(rows, cols, generator=generator) < 0.7
    visible[:, 0] = True
    return (
        randn(1, heads, rows, dim),
        randn(1, kv_heads, cols, dim),
        randn(1, kv_heads, cols, dim),
        additive_mask(visible, torch.float64),
    )


@pytest.mark.parametrize("rows", [1, 5, 40])
@pytest.mark.parametrize("heads,kv_heads", [(8, 2), (9, 3), (4, 4)])
def test_grouped_attention_equals_transformers_sdpa(rows, heads, kv_heads):
    generator = torch.Generator().manual_seed(rows * heads)
    query, key, value, mask = _qkv(heads, kv_heads, rows, 50, 16, generator)
    module = torch.nn.Module()
    module.num_key_value_groups = heads // kv_heads
    module.is_causal = True
    ours, _ = grouped_sdpa_attention(module, query, key, value, mask, scaling=0.25)
    theirs, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.25)
    assert ours.shape == theirs.shape == (1, rows, heads, 16)
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-12)


@pytest.mark.parametrize("rows", [1, 5])
def test_grouped_attention_reads_each_key_value_head_once(rows, monkeypatch):
    """The fused attention gets the keys and values as the cache holds them, one per key/value head, at every
    row count, whatever transformers' version does (5.17, the lent GPU machine's, repeats them for a one-token
    query; 5.23 does not); a one-token step's mask is not repeated either."""
    generator = torch.Generator().manual_seed(rows)
    query, key, value, mask = _qkv(8, 2, rows, 50, 16, generator)
    module = torch.nn.Module()
    module.num_key_value_groups = 4
    module.is_causal = True
    fused = torch.nn.functional.scaled_dot_product_attention
    seen = []

    def recording(query, key, value, attn_mask=None, **kwargs):
        seen.append((tuple(key.shape), tuple(value.shape), tuple(attn_mask.shape)))
        return fused(query, key, value, attn_mask=attn_mask, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", recording)
    grouped_sdpa_attention(module, query, key, value, mask, scaling=0.25)
    mask_rows = 1 if rows == 1 else 4 * rows
    assert seen == [((1, 2, 50, 16), (1, 2, 50, 16), (1, 1, mask_rows, 50))]


def test_grouped_attention_is_what_models_run_and_keeps_their_logits():
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(copy.deepcopy(config)).double().eval()
    reference = LlamaForCausalLM(copy.deepcopy(config)).double().eval()
    reference.load_state_dict(model.state_dict())
    lm = CausalLM(model=model, name="grouped", eos_token_ids=(0,), max_context=128)
    assert model.config._attn_implementation == "specexec_grouped_sdpa"
    assert reference.config._attn_implementation == "sdpa"
    ids = torch.randint(3, 64, (20,))
    ours = lm.forward(
        ids, torch.arange(20), additive_mask(torch.ones(20, 20).tril().bool(), torch.float64), lm.new_cache()
    )
    with torch.no_grad():
        theirs = reference(ids[None]).logits[0]
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-12)


def test_peak_memory_mode_counts_what_is_alive_at_once():
    outside = torch.zeros(1000)
    with PeakMemoryMode() as counter:
        a = torch.ones(1000)  # 4,000 bytes
        b = a * 2  # 8,000 alive
        view = b[:10]
        del a, b  # b survives through its view
        outside.add_(1)  # in place on a tensor made outside: nothing
        c = view + 1  # 4,000 (b) + 40
        assert counter.live == 4000 + 40
        del view, c
    assert counter.peak == 8000 and counter.live == 0


LLAMA_8B = LlamaConfig(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=2,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
)
QWEN_SMALL = Qwen2Config(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=2,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
)

GLM4_9B = Glm4Config(  # GLM-4-9B-0414: gate and up in one linear, two key/value heads
    hidden_size=4096,
    intermediate_size=13696,
    num_hidden_layers=2,
    num_attention_heads=32,
    num_key_value_heads=2,
    head_dim=128,
    vocab_size=151552,
    pad_token_id=None,
)
OLMO2_1B = Olmo2Config(  # OLMo-2-0425-1B: norms after each block
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=2,
    num_attention_heads=16,
    num_key_value_heads=16,
    vocab_size=100352,
)


@pytest.mark.parametrize(
    "config", [LLAMA_8B, QWEN_SMALL, GLM4_9B, OLMO2_1B], ids=["llama-8b", "qwen-0.5b", "glm4-9b", "olmo2-1b"]
)
def test_meta_device_scratch_grows_with_width_and_columns_and_bounds_the_estimate(config):
    """The scratch grows with the rows; with grouped key/value heads also with the columns (the mask is
    repeated per group); OLMo 2 1B's heads are not grouped, and fused attention makes no columns' copy."""
    small = search_forward_peak_bytes(config, torch.float16, 16, 1024)
    wide = search_forward_peak_bytes(config, torch.float16, 128, 1024)
    long = search_forward_peak_bytes(config, torch.float16, 16, 8192)
    grouped = config.num_key_value_heads < config.num_attention_heads
    assert 0 < small < wide and (small < long if grouped else small == long)
    for width, capacity in ((16, 1024), (32, 4353), (128, 5121)):
        meta = search_forward_peak_bytes(config, torch.float16, width, capacity)
        estimate = scratch_estimate_bytes(config, 2, width, capacity)
        assert meta <= estimate <= 2.5 * meta + MIB, (width, capacity, meta, estimate)


def test_catalog_drafts_estimate_at_least_their_meta_scratch():
    """The app's fit (torch-free) reserves at least what the engine computes on the meta device, for every
    catalog draft at every context `bench memory --graphs` shows."""
    from core.bench.memory import graph_rows

    rows = graph_rows()
    assert {row["draft"] for row in rows} >= {"builtin-draft", "Qwen/Qwen3-0.6B"}
    for row in rows:
        assert row["scratch_meta_bytes"] <= row["scratch_bound_bytes"], row
        assert row["planned_bytes"] > row["scratch_meta_bytes"] + CUBLAS_WORKSPACE_BYTES, row


def test_planned_graph_bytes_adds_every_graph_and_the_workspace():
    width, capacity = 32, 4096 + 257
    scratch = search_forward_peak_bytes(QWEN_SMALL, torch.float16, width, capacity)
    planned = planned_graph_bytes(QWEN_SMALL, torch.float16, width, capacity)
    assert planned == draft_graph_bytes(scratch, QWEN_SMALL.hidden_size, 2, width, capacity)
    kept = planned - scratch - CUBLAS_WORKSPACE_BYTES
    assert 0 < kept < MAX_WIDTHS * len(column_buckets(capacity)) * 4 * MIB  # a few MiB a graph, no logits
    assert grouped_attention(width, 2, 64) and not grouped_attention(4096, 2, 64)


# --- on a GPU -------------------------------------------------------------------------------------------

gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _cuda_draft(dtype=torch.float16) -> CausalLM:
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=4096,
        hidden_size=512,
        intermediate_size=1024,
        num_hidden_layers=4,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=4096,
    )
    model = LlamaForCausalLM(config).to(device="cuda", dtype=dtype).eval()
    return CausalLM(model=model, name="cuda-draft", eos_token_ids=(0,), max_context=2048, max_tree_tokens=64)


@pytest.mark.gpu
@gpu
def test_captured_forwards_equal_eager_over_buckets_and_keep_little_memory():
    import gc

    draft = _cuda_draft()
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    difference = captured_forward.compare_captured_with_eager(draft, width=32, contexts=(64, 300, 700, 1500))
    assert difference == 0.0
    assert captured_forward.capture_enabled(draft.device)
    gc.collect()  # the check's cache is gone: its graphs, pool and stream go with it
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() - before < MIB


@pytest.mark.gpu
@gpu
def test_a_failed_capture_turns_graphs_off_and_the_forward_still_answers(monkeypatch):
    draft = _cuda_draft()
    cache = draft.new_cache()
    draft.extend(torch.arange(3, 40, device="cuda"), cache)

    def refuse(self, *args, **kwargs):
        raise RuntimeError("capture refused (test)")

    monkeypatch.setattr(torch.cuda.CUDAGraph, "capture_begin", refuse)
    monkeypatch.setattr(captured_forward, "_capture_failure", None)
    rows = torch.arange(37, 45, device="cuda")
    visible = torch.ones((8, 256), dtype=torch.bool, device="cuda")
    logits = captured_forward.run_draft_forward(
        draft, cache, torch.arange(8, device="cuda"), rows, additive_mask(visible, draft.dtype), rows, 256
    )
    assert logits.shape == (8, 4096) and bool(torch.isfinite(logits).all())
    assert not captured_forward.capture_enabled(draft.device)
    assert captured_forward.captured_shapes(cache) == []
