"""The speed model (core/models/speed.py) by hand, and against every offloaded row of the SpecExec paper
(core/bench/calibration.py)."""

from __future__ import annotations

import dataclasses

import pytest

from core.bench.calibration import PAPER_ROWS, TOLERANCE, predict_row
from core.models import speed
from core.models.gpu_specs import gpu_specs
from core.models.speed import (
    DraftKernel,
    GpuRates,
    draft_forwards,
    draft_seconds,
    layer_compute_seconds,
    MEASURED_OVERLAP,
    OVERLAP_MEASURED,
    OverlapPrice,
    target_pass_seconds,
)
from core.planning.graph_plan import pool_forwards
from core.planning.sizes import ModelShape, WeightFormat, decoder_layer_bytes

LLAMA_7B = ModelShape("llama", 32, 4096, 11008, 32, 32, 32000, 128)
LLAMA_70B = ModelShape("llama", 80, 8192, 28672, 64, 8, 32000, 128)
FOUR_BIT = WeightFormat(bits=4, group_size=128)


def test_copy_bound_pass_is_every_copy_then_one_compute():
    assert target_pass_seconds(10, (), copy_seconds=2.0, compute_seconds=0.5, slots=2) == pytest.approx(10 * 2.0 + 0.5)


def test_compute_bound_pass_is_one_copy_then_every_compute():
    assert target_pass_seconds(10, (), copy_seconds=0.5, compute_seconds=2.0, slots=2) == pytest.approx(0.5 + 10 * 2.0)


def test_prefetch_during_drafting_hides_the_first_copies_only():
    # both ring slots are filled while the draft searches; the third copy waits for layer 0 to free slot 0,
    # then the other 8 copies run back to back: 0.5 + 8 x 2.0 + the last layer's 0.5
    assert target_pass_seconds(10, (), 2.0, 0.5, 2, prefetch_seconds=4.0) == pytest.approx(0.5 + 8 * 2.0 + 0.5)
    assert target_pass_seconds(10, (), 2.0, 0.5, 2, prefetch_seconds=100.0) == pytest.approx(0.5 + 8 * 2.0 + 0.5)
    # a 1 s search hides 1 s of the first copy; the rest of the 10 copies follow one another
    assert target_pass_seconds(10, (), 2.0, 0.5, 2, prefetch_seconds=1.0) == pytest.approx(10 * 2.0 - 1.0 + 0.5)


def test_resident_layers_compute_while_the_copy_engine_works_ahead():
    # 4 layers, 1 and 3 resident: copies of 0 and 2 back to back; layer 1 runs during copy 2
    assert target_pass_seconds(4, (1, 3), 2.0, 0.5, 2) == pytest.approx(2.0 + 2.0 + 0.5 + 0.5)
    # a one-slot ring cannot copy a layer before the previous one has run: copy, compute, copy, compute...
    assert target_pass_seconds(3, (), 2.0, 0.5, 1) == pytest.approx(3 * (2.0 + 0.5))
    assert target_pass_seconds(3, (), 2.0, 3.0, 1) == pytest.approx(2.0 + 3.0 + 2.0 + 3.0 + 2.0 + 3.0)


def test_draft_forwards_scale_with_the_depth_the_accepted_tokens_imply():
    per_token = dict(speed.DRAFT_FORWARDS_PER_TOKEN)
    assert draft_forwards(256, 5.82) == pytest.approx(per_token[256] * 5.82)  # the built-in pair's own count
    assert draft_forwards(256, 13.46) == speed.MAX_DRAFT_FORWARDS  # deep trees hit the search's cap
    assert draft_forwards(1, 1.0) == 1.0 and draft_forwards(16, 0.1) == 1.0
    assert (
        per_token[64] < draft_forwards(128, 1.0) < per_token[256]
        or per_token[256] < draft_forwards(128, 1.0) < per_token[64]
    )


