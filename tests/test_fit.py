"""Fit and speed prediction (core.models.fit) on the hardware fixtures, against hand-computed numbers, and
its agreement with the real loader's memory check."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from core.hardware.description import HardwareDescription, load_description
from core.models.acceptance import Acceptance
from core.models.catalog import BUILTIN_PAIR_ID, ModelRef, Pair, load_catalog
from core.planning.sizes import GIB
from core.models.fit import minimum_ram_bytes, minimum_vram_bytes, model_bytes_on_gpu, predict_pair, recommend
from core.planning.sizes import ModelShape, WeightFormat, decoder_layer_bytes, embedding_bytes, non_layer_bytes

FIXTURES = Path(__file__).parent / "fixtures" / "hw"
PAPER_PAIR = "llama2-70b-chat-gptq"


def hw(name: str):
    return load_description(FIXTURES / f"{name}.json")


def fixture_names() -> list[str]:
    return sorted(path.stem for path in FIXTURES.glob("*.json"))


# --- Llama 2 70B GPTQ + Llama 2 7B, by hand ---------------------------------------------------------------
LAYER = 428_687_360  # one packed GPTQ layer (tests/test_sizes.py derives it)
STORE = 80 * LAYER
HOST_NEED_ALL_STREAMED = STORE + 32000 * 8192 * 2 * 2 + GIB  # + embedding table + largest tensor (same size) + margin
EMBEDDING = 32000 * 8192 * 2  # fp16; kept in host RAM by an offloaded target, and the largest checkpoint tensor
NON_LAYER_7B = (2 * 32000 * 4096 + 4096) * 2  # embed/head/norm in fp16
DRAFT = 32 * 404_766_720 + NON_LAYER_7B  # the 16-bit 7B: 32 layers (a page multiple) + non-layer weights
# the 4-bit 7B (group 128): per layer q/k/v/o 4 x 8,732,672 + gate/up 2 x 23,441,408 + down 23,469,056 + norms
# 16,384 = 105,298,944, a page multiple 105,299,968; plus the dequantisation scratch (its largest linear in 16
# bits and one 128 MiB chunk) for batches above the fused kernel's rows
DRAFT_4BIT_LAYER = 105_299_968
DRAFT_4BIT = 32 * DRAFT_4BIT_LAYER + NON_LAYER_7B + 4096 * 11008 * 2 + 128 * 1024**2
DRAFT_KV = 2 * 32 * 32 * 4225 * 128 * 2  # 32 layers, 32 KV heads, preallocated for 4096 + 128 + 1 rows, fp16
TARGET_KV = 2 * 80 * 8 * 4225 * 128 * 2
# one pass: a 512-token prefill chunk + the 128-token tree (640 rows) over 4096 + 640 positions; logits of one row
ACTIVATIONS = (
    6 * 640 * 8192 + 3 * 640 * 64 * 128 + 640 * 4736 + 64 * 640 * 4736 + 2 * 64 * 4736 * 128 + 3 * 640 * 28672
) * 2 + 32000 * 14
MARGIN = GIB // 2
# what the draft's CUDA graphs may keep (core/planning/graph_plan.py), at the search width of budget 128 (32 rows) over
# its cache's 4,225 rows: the scratch bound (no group of heads to repeat the mask for; query, key and output
# copies around attention, the MLP and hidden copies), then per width (4 at most) every column bucket's
# inputs (positions, rows, the mask and the embedded tokens), hidden output and executable (2 MiB), and the
# capture stream's cuBLAS workspace (32 MiB)
GRAPH_SCRATCH = 8 * 32 * 32 * 128 * 2 + 3 * 32 * 11008 * 2 + 6 * 32 * 4096 * 2
GRAPH_KEPT = sum(
    2 * 32 * 8 + 32 * cols * 2 + 2 * 32 * 4096 * 2 + 2 * 1024**2
    for cols in (256, 512, 768, 1024, 1280, 1792, 2304, 3072, 3840, 4225)
)
DRAFT_GRAPHS = GRAPH_SCRATCH + 4 * GRAPH_KEPT + 32 * 1024**2
FIXED = (32000 * 8192 + 8192) * 2 + 8192 * 28672 * 2 + 128 * 1024**2  # head/norm (embedding in RAM) + GPTQ scratch
LAYER_PARAMS_70B = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672
PARAMS_7B = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008) + 2 * 32000 * 4096
RTX_4090 = (1008e9 * 0.8, 165e12 * 0.6)  # datasheet memory and fp16 tensor rates x the sustained shares


def test_paper_pair_on_a_24gb_card_64gb_ram_pcie4_by_hand() -> None:
    from core.models.speed import (
        GRAPH_KERNEL_GAP_SECONDS,
        KERNELS_PER_FORWARD,
        KERNELS_PER_LAYER,
        SEARCH_STEP_KERNELS,
        TINYGEMM_SHARE,
        target_pass_seconds,
    )
    from core.planning.residency import spread_layers

    machine = hw("gpu24-ram64-pcie4")
    pair = load_catalog().pair(PAPER_PAIR)
    assert pair.draft.repo == "TheBloke/Llama-2-7B-Chat-GPTQ" and pair.draft_id == "4bit"
    assert decoder_layer_bytes(pair.draft.shape, pair.draft.weights) == DRAFT_4BIT_LAYER
    fit = predict_pair(pair, machine, 128, overlap=False)  # drafting on the critical path, all of it
    budget = machine.gpus[0].vram_free_bytes - DRAFT_4BIT - TARGET_KV - DRAFT_KV - DRAFT_GRAPHS - ACTIVATIONS - MARGIN
    assert budget == 15_734_030_336 and fit.draft_graph_bytes == DRAFT_GRAPHS == 149_098_752
    resident = (budget - FIXED) // LAYER - 2  # two ring slots stream the rest
    assert resident == 32
    assert (fit.fit, fit.resident_layers, fit.total_layers, fit.budget) == ("fits", 32, 80, 128)
    # host RAM: the 48 streamed layers (resident ones take none), the embedding table, the largest tensor, margin
    assert fit.host_bytes_needed == 48 * LAYER + EMBEDDING + EMBEDDING + GIB
    assert (
        fit.tokens_per_pass == 12.10
        and "Table 2" in fit.acceptance_source
        and "measured at budget 128" in fit.acceptance_source
    )
    # draft: 12.10 tokens a pass x 2.48 forwards per accepted token at budget 128 (halfway in log2 between the
    # measured 11.72 / 4.86 at 64 and 14.57 / 5.73 at 256), each replayed from a CUDA graph: 3.4 GB of packed
    # weights read by torch's int4 kernel (an Ada card, nothing measured: the kernel expected fastest) at
    # TINYGEMM_SHARE of 806 GB/s, 47 / 16 times (its passes over the weights at the search's 32 rows), the
    # 16-bit LM head at 806 GB/s, plus a 2 us gap per kernel (1,253 with the search step)
    memory, flops = RTX_4090
    forwards = 12.10 * (11.72 / 4.86 + (14.57 / 5.73 - 11.72 / 4.86) * 0.5)
    kernels = KERNELS_PER_LAYER * 32 + KERNELS_PER_FORWARD + SEARCH_STEP_KERNELS
    read = 47 / 16 * 32 * DRAFT_4BIT_LAYER / (memory * TINYGEMM_SHARE) + 32000 * 4096 * 2 / memory
    assert fit.draft_seconds == pytest.approx(forwards * (read + kernels * GRAPH_KERNEL_GAP_SECONDS), rel=1e-9)
    assert fit.draft_seconds == pytest.approx(0.8207, abs=1e-4)
    # target: each of the 48 streamed layers copies in 17.1 ms at 25 GB/s while a layer computes in 4.8 ms
    # (129 rows, above the fused kernel's 64: its linears dequantised into 16 bits, written and read back, then
    # memory-bound), the first two copied during the draft's search
    compute = (LAYER + 4 * LAYER_PARAMS_70B) / memory
    assert compute > 2 * LAYER_PARAMS_70B * 129 / flops
    expected = target_pass_seconds(80, spread_layers(80, 32), LAYER / 25e9, compute, 2, fit.draft_seconds)
    assert fit.pass_seconds == pytest.approx(expected, rel=1e-9)
    assert 46 * LAYER / 25e9 < fit.pass_seconds < 48 * LAYER / 25e9 + compute
    assert fit.tokens_per_second == pytest.approx(12.10 / (fit.pass_seconds + fit.draft_seconds), rel=1e-9)
    assert "estimate for PCIe Gen4 x16" in fit.rate_source
    assert fit.reason == "fits: 32 of 80 layers stay on the GPU, 19.2 GB stream from RAM every pass"


def test_the_16bit_draft_option_costs_22_resident_layers_by_hand() -> None:
    """The 16-bit original, as the model manager may pick it: 12.55 GB of VRAM instead of 3.84 GB."""
    machine = hw("gpu24-ram64-pcie4")
    pair = load_catalog().pair(PAPER_PAIR).with_draft("16bit")
    assert pair.draft.repo == "meta-llama/Llama-2-7b-chat-hf" and pair.gated and pair.draft_options[0].id == "4bit"
    fit = predict_pair(pair, machine, 128)
    budget = machine.gpus[0].vram_free_bytes - DRAFT - TARGET_KV - DRAFT_KV - ACTIVATIONS - MARGIN
    assert budget == 6_524_588_288 and (budget - FIXED) // LAYER - 2 == 10
    assert (fit.fit, fit.resident_layers) == ("fits", 10)
    assert fit.host_bytes_needed == 70 * LAYER + 2 * EMBEDDING + GIB
    assert fit.acceptance_source.startswith("SpecExec paper") and pair.acceptance.draft == pair.draft.repo


def test_paper_pair_on_pcie3_streams_the_same_bytes_at_half_the_rate() -> None:
    """The PCIe 3 fixture's RTX 3090: the same 48 layers stream at 12 GB/s; its own memory and matmul rates."""
    from core.models.speed import target_pass_seconds
    from core.planning.residency import spread_layers

    fit = predict_pair(load_catalog().pair(PAPER_PAIR), hw("gpu24-ram64-pcie3"), 128)
    assert fit.resident_layers == 32 and "PCIe Gen3 x16" in fit.rate_source
    compute = max(2 * LAYER_PARAMS_70B * 129 / (36e12 * 0.6), LAYER / (936e9 * 0.8))
    assert fit.pass_seconds == pytest.approx(
        target_pass_seconds(80, spread_layers(80, 32), LAYER / 12e9, compute, 2, fit.draft_seconds), rel=1e-9
    )
    assert fit.pass_seconds > 46 * LAYER / 12e9


