"""A resident target's one-token step in a CUDA graph (issue 37): the windowed step a graph captures gives the
tokens of the old step on the CPU, only a target that streams no layer takes it, the VRAM plan's bytes for its
graphs, and on a GPU the capture itself."""

from __future__ import annotations

import copy

import pytest
import torch
from transformers import Glm4Config, LlamaConfig, Olmo2Config, Qwen2Config

from conftest import make_tiny_llama, make_word_tokenizer, sharpen
from core.decoding import captured_forward
from core.decoding.captured_forward import run_step_forward, step_capture_enabled, windowed_step
from core.decoding.generation import generate
from core.decoding.settings import DecodingSettings, SamplingParams
from core.decoding.graph_memory import search_forward_peak_bytes
from core.errors import ContextLengthError, InvalidSettingError
from core.modeling.tree_mask import additive_mask, causal_visibility
from core.offload import load_offloaded
from core.offload.loader import step_graph_room
from core.planning import residency
from core.planning.graph_plan import (
    CUBLAS_WORKSPACE_BYTES,
    GRAPH_EXEC_BYTES,
    column_buckets,
    scratch_estimate_bytes,
    step_graph_bytes,
)
from core.system.env import ATTENTION_FIX_ENV, CUDA_GRAPHS_ENV

# past the first column bucket (256) within the answer, so the step changes bucket on the way
PROMPT = [1] + [3 + (i * 7) % 60 for i in range(240)]


@pytest.fixture(scope="module")
def target32():
    """A float32 tiny target with peaked distributions and no end-of-sequence token (answers run to their limit)."""
    model = sharpen(make_tiny_llama(0, dtype=torch.float32), 8.0)
    model.eos_token_ids = ()
    return model


def _answer(target, params: SamplingParams, tokens: int = 40) -> list[int]:
    settings = DecodingSettings(method="sequential", max_new_tokens=tokens)
    return generate(target, None, make_word_tokenizer(), PROMPT, params, settings).token_ids


@pytest.mark.parametrize(
    "params",
    [SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, top_p=0.9, seed=5)],
    ids=["greedy", "seeded"],
)
def test_the_windowed_step_gives_the_tokens_of_the_old_step(target32, params, monkeypatch, one_torch_thread):
    """The step a graph replays (windowed write, bucketed columns) against the step of before, in float32."""
    assert windowed_step(target32)
    windowed = _answer(target32, params)
    monkeypatch.setattr("core.decoding.methods.sequential.windowed_step", lambda model: False)
    assert _answer(target32, params) == windowed and len(windowed) == 40


def test_a_windowed_step_equals_the_forward_and_moves_the_cache_by_one_row(target32):
    """Bit for bit on the CPU: the same shapes, masks and kernels as model.forward with the attention fix on;
    at the end of the cache it refuses before writing anything."""
    eager, windowed = target32.new_cache(), target32.new_cache()
    prefix = torch.tensor(PROMPT[:-1])
    for cache in (eager, windowed):
        target32.extend(prefix, cache)
    for token in (PROMPT[-1], 9, 17, 4):
        length = eager.length
        mask = additive_mask(causal_visibility(length, 1, "cpu"), target32.dtype)
        expected = target32.forward(torch.tensor([token]), torch.tensor([length]), mask, eager)
        got = run_step_forward(target32, windowed, torch.tensor([token]))
        assert torch.equal(got, expected) and windowed.length == eager.length == length + 1
    full = target32.new_cache()
    target32.extend(torch.zeros(full.capacity, dtype=torch.long), full)
    with pytest.raises(ContextLengthError):
        run_step_forward(target32, full, torch.tensor([3]))
    assert full.length == full.capacity


@pytest.fixture(scope="module")
def target_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("step-target")
    make_tiny_llama(0, dtype=torch.float32).model.save_pretrained(folder)
    return folder


def _offloaded(folder, resident_layers: int, budget: int = 10**9):
    return load_offloaded(
        str(folder),
        "cpu",
        torch.float32,
        vram_budget_bytes=budget,
        resident_layers=resident_layers,
        n_slots=1,
        stream_on_cpu=True,
    )


def test_only_a_target_that_streams_no_layer_takes_the_windowed_step(target32, target_folder, monkeypatch):
    """Resident (in memory, or offloaded with every layer resident): windowed. Streaming: the old step (its
    forward waits on copies and binds ring slots). The attention fix off: the old step. Nothing is captured
    off CUDA."""
    streaming, all_resident = _offloaded(target_folder, 1), _offloaded(target_folder, 2)
    assert streaming.streams_layers and not windowed_step(streaming)
    assert not all_resident.streams_layers and windowed_step(all_resident) and windowed_step(target32)
    assert not any(step_capture_enabled(m) for m in (target32, all_resident))  # the CPU
    with pytest.raises(InvalidSettingError, match="the target is on cpu"):
        captured_forward.compare_step_captured_with_eager(target32)
    monkeypatch.setenv(ATTENTION_FIX_ENV, "0")
    assert not windowed_step(target32)
    monkeypatch.setenv(ATTENTION_FIX_ENV, "1")
    params = SamplingParams(temperature=0.8, seed=2)
    assert _answer(streaming, params, 12) == _answer(all_resident, params, 12)