def test_an_eager_4bit_draft_forward_is_launch_bound_and_a_16bit_one_reads_its_weights():
    gpu = GpuRates(h2d=25e9, memory=800e9, flops=100e12, measured_kernels={"fused": 800e9})  # at full speed
    kernels = speed.KERNELS_PER_LAYER * 32 + speed.KERNELS_PER_FORWARD + speed.SEARCH_STEP_KERNELS
    forwards = draft_forwards(64, 6.0)
    fp16_bytes = 32 * decoder_layer_bytes(LLAMA_7B, WeightFormat()) + 32000 * 4096 * 2
    packed_bytes = 32 * decoder_layer_bytes(LLAMA_7B, FOUR_BIT) + 32000 * 4096 * 2
    eager = speed.DraftLaunch.EAGER
    fused = DraftKernel.FUSED
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, gpu, fused, launch=eager) == pytest.approx(
        forwards * kernels * speed.LAUNCH_SECONDS
    )
    assert draft_seconds(LLAMA_7B, WeightFormat(), 64, 6.0, gpu, launch=eager) == pytest.approx(
        forwards * fp16_bytes / 800e9
    )
    # replayed from a CUDA graph (the engine's default on CUDA): the GPU's time plus a gap per kernel, the
    # host's launches hidden behind it
    gaps = kernels * speed.GRAPH_KERNEL_GAP_SECONDS
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, gpu, fused) == pytest.approx(
        forwards * (packed_bytes / 800e9 + gaps)
    )
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, gpu, fused) < 0.7 * draft_seconds(
        LLAMA_7B, FOUR_BIT, 64, 6.0, gpu, fused, launch=eager
    )
    tiny = dataclasses.replace(
        LLAMA_7B,
        num_hidden_layers=1,
        hidden_size=64,
        intermediate_size=128,
        vocab_size=64,
        num_attention_heads=2,
        num_key_value_heads=2,
        head_dim=32,
    )
    host = speed.SEARCH_STEP_KERNELS * speed.LAUNCH_SECONDS + speed.GRAPH_REPLAY_SECONDS  # a tiny draft: host-bound
    assert draft_seconds(tiny, FOUR_BIT, 64, 6.0, gpu, fused) == pytest.approx(forwards * host)
    # dequantise-then-GEMM writes the 16-bit weights and reads them back: slower than a 16-bit draft
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, gpu, DraftKernel.DEQUANTISE) > draft_seconds(
        LLAMA_7B, WeightFormat(), 64, 6.0, gpu
    )


def test_the_draft_reads_its_packed_weights_at_its_kernels_rate_or_its_eager_unpacking():
    """A card's measured rate of the kernel that runs (hw --measure, the doctor) prices the packed weights;
    without one, that kernel's stated default share of the memory rate; torch's int4 kernel passes over them
    (rows + 15) / 16 times at the search's width; without Triton (Windows), the eager dequantisation's bytes."""
    layers = 32 * decoder_layer_bytes(LLAMA_7B, FOUR_BIT)
    head = 32000 * 4096 * 2
    linears = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    kernels = speed.KERNELS_PER_LAYER * 32 + speed.KERNELS_PER_FORWARD + speed.SEARCH_STEP_KERNELS
    gaps = kernels * speed.GRAPH_KERNEL_GAP_SECONDS
    forwards = draft_forwards(64, 6.0)
    unmeasured = GpuRates(h2d=25e9, memory=800e9, flops=1e18)
    assert unmeasured.kernel_rate(DraftKernel.FUSED) == 800e9 * speed.FUSED_MATMUL_SHARE
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, unmeasured, DraftKernel.FUSED) == pytest.approx(
        forwards * (layers / (800e9 * speed.FUSED_MATMUL_SHARE) + head / 800e9 + gaps)
    )
    measured = dataclasses.replace(unmeasured, measured_kernels={"fused": 500e9, "tinygemm": 600e9})
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, measured, DraftKernel.FUSED) == pytest.approx(
        forwards * (layers / 500e9 + head / 800e9 + gaps)
    )
    # tinygemm: the search's 32 rows (search_width(64)) pass over the weights 47 / 16 times
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, measured) == pytest.approx(
        forwards * (47 / 16 * layers / 600e9 + head / 800e9 + gaps)
    )
    assert draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, unmeasured, DraftKernel.TINYGEMM) == pytest.approx(
        forwards * (47 / 16 * layers / (800e9 * speed.TINYGEMM_SHARE) + head / 800e9 + gaps)
    )
    eager = draft_seconds(LLAMA_7B, FOUR_BIT, 64, 6.0, unmeasured, DraftKernel.EAGER_DEQUANTISE)
    assert eager == pytest.approx(
        forwards * ((layers + head + speed.EAGER_DEQUANT_BYTES_PER_WEIGHT * linears) / 800e9 + gaps)
    )
    assert eager > 5 * draft_seconds(LLAMA_7B, WeightFormat(), 64, 6.0, unmeasured)  # worse than a 16-bit draft


def test_target_layer_compute_dequantises_above_the_fused_kernels_rows():
    gpu = GpuRates(h2d=25e9, memory=1e12, flops=1e18)  # memory-bound
    packed = decoder_layer_bytes(LLAMA_70B, FOUR_BIT)
    assert layer_compute_seconds(LLAMA_70B, FOUR_BIT, 64, gpu) == pytest.approx(packed / 1e12)
    linears = 2 * 8192 * 8192 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    assert layer_compute_seconds(LLAMA_70B, FOUR_BIT, 65, gpu) == pytest.approx((packed + 4 * linears) / 1e12)