def test_paper_pair_on_a_12gb_card_16gb_ram_does_not_fit_and_says_why() -> None:
    pair = load_catalog().pair(PAPER_PAIR)
    fit = predict_pair(pair, hw("gpu12-ram16-pcie3"), 128)
    assert fit.fit == "no" and fit.reason == "needs 33.1 GB of RAM, this PC has 15.5 GB"
    assert fit.resident_layers == 2  # the 4-bit draft leaves room for two layers on a 12 GB card
    # with the 16-bit draft there is no VRAM plan at all, so every layer would stream and be held in host RAM
    sixteen = predict_pair(pair.with_draft("16bit"), hw("gpu12-ram16-pcie3"), 128)
    assert HOST_NEED_ALL_STREAMED / GIB == pytest.approx(33.92, abs=0.01) and DRAFT / GIB == pytest.approx(
        12.55, abs=0.01
    )
    assert sixteen.fit == "no" and sixteen.host_bytes_needed == HOST_NEED_ALL_STREAMED
    assert sixteen.reason == (
        "needs 33.9 GB of RAM, this PC has 15.5 GB; "
        "the draft model alone needs 12.6 GB of VRAM, the GPU has 11.4 GB free"
    )
    assert sixteen.tokens_per_second is None and sixteen.resident_layers is None