LLAMA_TARGET = LlamaConfig(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=4,
    num_attention_heads=32,
    num_key_value_heads=32,
)
QWEN_TARGET = Qwen2Config(  # Qwen2.5-32B's layer: 40 heads over 8 key/value heads
    vocab_size=152064,
    hidden_size=5120,
    intermediate_size=27648,
    num_hidden_layers=4,
    num_attention_heads=40,
    num_key_value_heads=8,
)

GLM4_TARGET = Glm4Config(  # GLM-4-32B-0414's layer: gate and up in one linear, 48 heads over 2
    vocab_size=151552,
    hidden_size=6144,
    intermediate_size=23040,
    num_hidden_layers=4,
    num_attention_heads=48,
    num_key_value_heads=2,
    head_dim=128,
    pad_token_id=None,
)
OLMO2_TARGET = Olmo2Config(  # OLMo-2-0325-32B's layer: norms after each block
    vocab_size=100352,
    hidden_size=5120,
    intermediate_size=27648,
    num_hidden_layers=4,
    num_attention_heads=40,
    num_key_value_heads=8,
)


@pytest.mark.parametrize(
    "config",
    [LLAMA_TARGET, QWEN_TARGET, GLM4_TARGET, OLMO2_TARGET],
    ids=["llama-mha", "qwen-gqa", "glm4-32b", "olmo2-32b"],
)
@pytest.mark.parametrize("capacity", [1025, 4096 + 129])
def test_the_step_graphs_bound_holds_the_meta_device_scratch(config, capacity):
    """The loader plans with the torch-free bound (it sits below the decoding layer); the engine's own step on
    the meta device, with the GPU's fused attention, never needs more."""
    measured = search_forward_peak_bytes(config, torch.float16, 1, capacity)
    assert 0 < measured <= scratch_estimate_bytes(config, 2, 1, capacity)


def test_step_graph_bytes_add_one_graph_per_bucket_sized_for_the_depth():
    config = copy.deepcopy(QWEN_TARGET)
    config.num_hidden_layers = 64  # Qwen2.5-32B: 64 layers, two executables' worth of nodes per graph
    capacity = 4096 + 129
    kept = sum(2 * 8 + cols * 2 + 2 * 5120 * 2 + 2 * GRAPH_EXEC_BYTES for cols in column_buckets(capacity))
    assert len(column_buckets(capacity)) == 10
    expected = scratch_estimate_bytes(config, 2, 1, capacity) + kept + CUBLAS_WORKSPACE_BYTES
    assert step_graph_bytes(config, 2, capacity) == expected
    assert 70 * 2**20 < expected < 80 * 2**20  # about 75 MiB for a 32B target at a 4k context


def test_the_step_is_captured_only_into_room_the_budget_left(target_folder):
    """An offloaded target with every layer resident gets its step graphs only when its weight budget holds
    them beyond its weights; the plan reserves nothing for them, so it stays true either way."""
    roomy = _offloaded(target_folder, 2, budget=10**9)
    capacity = roomy.kv_rows
    needed = step_graph_bytes(roomy.config, 4, capacity)
    weights = roomy.report.device_fixed_bytes + roomy.streamer.resident_bytes  # no ring: nothing streams
    assert roomy.step_graph_room and roomy.report.budget_bytes - weights >= needed
    tight = _offloaded(target_folder, 2, budget=weights + needed - 1)
    assert not tight.streams_layers and not tight.step_graph_room
    exact = _offloaded(target_folder, 2, budget=weights + needed)
    assert exact.step_graph_room
    plan = residency.plan_residency([100, 100], None, 0, 1, 2)
    assert step_graph_room(plan, roomy.config, 4, capacity)  # no budget: the CPU, where nothing is captured


gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _cuda_target(dtype=torch.float16):
    from core.bench.gpu_check.random_pair import random_target

    return random_target(torch.device("cuda"), dtype, small=False, max_context=2048).lm


@pytest.mark.gpu
@gpu
def test_the_captured_step_equals_the_eager_step_over_buckets():
    target = _cuda_target()
    assert step_capture_enabled(target)
    assert captured_forward.compare_step_captured_with_eager(target, contexts=(64, 300, 700, 1500)) == 0.0


@pytest.mark.gpu
@gpu
def test_plain_decoding_with_step_graphs_gives_the_eager_tokens(monkeypatch):
    """Greedy and seeded answers crossing a column bucket: the same tokens with graphs on and off, and one graph
    per bucket the answer touched, all of width 1."""
    from core.bench.gpu_check.random_pair import IdText, random_prompt

    target = _cuda_target()
    shapes: list[tuple[int, int]] = []
    real_capture = captured_forward.CapturedForward.capture.__func__

    def capture(cls, model, cache, graphs, hidden, positions, mask, rows, cols):
        shapes.append((hidden.shape[1], cols))
        return real_capture(cls, model, cache, graphs, hidden, positions, mask, rows, cols)

    monkeypatch.setattr(captured_forward.CapturedForward, "capture", classmethod(capture))
    prompt = random_prompt(240, target.vocab_size)
    settings = DecodingSettings(method="sequential", max_new_tokens=40)
    for params in (SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, seed=3)):
        monkeypatch.setenv(CUDA_GRAPHS_ENV, "0")
        eager = generate(target, None, IdText(), prompt, params, settings).token_ids
        monkeypatch.setenv(CUDA_GRAPHS_ENV, "1")
        shapes.clear()
        assert generate(target, None, IdText(), prompt, params, settings).token_ids == eager
        assert shapes == [(1, 256), (1, 512)]  # each answer's cache captures its own