def test_fused_row_limit_agrees_with_the_kernel():
    from core.offload.gptq_matmul import FUSED_MATMUL_MAX_ROWS

    assert speed.FUSED_MATMUL_MAX_ROWS == FUSED_MATMUL_MAX_ROWS


def test_gpu_specs_by_name():
    assert gpu_specs("NVIDIA GeForce RTX 4060 Ti").memory_bytes_per_second == 288e9  # not the RTX 4060's
    assert gpu_specs("NVIDIA A100-SXM4-80GB").flops == 312e12
    assert "estimate" in gpu_specs("NVIDIA Quadro P1000").source


def _ratio(row) -> float:
    return predict_row(row).ratio


@pytest.mark.parametrize(
    "row",
    [r for r in PAPER_ROWS if r.target.startswith("Llama") and r.gpu != "RTX 4060"],
    ids=lambda r: (
        f"T{r.table}-{r.gpu}-{'GPTQ' if r.gptq else '16bit'}-{r.dataset}-t{r.temperature}-{r.method}{r.budget}"
    ),
)
def test_every_llama_row_of_the_paper_within_tolerance(row):
    assert abs(_ratio(row) - 1) <= TOLERANCE


def test_the_rows_the_model_does_not_explain_are_the_documented_ones():
    """Mixtral (the paper's per-expert code) and the RTX 4060 (its figures imply 24.5 GB/s over an x8 link):
    docs/benchmarks.md, issue 21, says why for each."""
    off = {(r.target, r.gpu) for r in PAPER_ROWS if abs(_ratio(r) - 1) > TOLERANCE}
    assert off == {("Mixtral-8x7B", "A100"), ("Llama 2-70B", "RTX 4060")}
    mixtral = [r for r in PAPER_ROWS if r.target.startswith("Mixtral")]
    assert all(_ratio(r) > 1.5 for r in mixtral)  # the paper's MoE path was slow, not ours fast


def test_moe_tokens_only_pay_for_their_routed_experts():
    mixtral = ModelShape("mixtral", 32, 4096, 14336, 32, 8, 32000, 128, num_local_experts=8, num_experts_per_tok=2)
    attention, expert = 2 * 4096 * 4096 + 2 * 4096 * 1024, 3 * 4096 * 14336
    embeddings = 2 * 32000 * 4096
    assert mixtral.parameters == 32 * (attention + 8 * expert) + embeddings
    assert mixtral.active_parameters == 32 * (attention + 2 * expert) + embeddings
    unrouted = ModelShape("mixtral", 32, 4096, 14336, 32, 8, 32000, 128, num_local_experts=8)  # count unknown
    assert unrouted.active_parameters == unrouted.parameters


def test_the_overlap_spares_the_kept_passes_share_of_forwards_where_the_shadow_fits():
    """keep rate x saving of the forwards, the keep scaled by the share of the shadow's wanted forwards (its
    pool once, core.planning.graph_plan.pool_forwards) the target's pass holds; never below the catch-up."""
    price = OverlapPrice.flat(0.5, 0.4)
    assert pool_forwards(256, 32) == 32 and pool_forwards(64, 32) == 8
    assert price.critical_forwards(20.0, 10.0, 0.05, 256, 32) == pytest.approx(20.0 * (1 - 0.2))  # 200 fit, 32 wanted
    assert price.critical_forwards(20.0, 0.8, 0.05, 256, 32) == pytest.approx(20.0 * (1 - 0.2 * 16 / 32))
    assert OverlapPrice.flat(1.0, 1.0).critical_forwards(20.0, 10.0, 0.05, 256, 32) == 1.0
    assert OverlapPrice.flat(0.5, -0.3).critical_forwards(20.0, 10.0, 0.05, 256, 32) == 20.0  # a loss is not priced
    assert price.critical_forwards(1.0, 10.0, 0.05, 256, 32) == 1.0


def test_the_measured_overlap_is_priced_at_the_budget_that_runs():
    """Each measured budget gets its own measurement; between two, keep rate and saving follow log2(budget) in a
    straight line; outside them, the nearest one's. At budget 256 (the 70B pairs') the kept subtree spares less
    than at 32-64, as measured (core.models.speed.OVERLAP_MEASURED)."""
    price = OverlapPrice(((32, 0.2, 0.4), (128, 0.6, 0.2)))
    assert price.at(32) == pytest.approx((0.2, 0.4)) and price.at(128) == pytest.approx((0.6, 0.2))
    assert price.at(64) == pytest.approx((0.4, 0.3))  # half way on log2(budget)
    assert price.at(8) == (0.2, 0.4) and price.at(1024) == (0.6, 0.2)
    assert price.critical_forwards(20.0, 10.0, 0.05, 64, 32) == pytest.approx(20.0 * (1 - 0.4 * 0.3))
    for budget, keep_rate, saving in OVERLAP_MEASURED:
        assert MEASURED_OVERLAP.at(budget) == pytest.approx((keep_rate, saving))
    spared = {budget: 1 - MEASURED_OVERLAP.critical_forwards(20.0, 10.0, 0.05, budget, 32) / 20 for budget in (64, 256)}
    assert spared[256] < spared[64]