def test_paper_pair_runs_on_a_32gb_pc_with_a_24gb_card() -> None:
    """Resident layers take no host RAM: with the 4-bit draft 48 streamed layers + the embedding table + one
    tensor + margin is 21.1 GB, which the 26.0 GB free in the fixture hold; the 16-bit draft leaves room for
    only 10 resident layers, and its 29.9 GB need other programs closed first."""
    pair = load_catalog().pair(PAPER_PAIR)
    fit = predict_pair(pair, hw("gpu24-ram32-pcie4"), 128)
    assert fit.fit == "fits" and fit.resident_layers == 32 and fit.host_bytes_needed == 48 * LAYER + 2 * EMBEDDING + GIB
    sixteen = predict_pair(pair.with_draft("16bit"), hw("gpu24-ram32-pcie4"), 128)
    assert sixteen.host_bytes_needed == 70 * LAYER + 2 * EMBEDDING + GIB
    assert sixteen.fit == "tight" and sixteen.resident_layers == 10
    assert sixteen.reason == "needs 29.9 GB of RAM and 26.0 GB is free now: close other programs first"


@pytest.mark.parametrize(
    "pair_id",
    [
        "llama2-70b-chat-gptq",
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
    ],
)
def test_every_70b_pair_fits_a_32gb_pc_with_a_24gb_card_with_a_4bit_draft(pair_id: str) -> None:
    """Issue 21's bar: at least "tight", with at least 25 of 80 layers resident, at the automatic budget (memory
    planned as the engine loads); with the 16-bit drafts the Llama 3 and Qwen pairs do not fit at all."""
    pair = load_catalog().pair(pair_id)
    fit = predict_pair(pair, hw("gpu24-ram32-pcie4"))
    assert pair.draft_id == "4bit" and fit.fit in ("fits", "tight") and fit.resident_layers >= 25
    sixteen = predict_pair(pair.with_draft("16bit"), hw("gpu24-ram32-pcie4"))
    assert sixteen.resident_layers < 11 and fit.host_bytes_needed < sixteen.host_bytes_needed - 8 * GIB


def test_tight_when_only_an_empty_gpu_would_do() -> None:
    from dataclasses import replace

    pair, machine = load_catalog().pair("qwen2.5-72b-instruct-gptq"), hw("gpu24-ram64-pcie4")
    busy = replace(machine.gpus[0], vram_free_bytes=minimum_vram_bytes(pair) - GIB)  # another program holds VRAM
    fit = predict_pair(pair, replace(machine, gpus=(busy,)))
    assert busy.vram_free_bytes < minimum_vram_bytes(pair) <= busy.vram_total_bytes
    assert fit.fit == "tight" and "close programs that use the GPU" in fit.reason


