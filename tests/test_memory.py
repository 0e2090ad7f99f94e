"""Engine memory (issue 10): host RAM holds streamed layers only, KV caches sized once, chunked prefill,
logits only for the rows verification visits, the embedding table in host RAM, and the default dtype.
Everything runs on the CPU; `stream_on_cpu` runs the GPU's placement logic there."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from core.decoding.decode_state import DecodeState
from core.errors import ContextLengthError, InsufficientHostMemoryError, InvalidSettingError
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
from core.engine import protocol as P
from core.modeling.kv_cache import InPlaceKVCache
from core.decoding.methods.sequential import sequential_steps
from core.decoding.methods.specexec import specexec_steps
from core.offload import load_offloaded
from core.offload.host_embedding import HostEmbedding
from core.planning.host_memory import HOST_MARGIN_BYTES, host_bytes_needed, host_table_bytes
from core.planning.residency import activation_bytes, device_fixed_bytes, kv_cache_bytes, resolve_context_length

from conftest import make_word_tokenizer
from test_offload import COMMON, IDS, in_memory, logits, save_tiny

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# --- 1. resident layers leave host RAM ------------------------------------------------------------------


def test_host_store_holds_only_streamed_layers(tmp_path):
    save_tiny(tmp_path, "llama", torch.float16)
    reference = in_memory(tmp_path, torch.float32)
    model = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=2, n_slots=2, stream_on_cpu=True)
    layer = model.report.layer_bytes
    assert model.report.resident_layers == (1, 3)
    assert model.report.host_store_bytes == model.streamer.store.nbytes == 2 * layer  # was 4 layers
    with pytest.raises(KeyError):
        model.streamer.store.layer_bytes(1)  # a resident layer has no host copy
    for _ in range(2):
        torch.testing.assert_close(logits(model, IDS), logits(reference, IDS), rtol=1e-5, atol=1e-5)


def test_host_memory_check_uses_the_streamed_figure(tmp_path):
    save_tiny(tmp_path, "llama", torch.float16)
    probe = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=2, n_slots=2, stream_on_cpu=True)
    needed = probe.report.host_ram_bytes
    assert needed < probe.report.layer_bytes * 4 + 1024**3  # less than every layer plus the margin
    load_offloaded(
        str(tmp_path),
        "cpu",
        torch.float32,
        resident_layers=2,
        n_slots=2,
        stream_on_cpu=True,
        available_ram_bytes=needed,
    )
    with pytest.raises(InsufficientHostMemoryError):
        load_offloaded(
            str(tmp_path),
            "cpu",
            torch.float32,
            resident_layers=2,
            n_slots=2,
            stream_on_cpu=True,
            available_ram_bytes=needed - 1,
        )


def test_host_ram_figure_is_streamed_layers_plus_host_tables_plus_one_tensor_and_margin():
    assert host_bytes_needed(30, largest_tensor_bytes=5, table_bytes=7) == 42 + HOST_MARGIN_BYTES
    # a CPU run keeps every non-layer weight in host RAM; a streaming GPU run only the embedding table
    assert host_table_bytes(100, 40, streaming=False, embedding_on_host=False) == 100
    assert host_table_bytes(100, 40, streaming=True, embedding_on_host=True) == 40
    assert host_table_bytes(100, 40, streaming=True, embedding_on_host=False) == 0


# --- 2. KV caches sized once -----------------------------------------------------------------------------


def test_kv_cache_is_preallocated_once_and_refuses_to_grow():
    cache = InPlaceKVCache(2, capacity=10)
    keys = torch.zeros(1, 2, 4, 8)
    cache.update(keys, keys, 0)
    buffer = cache.layers[0]._key_buffer
    assert buffer.shape[-2] == 10
    cache.update(torch.zeros(1, 2, 6, 8), torch.zeros(1, 2, 6, 8), 0)
    assert cache.layers[0]._key_buffer is buffer and cache.layers[0].length == 10
    with pytest.raises(ContextLengthError, match="10 tokens"):
        cache.update(torch.zeros(1, 2, 1, 8), torch.zeros(1, 2, 1, 8), 0)


def test_kv_bytes_are_the_planned_rows_exactly():
    assert kv_cache_bytes(2, 8, 128, 300, 2) == 2 * 2 * 8 * 300 * 128 * 2  # no power-of-two rounding


def test_context_length_setting():
    assert resolve_context_length(None, 131072) == 4096
    assert resolve_context_length(None, 2048) == 2048
    assert resolve_context_length(8192, 131072) == 8192
    with pytest.raises(InvalidSettingError, match="at most 2048"):
        resolve_context_length(4096, 2048)
    with pytest.raises(InvalidSettingError, match="at least"):
        resolve_context_length(8, 2048)


def test_caches_never_grow_and_generation_stops_at_the_planned_context(tiny_target, tiny_draft):
    target = dataclasses.replace(tiny_target, max_context=40, max_tree_tokens=16)
    draft = dataclasses.replace(tiny_draft, max_context=40, max_tree_tokens=16)
    assert target.kv_rows == 40 + 16 + 1
    state = DecodeState.fresh([1, 5, 9], target, draft)
    settings = DecodingSettings(tree=TreeSettings(budget=64, max_depth=8, expand=8), max_new_tokens=200)
    chunks = list(
        stream_generate(
            target, draft, make_word_tokenizer(), [1, 5, 9], SamplingParams(temperature=0.0), settings, state=state
        )
    )
    assert max(c.stats.tree_size for c in chunks) <= 16  # the tree is capped at the rows the cache holds
    assert len(state.tokens) <= 40 and chunks[-1].finish_reason in ("length", "eos")
    for cache in (state.target_cache, state.draft_cache):
        assert all(layer._key_buffer.shape[-2] == 57 for layer in cache.layers)


def test_cli_and_engine_carry_the_context_length():
    import argparse

    from core.cli.options import add_model_arguments, engine_load_settings, planned_memory

    parser = argparse.ArgumentParser()
    add_model_arguments(parser)
    args = parser.parse_args(["--context-length", "2048"])
    args.budget = 64
    assert engine_load_settings(args)["context_length"] == 2048
    assert planned_memory(args) == {"context_length": 2048, "tree_budget": 64}
    assert P.Load().context_length is None and P.Load(context_length=8192).context_length == 8192


@pytest.mark.parametrize("offload", ["off", "on"])
def test_loaded_models_are_planned_for_the_context_and_tree(tmp_path, offload):
    from core.loading.load import load_model
    from core.loading.offload_settings import OffloadSettings

    save_tiny(tmp_path, "llama", torch.float16)  # max_position_embeddings 256
    make_word_tokenizer().save_pretrained(str(tmp_path))
    settings = OffloadSettings(mode=offload, tree_budget=16)
    lm = load_model(str(tmp_path), device="cpu", offload=settings, context_length=128, tree_budget=16).lm
    assert (lm.max_context, lm.max_tree_tokens, lm.kv_rows) == (128, 16, 145)
    assert load_model(str(tmp_path), device="cpu", offload=settings).lm.max_context == 256  # the model's limit
    with pytest.raises(InvalidSettingError, match="at most 256"):
        load_model(str(tmp_path), device="cpu", offload=settings, context_length=512)
    fitted = load_model(
        str(tmp_path), device="cpu", offload=settings, context_length=512, tree_budget=16, fit_context=True
    ).lm
    assert (fitted.max_context, fitted.kv_rows) == (256, 273)


def save_limited_pair(root, target_limit: int, draft_limit: int) -> tuple[str, str]:
    """Two tiny Llama folders with one tokenizer whose configs keep `target_limit` and `draft_limit` tokens."""
    folders = []
    for name, limit, seed in (("target", target_limit, 0), ("draft", draft_limit, 1)):
        folder = root / name
        save_tiny(folder, "llama", torch.float32, seed=seed)
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": limit}))
        make_word_tokenizer().save_pretrained(str(folder))
        folders.append(str(folder))
    return folders[0], folders[1]


@pytest.mark.parametrize("limits", [(256, 128), (128, 256)], ids=["draft-shorter", "target-shorter"])
def test_a_pair_is_planned_for_one_context_the_shorter_model_s(tmp_path, limits):
    """Both models' caches are sized for the context the pair keeps; with fit_context (the app's setting, kept
    when the models change) a longer context is taken down to it, without it refused."""
    from core.loading.offload_settings import OffloadSettings
    from core.loading.pair import load_pair

    target, draft = save_limited_pair(tmp_path, *limits)
    settings = OffloadSettings(mode="on", tree_budget=16)  # the offloaded target plans its caches at load
    for asked in (None, 96, 1024):
        got = load_pair(target, draft, offload=settings, device="cpu", context_length=asked, fit_context=True)
        assert [m.lm.max_context for m in got] == [min(asked or 4096, 128)] * 2
    with pytest.raises(InvalidSettingError, match="use at most 128 tokens"):
        load_pair(target, draft, offload=settings, device="cpu", context_length=200)


def test_the_engine_takes_the_app_s_context_setting_as_a_ceiling(tmp_path):
    """The app's Load says fit_context: a model that keeps less than the setting loads with its own limit,
    and the status says it (the chat's context meter shows it). A Load without it is refused in words."""
    from conftest import in_process_engine, torch_threads

    target, draft = save_limited_pair(tmp_path, 128, 256)
    with torch_threads(1):
        engine, serve = in_process_engine()
        load = P.Load(target=target, draft=draft, dtype="float32", device="cpu", max_depth=4, context_length=1024)
        refused = [e for e in serve(load) if isinstance(e, P.Error)]
        assert [e.kind for e in refused] == ["invalid_setting"]
        assert "use at most 256 tokens" in refused[0].message  # the draft's limit: it loads first
        events = serve(dataclasses.replace(load, fit_context=True))
    assert not [e for e in events if isinstance(e, P.Error)]
    assert [e.models for e in events if isinstance(e, P.StatusReport)][-1]["max_context"] == 128
    assert engine.session.target.max_context == engine.session.draft.max_context == 128


# --- 3. chunked prefill ------------------------------------------------------------------------------------


def test_long_prompt_is_prefilled_in_chunks_with_the_same_tokens(tiny_target, tiny_draft):
    prompt = [1] + [int(t) for t in torch.randint(3, 64, (299,), generator=torch.Generator().manual_seed(0))]
    target = dataclasses.replace(tiny_target, prefill_chunk=64)
    draft = dataclasses.replace(tiny_draft, prefill_chunk=64)
    rows: list[int] = []
    hooks = [
        m.decoder_layers[0].register_forward_pre_hook(lambda _m, args: rows.append(args[0].shape[1]))
        for m in (target, draft)
    ]
    params = SamplingParams(temperature=0.8, seed=2)
    tree = TreeSettings(budget=16, max_depth=4, expand=4)
    try:
        state = DecodeState.fresh(prompt, target, draft)
        got = [t for step in specexec_steps(state, target, draft, params, tree, 12) for t in step.token_ids]
    finally:
        for hook in hooks:
            hook.remove()
    assert max(rows) <= 64 + 16 and sum(r for r in rows if r == 64) >= 2 * 4 * 64  # both models chunked
    plain = DecodeState.fresh(prompt, tiny_target, None)
    expected = [t for step in sequential_steps(plain, tiny_target, params, 12) for t in step.token_ids]
    assert got == expected


def test_activation_reserve_counts_the_prefill_chunk():
    config = LlamaConfig(
        hidden_size=1024, intermediate_size=4096, num_attention_heads=8, num_key_value_heads=8, vocab_size=32000
    )
    small = activation_bytes(config, 128, 32768, 2, prefill_chunk=256)
    big = activation_bytes(config, 128, 32768, 2, prefill_chunk=1024)
    assert big > small
    # the mask is (chunk + tree) x (context + chunk + tree), never a 32k-square
    assert big < 32768 * 32768 * 2


# --- 4. logits only where verification looks ----------------------------------------------------------


def test_target_lm_head_runs_only_on_the_rows_verification_visits(tiny_target, tiny_draft):
    rows: list[int] = []
    hook = tiny_target.model.lm_head.register_forward_hook(lambda _m, args, _out: rows.append(args[0].shape[-2]))
    params = SamplingParams(temperature=0.6, seed=0)
    try:
        state = DecodeState.fresh([1, 17, 5, 33], tiny_target, tiny_draft)
        steps = list(specexec_steps(state, tiny_target, tiny_draft, params, TreeSettings(64, 8, 16), 30))
    finally:
        hook.remove()
    emitted = sum(len(step.token_ids) for step in steps)
    assert max(step.stats.tree_size for step in steps) > 30
    assert sum(rows) == emitted  # one row per visited node: the path plus the node the walk stopped at


# --- 5. embedding table in host RAM ---------------------------------------------------------------------


def _save_wide_vocab(folder) -> None:
    config = LlamaConfig(**{**COMMON, "vocab_size": 2048})
    torch.manual_seed(0)
    AutoModelForCausalLM.from_config(config).to(torch.float16).save_pretrained(str(folder))


def test_embedding_table_stays_in_host_ram_and_frees_vram_for_layers(tmp_path):
    _save_wide_vocab(tmp_path)
    reference = in_memory(tmp_path, torch.float32)
    probe = load_offloaded(str(tmp_path), "cpu", torch.float32, resident_layers=0, n_slots=2, stream_on_cpu=True)
    layer, embedding = probe.report.layer_bytes, 2048 * 32 * 4
    assert embedding > layer
    assert isinstance(probe.model.model.embed_tokens, HostEmbedding)
    assert probe.report.host_table_bytes == embedding
    head = probe.report.device_fixed_bytes
    assert head == 2048 * 32 * 4 + 32 * 4  # lm_head + final norm; no embedding table
    # room for the head, two slots and one layer: less than the table alone, which used to be on the GPU
    budget = head + 2 * layer + layer
    assert budget < head + embedding
    model = load_offloaded(str(tmp_path), "cpu", torch.float32, vram_budget_bytes=budget, n_slots=2, stream_on_cpu=True)
    assert len(model.report.resident_layers) == 1
    torch.testing.assert_close(logits(model, IDS), logits(reference, IDS), rtol=1e-5, atol=1e-5)


def test_host_embedding_copies_only_the_looked_up_rows():
    table = torch.randn(100, 8)
    embedding = HostEmbedding(table, torch.device("cpu"))
    ids = torch.tensor([[3, 97, 3]])
    torch.testing.assert_close(embedding(ids), table[ids])
    assert device_fixed_bytes(non_layer_bytes=1000, embedding_bytes=300, embedding_on_host=True, scratch_bytes=5) == 705
    assert device_fixed_bytes(1000, 300, embedding_on_host=False, scratch_bytes=5) == 1005


# --- 9. default dtype ----------------------------------------------------------------------------------


def test_auto_dtype_is_float16_for_gptq_and_fp16_checkpoints_on_a_gpu():
    from core.loading.load import auto_dtype

    cuda = torch.device("cuda")
    assert auto_dtype(cuda, checkpoint_dtype="float16", gptq=False) == torch.float16
    assert auto_dtype(cuda, checkpoint_dtype="bfloat16", gptq=True) == torch.float16
    assert auto_dtype(cuda, checkpoint_dtype=None, gptq=True) == torch.float16
    assert auto_dtype(torch.device("cpu"), checkpoint_dtype="float16", gptq=True) == torch.float32


# --- the measurement commands ---------------------------------------------------------------------------


def test_memory_plan_uses_the_loaders_figures():
    from core.bench.memory import PCIE4_BYTES_PER_S, plan_for

    plan = plan_for("llama-2-70b-gptq", 24, "none", None, 128, 0.8)
    assert plan.error is None and 0 < plan.resident_layers < plan.n_layers and plan.context == 4096
    streamed = plan.streamed_bytes_per_pass
    embedding = 32000 * 8192 * 2
    # host RAM: the streamed layers, the embedding table, the largest tensor (lm_head = embedding size), margin
    assert plan.host_ram_bytes == streamed + embedding + embedding + 1024**3
    assert plan.floor_s_per_pass == streamed / PCIE4_BYTES_PER_S
    smaller = plan_for("llama-2-70b-gptq", 12, "none", None, 128, 0.8)
    assert smaller.resident_layers < plan.resident_layers and smaller.host_ram_bytes > plan.host_ram_bytes
    assert "not enough VRAM" in plan_for("llama-3.1-70b-gptq", 12, "llama-3.1-8b-fp16", None, 128, 0.8).error


def test_memory_plan_with_a_4bit_draft_agrees_with_the_fit():
    """The 4-bit draft's bytes as load_on_device checks them; on a 24 GB card it keeps as many resident layers as
    `specexec models recommend` predicts for the catalog pair (both plan the tree the engine loads with)."""
    from core.bench.memory import plan_for
    from pathlib import Path

    from core.hardware.description import load_description
    from core.models.catalog import load_catalog
    from core.models.fit import model_bytes_on_gpu, predict_pair

    pair = load_catalog().pair("llama3.1-70b-instruct-gptq")
    plan = plan_for("llama-3.1-70b-gptq", 24, "llama-3.1-8b-gptq", None, 256, 0.8)
    assert plan.draft_weight_bytes == model_bytes_on_gpu(pair.draft)
    sixteen = plan_for("llama-3.1-70b-gptq", 24, "llama-3.1-8b-fp16", None, 256, 0.8)
    assert plan.resident_layers - sixteen.resident_layers >= 20
    machine = load_description(Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json")
    gpu = dataclasses.replace(machine.gpus[0], vram_free_bytes=int(24 * 1024**3 - 0.8 * 1024**3))
    fit = predict_pair(pair, dataclasses.replace(machine, gpus=(gpu,)), 256)
    assert fit.resident_layers == plan.resident_layers


def test_first_difference():
    from core.decoding.agreement import first_difference

    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 2, 3], [1, 5, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