def test_the_shadow_is_sized_like_the_engines():
    """The price's pool is the engine's (core.decoding.methods.specexec.shadow_cap)."""
    from core.decoding.methods.specexec import shadow_cap

    for budget, width in ((32, 32), (64, 32), (256, 32), (1024, 128)):
        assert shadow_cap(budget, width) == min(speed.MAX_DRAFT_FORWARDS, pool_forwards(budget, width))


# An 8B draft layer's products (2 q/o, 2 k/v, 2 gate/up, 1 down) on the first H100 run (docs/benchmarks.md,
# issue 37, "First run"): its packed bytes, and tinygemm's / the fused kernel's microseconds at 1, 16, 32, 64 rows.
H100_LAYER_BYTES = 113_311_744
H100_LAYER_US = {"tinygemm": (218, 443, 637, 1113), "fused": (998, 981, 935, 1085)}
H100_ROWS = (1, 16, 32, 64)


def _h100_rows() -> list[dict]:
    """The H100's layer as `kernel_rates` reads `bench matmul`'s rows."""
    return [
        {"rows": rows, "bytes": H100_LAYER_BYTES, **{f"{k}_s": us[i] * 1e-6 for k, us in H100_LAYER_US.items()}}
        for i, rows in enumerate(H100_ROWS)
    ]


def test_a_kernels_measured_rate_prices_its_time_at_every_row_count():
    """The rate `hw --measure` records (over rows 1-64) and the speed model's passes over the weights give back
    the H100's measured time of each row count within 3%: measurement and model in one unit (they were not:
    tinygemm's rate counted one read per product, and the model charged it again per 16-row tile)."""
    from core.offload.matmul_rate import kernel_rates
    from core.planning.draft_kernel import weight_passes

    rates = kernel_rates(_h100_rows(), ("tinygemm", "fused"))
    for kernel, times in H100_LAYER_US.items():
        for rows, us in zip(H100_ROWS, times):
            priced = H100_LAYER_BYTES * weight_passes(kernel, rows) / rates[kernel]
            assert priced == pytest.approx(us * 1e-6, rel=0.12 if kernel == "fused" else 0.03)


def test_the_kernel_chosen_is_the_fastest_at_the_rows_it_multiplies():
    """A rate in the one unit says how fast a kernel passes over the weights; tinygemm passes more often as the
    rows grow, so the choice depends on the rows: the search's width by default."""
    from core.offload.matmul_rate import kernel_rates
    from core.planning.draft_kernel import FUSED, TINYGEMM, choose_kernel

    available = (TINYGEMM, FUSED)
    assert choose_kernel(available, kernel_rates(_h100_rows(), available)) == TINYGEMM  # the H100: 637 vs 935 us
    rates = {TINYGEMM: 400e9, FUSED: 200e9}
    assert choose_kernel(available, rates, rows=1) == TINYGEMM  # one pass at 400 against one at 200
    assert choose_kernel(available, rates, rows=16) == TINYGEMM  # 31/16 passes: 206 GB/s of weights
    assert choose_kernel(available, rates) == FUSED  # 32 rows: 47/16 passes, 136 GB/s of weights
    assert choose_kernel(available, {}) == TINYGEMM  # nothing measured: the first available


@pytest.mark.parametrize(
    "rate",
    ["fast", None, True, 0, -1.0, float("nan"), float("inf"), 1e400, 10**400, [1e11]],
    ids=lambda v: repr(v)[:12],
)
def test_a_cached_kernel_rate_that_is_not_a_rate_is_measured_again(rate):
    """The draft-kernel cache is a file in the user's cache folder: a rate edited by hand (10**400 made the
    choice's division overflow at every load on a GPU) sends the engine to measure again."""
    from core.offload.draft_kernels import cached_rates
    from core.planning.draft_kernel import FUSED, TINYGEMM, choose_kernel

    entries = {"card": {TINYGEMM: 500e9, FUSED: 100e9}, "damaged": {TINYGEMM: 500e9, FUSED: rate}, "text": "x"}
    assert cached_rates(entries, "card") == {TINYGEMM: 500e9, FUSED: 100e9}
    assert choose_kernel((TINYGEMM, FUSED), cached_rates(entries, "card")) == TINYGEMM
    assert cached_rates(entries, "damaged") is None
    assert cached_rates(entries, "text") is None and cached_rates(entries, "absent") is None