def test_cpu_only_machine_gets_the_builtin_pair_and_plain_words() -> None:
    result = recommend(load_catalog(), hw("cpu-only-ram16"))
    assert result.recommended == BUILTIN_PAIR_ID and result.pairs[0].pair.id == BUILTIN_PAIR_ID
    for fit in result.pairs[1:]:
        assert fit.fit == "no" and fit.reason.startswith("needs an NVIDIA GPU: this PC has none")
        assert "second" in fit.reason and fit.tokens_per_second < 2


def test_the_builtin_pairs_speed_is_the_one_measured_on_this_computer(monkeypatch, tmp_path) -> None:
    """The estimate from the processor's arithmetic misses what rules a tiny model on a CPU (each forward's fixed
    cost): once the engine has loaded the pair here, its measured figure is what is predicted."""
    import time

    from core.models.measured import MeasuredSpeed, record_speed

    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path))
    pair, cpu = load_catalog().pair(BUILTIN_PAIR_ID), hw("cpu-only-ram16")
    estimate = predict_pair(pair, cpu)
    assert estimate.rate_source.startswith("estimate") and estimate.reason.startswith("fits: it runs on the processor")
    record_speed("builtin", "builtin-draft", "CPU", MeasuredSpeed(1.6, "sequential", 0, time.time()))
    fit = predict_pair(pair, cpu)
    assert (fit.tokens_per_second, fit.tokens_per_pass, fit.budget, fit.draft_seconds) == (1.6, 1.0, 0, 0.0)
    assert fit.rate_source == "measured on this computer today (plain decoding)" and fit.pass_seconds == 1 / 1.6
    assert recommend(load_catalog(), cpu).pairs[0].tokens_per_second == 1.6  # models recommend says the same
    assert predict_pair(pair, hw("gpu12-ram16-pcie3")).rate_source.startswith("estimate")  # CPU timings: not a GPU's
    record_speed("builtin", "builtin-draft", "CPU", MeasuredSpeed(9.0, "specexec", 64, time.time() - 40 * 86400))
    assert predict_pair(pair, cpu).rate_source.startswith("estimate")  # a month-old figure is measured again


@pytest.mark.parametrize("name", fixture_names())
def test_every_fixture_recommends_something_that_fits_and_the_builtin_always_fits(name: str) -> None:
    result = recommend(load_catalog(), hw(name))
    assert result.pairs[0].pair.id == result.recommended and result.pairs[0].fit in ("fits", "tight")
    assert len(result.pairs) == len(load_catalog().pairs)
    assert next(f for f in result.pairs if f.pair.id == BUILTIN_PAIR_ID).fit == "fits"
    json.dumps(result.to_dict())  # serialisable


RANKED = {  # each fixture's order of the offered pairs, as a person would want them shown
    "cpu-only-ram16": [
        "builtin",
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
        "qwen3-32b-awq",
        "llama2-70b-chat-gptq",
    ],
    # Qwen3 32B is tight on 16 GB of RAM (close other programs): offered right after the built-in pair
    "gpu12-ram16-pcie3": [
        "builtin",
        "qwen3-32b-awq",
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
        "llama2-70b-chat-gptq",
    ],
    "gpu12-ram32-pcie4": [
        "qwen3-32b-awq",
        "builtin",
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
        "llama2-70b-chat-gptq",
    ],
    # the 70B pairs are tight on 32 GB of RAM: the 32B that fits first, the paper's pair last though it fits
    "gpu24-ram32-pcie4": [
        "qwen3-32b-awq",
        "builtin",
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
        "llama2-70b-chat-gptq",
    ],
    "gpu24-ram64-pcie3": [
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
        "qwen3-32b-awq",
        "builtin",
        "llama2-70b-chat-gptq",
    ],
    "gpu24-ram64-pcie4": [
        "llama3.3-70b-instruct-awq",
        "deepseek-r1-distill-llama-70b-awq",
        "qwen2.5-72b-instruct-gptq",
        "qwen3-32b-awq",
        "builtin",
        "llama2-70b-chat-gptq",
    ],
}


def test_every_fixture_has_its_expected_order() -> None:
    assert sorted(RANKED) == fixture_names()


@pytest.mark.parametrize("name", sorted(RANKED))
def test_each_fixture_ranks_the_2026_pairs_sensibly(name: str) -> None:
    """The largest model class that fits first, the catalog's preference within a class (Llama 3.3 70B before
    Qwen2.5 72B), never the paper's calibration pair first, never a retired pair at all."""
    result = recommend(load_catalog(), hw(name))
    order = [fit.pair.id for fit in result.pairs]
    assert order == RANKED[name]
    assert result.recommended == order[0] != PAPER_PAIR
    assert not {pair.id for pair in load_catalog().retired} & set(order)


def test_recommendation_with_the_16bit_drafts() -> None:
    # with the 16-bit drafts every 70B pair is tight or worse on the 32 GB PC; Qwen3 32B (its draft is 16-bit) fits
    assert recommend(load_catalog(), hw("gpu24-ram32-pcie4"), draft_id="16bit").recommended == "qwen3-32b-awq"
    assert (
        recommend(load_catalog(), hw("gpu24-ram64-pcie4"), draft_id="16bit").recommended == "llama3.3-70b-instruct-awq"
    )


def test_each_pair_carries_its_other_drafts_predictions_in_the_json_contract() -> None:
    result = recommend(load_catalog(), hw("gpu24-ram32-pcie4")).to_dict()
    llama = next(pair for pair in result["pairs"] if pair["id"] == PAPER_PAIR)
    assert llama["draft"] == {
        "id": "4bit",
        "label": llama["draft"]["label"],
        "repo": "TheBloke/Llama-2-7B-Chat-GPTQ",
        "revision": "main",
        "quantization": "gptq-4bit-128g",
        "download_bytes": 3_900_000_000,
        "gated": False,
    }
    [option] = llama["draft_options"]
    assert option["draft"]["id"] == "16bit" and option["draft"]["repo"] == "meta-llama/Llama-2-7b-chat-hf"
    assert (option["fit"], option["resident_layers"], option["gated"]) == (
        "tight",
        9,
        True,
    )  # the graphs take a layer's room
    assert option["download_bytes"] == llama["download_bytes"] - 3_900_000_000 + 13_480_000_000
    builtin = next(pair for pair in result["pairs"] if pair["id"] == BUILTIN_PAIR_ID)
    assert builtin["draft_options"] == [] and builtin["draft"]["id"] == "builtin-draft"


def test_acceptance_table_interpolates_in_log_budget_and_never_extrapolates() -> None:
    table = Acceptance.from_dict({"source": "s", "tokens_per_pass": {"128": 12.10, "256": 13.46}})
    assert table.at(128) == (12.10, "s; measured at budget 128")
    low, how = table.at(64)  # between the anchor (0 -> 1 token) and 128
    assert low == pytest.approx(1 + (math.log2(65) / math.log2(129)) * 11.10) and "between budgets 0 and 128" in how
    assert table.at(4096)[0] == 13.46 and "held flat" in table.at(4096)[1]
    with pytest.raises(ValueError):
        Acceptance.from_dict({"source": "s", "tokens_per_pass": {"16": 0.5}})


def test_catalog_shapes_match_the_published_sizes_and_minimums() -> None:
    """The shapes give each repo's download size within 0.5% (a tied model's file may also hold its lm_head, as
    Qwen3 0.6B's does), and min RAM/VRAM are what the fit computes."""
    catalog = load_catalog()
    for pair in (*catalog.pairs, *catalog.retired):
        for model in (pair.target, *(option.model for option in pair.drafts)):
            dtype = "float16" if model.weights.bits else model.weights.dtype
            computed = model.shape.num_hidden_layers * decoder_layer_bytes(
                model.shape, model.weights
            ) + non_layer_bytes(model.shape, dtype)
            head = embedding_bytes(model.shape, dtype) if model.shape.tie_word_embeddings else 0
            assert any(size == pytest.approx(model.approx_bytes, rel=0.005) for size in {computed, computed + head}), (
                model.repo
            )
        if pair.id != BUILTIN_PAIR_ID:
            expected = (math.ceil(minimum_ram_bytes(pair) / GIB), math.ceil(minimum_vram_bytes(pair) / GIB))
            assert (pair.min_ram_gb, pair.min_vram_gb) == expected, (
                f"{pair.id}: set min_ram_gb/min_vram_gb to {expected}"
            )
    paper = load_catalog().pair(PAPER_PAIR)
    assert model_bytes_on_gpu(paper.draft) == DRAFT_4BIT
    assert model_bytes_on_gpu(paper.with_draft("16bit").draft) == DRAFT


def test_host_need_is_exactly_what_the_loader_checks(tmp_path) -> None:
    """Same functions, same number: the fit's RAM figure for a real tiny checkpoint is the loader's threshold."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from core.errors import InsufficientHostMemoryError
    from core.offload.loader import load_offloaded

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    AutoModelForCausalLM.from_config(config).to(torch.float16).save_pretrained(str(tmp_path))
    model = ModelRef("tiny", "", "fp16", 0, shape=ModelShape.from_config(config), weights=WeightFormat(dtype="float16"))
    pair = Pair("tiny", "Tiny", "", model, model, "", "", False, 256, 0, 0)
    need = predict_pair(pair, hw("cpu-only-ram16")).host_bytes_needed
    with pytest.raises(InsufficientHostMemoryError):
        load_offloaded(str(tmp_path), "cpu", torch.float16, available_ram_bytes=need - 1)
    lm = load_offloaded(str(tmp_path), "cpu", torch.float16, available_ram_bytes=need)
    assert lm.report.host_store_bytes == 3 * decoder_layer_bytes(model.shape, model.weights)


@pytest.mark.parametrize(
    "pair_id", ["llama2-70b-chat-gptq", "qwen2.5-72b-instruct-gptq", "qwen3-32b-awq", "mixtral-8x7b-instruct-gptq"]
)  # a retired pair is still planned as before
def test_minimum_vram_is_exactly_where_the_default_budget_starts_to_fit(pair_id: str) -> None:
    from dataclasses import replace

    pair, machine = load_catalog().pair(pair_id), hw("gpu24-ram64-pcie4")
    need = minimum_vram_bytes(pair, 128)

    def on(free: int):
        gpu = replace(machine.gpus[0], vram_free_bytes=free, vram_total_bytes=free)
        return predict_pair(pair, replace(machine, gpus=(gpu,)), 128)

    below, at = on(need - 1), on(need)
    assert below.fit == "no" and below.resident_layers is None and "needs at least" in below.reason
    assert at.resident_layers == 0 and at.budget == 1  # the tree budget halved down to one token
    assert at.fit == "tight" and "tree budget drops from 128 to 1" in at.reason


def test_automatic_budget_is_planned_as_the_engine_loads_and_predicted_at_its_fastest() -> None:
    """None (the app's default): memory planned for the largest budget the engine's tuner may pick (what
    the engine loads with), speed at whichever of the tuner's budgets the model predicts fastest."""
    from core.planning.budgets import AUTO_BUDGETS, AUTO_MAX_BUDGET
    from core.decoding.settings import resolve_budget

    assert resolve_budget("auto", "auto") == (AUTO_MAX_BUDGET, True)  # what the engine plans its caches for
    pair, machine = load_catalog().pair(PAPER_PAIR), hw("gpu24-ram64-pcie4")
    auto, planned = predict_pair(pair, machine), predict_pair(pair, machine, AUTO_MAX_BUDGET)
    assert (auto.resident_layers, auto.host_bytes_needed) == (planned.resident_layers, planned.host_bytes_needed)
    assert auto.budget in AUTO_BUDGETS and auto.tokens_per_second >= planned.tokens_per_second
    assert minimum_vram_bytes(pair) == minimum_vram_bytes(pair, AUTO_MAX_BUDGET) > minimum_vram_bytes(pair, 128)


def test_a_longer_context_is_priced_as_the_engine_loads_it() -> None:
    """The context length in Settings sizes both KV caches and the activations: the fit plans for it (at most
    the pair's own limit, as the app's Load says fit_context), so a longer context keeps fewer layers on the
    GPU; the default is 4,096 tokens."""
    machine, catalog = hw("gpu24-ram64-pcie4"), load_catalog()
    llama3, llama2 = catalog.pair("llama3.3-70b-instruct-awq"), catalog.pair(PAPER_PAIR)
    default, long = predict_pair(llama3, machine, 128), predict_pair(llama3, machine, 128, context_length=16384)
    assert (default.planned_context, long.planned_context) == (4096, 16384)
    assert long.resident_layers < default.resident_layers and long.tokens_per_second < default.tokens_per_second
    # 12,288 more rows in the target's cache (80 layers x 8 KV heads x 128 x 2, 16 bits) and the draft's (32 layers)
    more_kv = 12288 * (2 * 80 * 8 * 128 * 2 + 2 * 32 * 8 * 128 * 2)
    assert minimum_vram_bytes(llama3, 128, 16384) - minimum_vram_bytes(llama3, 128, 4096) > more_kv
    assert predict_pair(llama2, machine, 128, context_length=16384).planned_context == 4096  # Llama 2's limit
    whole = predict_pair(llama3, machine, 128, context_length=131072)  # 60 GB of KV caches alone
    assert whole.fit == "no" and "(for 131,072 tokens of a chat: a shorter context length needs less)" in whole.reason
    assert "context" not in predict_pair(llama3, hw("gpu12-ram16-pcie3"), 128).reason  # the default is not the cause
    assert predict_pair(llama2, machine, 128, context_length=16384) == predict_pair(llama2, machine, 128)


def test_recommend_cli_and_the_wizard_plan_for_the_context_length(capsys) -> None:
    from dataclasses import replace

    from app.models.wizard.state import WizardState
    from app.settings.schema import AppSettings
    from core.cli.main import main

    fixture = str(FIXTURES / "gpu24-ram64-pcie4.json")
    assert main(["models", "recommend", "--json", "--hw", fixture, "--context-length", "16384"]) == 0
    planned = {pair["id"]: pair["planned_context"] for pair in json.loads(capsys.readouterr().out)["pairs"]}
    assert planned["llama3.3-70b-instruct-awq"] == 16384 and planned["builtin"] == 8192 and planned[PAPER_PAIR] == 4096
    assert main(["models", "recommend", "--hw", fixture]) == 0
    assert "planned for 4,096 tokens of a chat" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # argparse's usage error, before the catalog is read
        main(["models", "recommend", "--hw", fixture, "--context-length", "10"])
    assert "the context length must be at least 64 tokens" in capsys.readouterr().err
    state = WizardState(replace(AppSettings(), context_length=16384), Path("/nonexistent"))
    fits = {fit.pair.id: fit for fit in state.predict(hw("gpu24-ram64-pcie4")).recommendation.pairs}
    assert fits["llama3.3-70b-instruct-awq"].planned_context == 16384


def test_recommend_cli_ranks_with_another_draft_and_refuses_an_unknown_one(capsys) -> None:
    from core.cli.main import main

    fixture = str(FIXTURES / "gpu24-ram32-pcie4.json")
    assert main(["models", "recommend", "--json", "--hw", fixture, "--draft", "16bit"]) == 0
    result = json.loads(capsys.readouterr().out)
    llama = next(pair for pair in result["pairs"] if pair["id"] == PAPER_PAIR)
    assert llama["draft"]["id"] == "16bit" and llama["draft_options"][0]["draft"]["id"] == "4bit"
    assert result["recommended"] == "qwen3-32b-awq"
    assert main(["models", "recommend", "--hw", fixture]) == 0
    table = capsys.readouterr().out
    assert "4bit" in table and "16bit" in table and "--draft ID" in table
    assert main(["models", "recommend", "--hw", fixture, "--draft", "fp8"]) == 2
    assert "no pair offers a draft 'fp8'" in capsys.readouterr().err


def test_a_download_the_models_drive_cannot_hold_is_marked_as_the_downloader_would_refuse_it(tmp_path, capsys):
    """disk_ok follows the downloader's rule (the download with 512 MB left over on the drive), and the
    table marks such a download and says what to do (the wizard's card says it in words too)."""
    from core.cli.main import main

    data = json.loads((FIXTURES / "gpu24-ram64-pcie4.json").read_text())
    llama = load_catalog().pair("llama3.3-70b-instruct-awq")
    for free, fits in ((llama.download_bytes + (100 << 20), False), (llama.download_bytes + (600 << 20), True)):
        data["disk"]["free_bytes"] = free
        assert predict_pair(llama, HardwareDescription.from_dict(data, source="fixture")).disk_ok is fits
    data["disk"]["free_bytes"] = 30 * GIB
    fixture = tmp_path / "hw.json"
    fixture.write_text(json.dumps(data))
    assert main(["models", "recommend", "--hw", str(fixture)]) == 0
    table = capsys.readouterr().out
    assert "42.4 GB*" in table and " 19.4 GB " in table and "built-in*" not in table
    assert "* More than the drive holding the models has free (with 512.0 MB left over)" in table
    data["disk"]["free_bytes"] = 500 * GIB
    fixture.write_text(json.dumps(data))
    assert main(["models", "recommend", "--hw", str(fixture)]) == 0
    assert "*" not in capsys.readouterr().out


def test_a_card_before_ampere_prices_the_4bit_draft_as_dequantise_then_gemm() -> None:
    """Turing has neither torch's int4 kernel (compute capability 8.0 and newer) nor a tensor-core tl.dot, so
    the engine dequantises a draft's batches there; from Ampere on it runs the int4 kernel, and where the card's
    kernels were measured (hw --measure, the doctor), the fastest measured one."""
    from dataclasses import replace

    machine = hw("gpu24-ram64-pcie4")
    turing = replace(
        machine, gpus=(replace(machine.gpus[0], name="NVIDIA GeForce RTX 2080 Ti", compute_capability="7.5"),)
    )
    ampere = replace(
        machine, gpus=(replace(machine.gpus[0], name="NVIDIA GeForce RTX 2080 Ti", compute_capability="8.6"),)
    )
    measured = replace(
        machine, gpus=(replace(ampere.gpus[0], draft_kernel_bytes_per_second={"tinygemm": 100e9, "fused": 300e9}),)
    )
    pair = load_catalog().pair(PAPER_PAIR)
    slow, fast, chosen = (predict_pair(pair, machine_, 128, overlap=False) for machine_ in (turing, ampere, measured))
    assert slow.resident_layers == fast.resident_layers and slow.draft_seconds != fast.draft_seconds
    from core.models.gpu_specs import gpu_specs
    from core.models.speed import DraftKernel, GpuRates, draft_seconds

    rates = GpuRates.from_specs(25e9, gpu_specs("NVIDIA GeForce RTX 2080 Ti"))
    for fit, kernel, gpu in (
        (slow, DraftKernel.DEQUANTISE, rates),
        (fast, DraftKernel.TINYGEMM, rates),
        (chosen, DraftKernel.FUSED, replace(rates, measured_kernels={"tinygemm": 100e9, "fused": 300e9})),
    ):
        assert fit.draft_seconds == pytest.approx(
            draft_seconds(pair.draft.shape, pair.draft.weights, 128, fit.tokens_per_pass, gpu, kernel), rel=1e-9
        )


# --- what cannot stay pinned (issue 40) --------------------------------------------------------------------


def _on(machine, **platform):
    from dataclasses import replace

    return replace(machine, platform={**machine.platform, **platform})


def test_where_locking_is_capped_the_rest_is_priced_through_the_staging_ring() -> None:
    from core.models.copy_paths import copy_paths

    linux = hw("gpu24-ram64-pcie4")
    streamed = 60 * LAYER
    paths, words = copy_paths(LAYER, streamed, linux, 25e9)
    assert words is None and paths.layer_seconds(LAYER) == pytest.approx(LAYER / 25e9)
    # Windows on 32 GB: half of it locked, the ring's 4 buffers (25 GB/s over 8 GB/s per filling thread) first
    small = hw("gpu24-ram32-pcie4")
    paths, words = copy_paths(LAYER, streamed, _on(small, system="Windows"), 25e9)
    half = small.ram.total_bytes // 2
    assert paths.staged == 24e9 and paths.pinned_share == pytest.approx((half - 4 * LAYER) / streamed)
    assert words.startswith("Windows lets a program lock only about half of the memory, so ")
    assert "through a staging ring of 4 pinned buffers (~24 GB/s" in words
    # WSL2: 0.75 GiB holds one 70B layer, not a ring of two: the rest copies from pageable memory
    paths, words = copy_paths(LAYER, streamed, _on(linux, wsl="yes"), 25e9)
    assert paths.staged == pytest.approx(25e9 * 0.35) and paths.pinned_share == pytest.approx(0.75 * GIB / streamed)
    assert "WSL2 lets a program lock under 1 GiB" in words and "from pageable memory" in words
    # a person's limit of 0: every streamed layer stages, the ring beside the limit
    paths, words = copy_paths(LAYER, streamed, linux, 25e9, limit=0)
    assert paths.pinned_share == 0 and words.startswith("SPECEXEC_PIN_LIMIT_GB caps locking at 0.0 GB")


def test_the_pin_limit_slows_the_prediction_and_says_so(monkeypatch) -> None:
    pair = load_catalog().pair(PAPER_PAIR)
    machine = hw("gpu24-ram64-pcie4")
    free = predict_pair(pair, machine, 128)
    monkeypatch.setenv("SPECEXEC_PIN_LIMIT_GB", "2")
    capped = predict_pair(pair, machine, 128)
    assert capped.pass_seconds > free.pass_seconds and "SPECEXEC_PIN_LIMIT_GB caps locking at 2.0 GB" in capped.reason
    monkeypatch.setenv("SPECEXEC_PIN_LIMIT_GB", "lots")  # the engine refuses it at load; the prediction goes on
    assert predict_pair(pair, machine, 128).pass_seconds == free.pass_seconds


def test_windows_prices_the_4bit_draft_by_whether_triton_is_there() -> None:
    """On a Turing card (no torch int4 kernel) a Windows draft dequantises with Triton's kernel when
    triton-windows is installed, and unpacks with PyTorch operations without it."""
    from dataclasses import replace

    from core.models.gpu_specs import gpu_specs
    from core.models.speed import DraftKernel, GpuRates, draft_seconds

    pair = load_catalog().pair(PAPER_PAIR)
    machine = hw("gpu24-ram64-pcie4")
    turing = replace(
        machine, gpus=(replace(machine.gpus[0], name="NVIDIA GeForce RTX 2080 Ti", compute_capability="7.5"),)
    )
    without = predict_pair(pair, _on(turing, system="Windows", triton=""), 128, overlap=False)
    with_triton = predict_pair(pair, _on(turing, system="Windows", triton="3.7.1.post27"), 128, overlap=False)
    rates = GpuRates.from_specs(25e9, gpu_specs("NVIDIA GeForce RTX 2080 Ti"))
    for fit, kernel in ((without, DraftKernel.EAGER_DEQUANTISE), (with_triton, DraftKernel.DEQUANTISE)):
        assert fit.draft_seconds == pytest.approx(
            draft_seconds(pair.draft.shape, pair.draft.weights, 128, fit.tokens_per_pass, rates, kernel), rel=1e-9
        )
    assert with_triton.tokens_per_second > without.tokens_per_second
