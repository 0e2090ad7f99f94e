"""Will a catalog pair run on this machine, and how fast? Pure arithmetic, no torch (the app imports it).

One source of truth: the memory questions are answered by the functions the loader itself calls
(`core.planning.sizes` for layer / non-layer / scratch bytes, `core.planning.host_memory` for the RAM check,
`core.planning.residency` for the default VRAM budget and the resident layers), so the prediction and a real
load cannot disagree about what fits. Mirroring `core.cli.pair.load_pair`: the draft loads first, so free
VRAM for the target's plan is what the draft leaves, and the draft's KV cache is reserved
(`OffloadSettings.with_draft`).

A tree budget of None is the automatic one (the app's default): memory is planned for the largest budget
the engine may choose (AUTO_MAX_BUDGET, as the engine loads), and the speed is the best of the budgets it
chooses from (AUTO_BUDGETS) under this model, as the engine's tuner picks by measured speed.

Speed on a GPU (`core.models.pass_speed`, priced by `core.models.speed`): per target layer the larger of its copy (streamed bytes over the
host-to-device rate, measured or estimated from the PCIe link: `core.hardware.link`) and its compute, with the
next pass's first layers copied while the draft searches; where the system caps page-locked memory
(Windows, WSL2) or SPECEXEC_PIN_LIMIT_GB does, the part past the cap is priced at the staging ring's rate
(`core.models.copy_paths`); the draft priced from the bytes its forwards read
and the kernels they launch, at the forward counts the engine runs; the card's memory and matmul rates from
`core.models.gpu_specs`. docs/benchmarks.md (issue 21) checks this model against every offloaded row of the
SpecExec paper (`specexec bench calibration`). Tokens per pass come from the acceptance table measured with
the pair's draft. On a CPU: FLOPs at an assumed rate per core.

Each pair is predicted with its own draft (4 bits for the big pairs) and, in `draft_options`, with each other
draft it offers, so the model manager can show what the 16-bit draft would cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from core.planning.budgets import AUTO_MAX_BUDGET
from core.errors import InsufficientHostMemoryError, InsufficientVRAMError
from core.planning.graph_plan import draft_graph_bytes, scratch_estimate_bytes, search_width
from core.hardware.description import GpuInfo, HardwareDescription
from core.hardware.link import h2d_rate
from core.models.catalog import BUILTIN_PAIR_ID, Catalog, ModelRef, Pair
from core.models.measured import measured_speed
from core.planning import residency
from core.models.copy_paths import copy_paths, measured_pin_budget_here
from core.models.pass_speed import (
    GPU_DTYPE,
    GPU_DTYPE_BYTES,
    budgets_weighed,
    cpu_flops,
    cpu_timing,
    engine_draft_kernel,
    fastest,
    gpu_format,
    gpu_pass,
    gpu_rates,
    tokens_per_pass,
)
from core.models.speed import MEASURED_OVERLAP
from core.system.disk import SPARE_BYTES
from core.planning.host_memory import check_host_memory, embedding_in_host_ram, host_bytes_needed, host_table_bytes
from core.planning.sizes import (
    ModelShape,
    decoder_layer_bytes,
    embedding_bytes,
    gptq_scratch_bytes,
    largest_checkpoint_tensor,
    largest_gptq_linear,
    format_bytes,
    non_layer_bytes,
)

# Below this a pair is not recommended even when it fits: answers would crawl.
MIN_RECOMMENDED_TOKENS_PER_SECOND = 1.0
FIT_ORDER = {"fits": 0, "tight": 1, "no": 2}


@dataclass(frozen=True)
class PairFit:
    """The prediction for one pair on one machine (`to_dict` is the `models recommend --json` contract)."""

    pair: Pair
    fit: str  # "fits" | "tight" | "no"
    reason: str
    resident_layers: int | None
    total_layers: int
    pass_seconds: float | None
    budget: int
    tokens_per_pass: float
    acceptance_source: str
    tokens_per_second: float | None  # tokens per pass / (target pass + draft tree)
    draft_seconds: float | None  # building the draft tree for one pass (estimate)
    rate_source: str
    host_bytes_needed: int
    disk_ok: bool | None
    draft_options: tuple["PairFit", ...] = ()  # the same pair with each other draft it offers
    draft_graph_bytes: int = 0  # VRAM the draft's CUDA graphs may keep, reserved in the plan (GPU only)
    planned_context: int = residency.PLANNED_CONTEXT  # tokens of a chat the KV caches were priced for

    def to_dict(self) -> dict[str, Any]:
        pair = self.pair
        draft = pair.draft
        return {
            "id": pair.id,
            "name": pair.name,
            "summary": pair.summary,
            "fit": self.fit,
            "reason": self.reason,
            "resident_layers": self.resident_layers,
            "total_layers": self.total_layers,
            "pass_seconds": _round(self.pass_seconds),
            "budget": self.budget,
            "tokens_per_pass": round(self.tokens_per_pass, 2),
            "acceptance_source": self.acceptance_source,
            "tokens_per_second": _round(self.tokens_per_second),
            "draft_seconds": _round(self.draft_seconds),
            "rate_source": self.rate_source,
            "host_bytes_needed": self.host_bytes_needed,
            "draft_graph_bytes": self.draft_graph_bytes,
            "download_bytes": pair.download_bytes,
            "disk_ok": self.disk_ok,
            "licence": pair.licence,
            "licence_url": pair.licence_url,
            "gated": pair.gated,
            "context_length": pair.context_length,
            "planned_context": self.planned_context,
            "draft": {
                "id": pair.draft_id,
                "label": pair.draft_label,
                "repo": draft.repo,
                "revision": draft.revision,
                "quantization": draft.quantization,
                "download_bytes": draft.approx_bytes,
                "gated": draft.gated,
            },
            "draft_options": [option.to_dict() for option in self.draft_options],
        }


@dataclass(frozen=True)
class Recommendation:
    hardware: HardwareDescription
    recommended: str
    pairs: tuple[PairFit, ...]  # the recommended pair first
    overlap: bool = True  # predicted with drafting while the target streams

    def to_dict(self) -> dict[str, Any]:
        return {
            "hardware": self.hardware.to_dict(),
            "recommended": self.recommended,
            "overlap": self.overlap,
            "pairs": [fit.to_dict() for fit in self.pairs],
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def model_bytes_on_gpu(model: ModelRef) -> int:
    """VRAM of a model loaded whole onto the GPU (the draft), as the loader packs it: its layers (GPTQ stays
    packed, with the dequantisation scratch that batches above the fused kernel's rows use; others in 16 bits)
    and the non-layer weights in 16 bits (core.offload.loader.load_on_device checks the same sum)."""
    shape = model.shape
    fmt = gpu_format(model)
    scratch = gptq_scratch_bytes(largest_gptq_linear(shape), GPU_DTYPE_BYTES) if fmt.bits is not None else 0
    return shape.num_hidden_layers * decoder_layer_bytes(shape, fmt) + non_layer_bytes(shape, GPU_DTYPE) + scratch


@dataclass(frozen=True)
class _Plan:
    """The offloaded target's plan under one amount of free VRAM, or the reason it does not fit."""

    plan: residency.ResidencyPlan | None
    tree_budget: int
    problem: str | None


def _target_on_gpu(pair: Pair) -> tuple[list[int], int]:
    """(bytes of each decoder layer, fixed VRAM: non-layer weights less an embedding table kept in host RAM,
    plus the GPTQ scratch), as the loader plans them."""
    target = pair.target.shape
    layer_bytes = [decoder_layer_bytes(target, pair.target.weights)] * target.num_hidden_layers
    scratch = gptq_scratch_bytes(largest_gptq_linear(target) if pair.target.weights.bits else 0, GPU_DTYPE_BYTES)
    fixed = residency.device_fixed_bytes(
        non_layer_bytes(target, GPU_DTYPE), embedding_bytes(target, GPU_DTYPE), _embedding_on_host(target), scratch
    )
    return layer_bytes, fixed


def _embedding_on_host(target: ModelShape) -> bool:
    """An offloaded target on a GPU streams, so it keeps an untied embedding table in host RAM."""
    return embedding_in_host_ram(streaming=True, tied=target.tie_word_embeddings)


def _draft_kv_bytes(pair: Pair, tree_budget: int, context: int) -> int:
    """The draft's KV cache as `OffloadSettings.with_draft` reserves it: the rows it is preallocated with."""
    rows = residency.kv_rows(context, tree_budget)
    return residency.config_kv_bytes(pair.draft.shape, rows, GPU_DTYPE_BYTES)


def _draft_graph_bytes(pair: Pair, tree_budget: int, context: int) -> int:
    """What the draft's CUDA graphs may keep, as `OffloadSettings.with_draft` reserves it, from the torch-free
    estimate of their scratch (core/planning/graph_plan.py; the engine computes it on the meta device)."""
    draft = pair.draft.shape
    rows = residency.kv_rows(context, tree_budget)
    width = search_width(tree_budget)
    scratch = scratch_estimate_bytes(draft, GPU_DTYPE_BYTES, width, rows)
    return draft_graph_bytes(scratch, draft.hidden_size, GPU_DTYPE_BYTES, width, rows)


def _plan_on_gpu(pair: Pair, free_vram: int, tree_budget: int, context: int) -> _Plan:
    """What `load_pair` would do with `free_vram` free: load the draft, then plan the target's residency."""
    target = pair.target.shape
    draft_bytes = model_bytes_on_gpu(pair.draft)
    if draft_bytes + residency.DEFAULT_MARGIN_BYTES > free_vram:
        return _Plan(
            None,
            tree_budget,
            f"the draft model alone needs {format_bytes(draft_bytes)} of VRAM, the GPU has {format_bytes(free_vram)} free",
        )
    layer_bytes, fixed = _target_on_gpu(pair)
    minimum = residency.minimum_device_bytes(layer_bytes, fixed)
    try:
        budget = residency.fit_default_budget(
            target,
            free_vram - draft_bytes,
            GPU_DTYPE_BYTES,
            context,
            0,
            _draft_kv_bytes(pair, tree_budget, context),
            minimum,
            tree_budget,
            _draft_graph_bytes(pair, tree_budget, context),
        )
        plan = residency.plan_residency(layer_bytes, budget.budget_bytes, fixed)
    except InsufficientVRAMError:
        need = minimum_vram_bytes(pair, tree_budget, context)
        longer = context > residency.PLANNED_CONTEXT  # then the context may be what does not fit: say so
        return _Plan(
            None,
            tree_budget,
            f"needs at least {format_bytes(need)} of VRAM, the GPU has {format_bytes(free_vram)} free"
            + (f" (for {context:,} tokens of a chat: a shorter context length needs less)" if longer else ""),
        )
    return _Plan(plan, budget.tree_budget, None)


def minimum_vram_bytes(pair: Pair, tree_budget: int | None = None, context: int = residency.PLANNED_CONTEXT) -> int:
    """The least free VRAM the pair loads in: the draft and its KV cache (planned for `tree_budget`; None:
    automatic, and `context` tokens), then the target at a tree of one token (the default budget's terms,
    from the same functions) with no resident layer."""
    tree_budget = tree_budget or AUTO_MAX_BUDGET
    target = pair.target.shape
    layer_bytes, fixed = _target_on_gpu(pair)
    return (
        model_bytes_on_gpu(pair.draft)
        + _draft_kv_bytes(pair, tree_budget, context)
        + _draft_graph_bytes(pair, tree_budget, context)
        + residency.minimum_device_bytes(layer_bytes, fixed)
        + residency.config_kv_bytes(target, residency.kv_rows(context, 1), GPU_DTYPE_BYTES)
        + residency.activation_bytes(target, 1, context, GPU_DTYPE_BYTES)
        + residency.DEFAULT_MARGIN_BYTES
    )


def minimum_ram_bytes(pair: Pair) -> int:
    """Host RAM an offloaded load of the pair's target needs on the smallest GPU it runs on (the loader's
    check): there no layer stays resident, so every layer is in the host store. A bigger GPU keeps layers
    resident, which then need no host RAM (`predict_pair` counts that for a given machine)."""
    return _host_need(pair, plan=None, on_cpu=False)


def _host_need(pair: Pair, plan: residency.ResidencyPlan | None, on_cpu: bool) -> int:
    """The loader's host RAM need: the streamed layers of `plan` (every layer without one), the non-layer
    weights kept in host RAM, the largest checkpoint tensor and the margin."""
    target = pair.target.shape
    all_layers = target.num_hidden_layers * decoder_layer_bytes(target, pair.target.weights)
    store = plan.streamed_bytes_per_pass if plan is not None else all_layers
    tables = host_table_bytes(
        non_layer_bytes(target, GPU_DTYPE),
        embedding_bytes(target, GPU_DTYPE),
        streaming=not on_cpu,
        embedding_on_host=_embedding_on_host(target),
    )
    return host_bytes_needed(store, largest_checkpoint_tensor(target, pair.target.weights), tables)


def _ram_verdict(needed: int, hw: HardwareDescription) -> tuple[str, str | None]:
    """('fits' | 'tight' | 'no', the problem in words) from the loader's own host RAM check."""
    try:
        check_host_memory(needed, hw.ram.available_bytes)
        return "fits", None
    except InsufficientHostMemoryError:
        pass
    try:
        check_host_memory(needed, hw.ram.total_bytes)
    except InsufficientHostMemoryError:
        return "no", f"needs {format_bytes(needed)} of RAM, this PC has {format_bytes(hw.ram.total_bytes)}"
    return (
        "tight",
        f"needs {format_bytes(needed)} of RAM and {format_bytes(hw.ram.available_bytes)} is free now: close other programs first",
    )


def predict_pair(
    pair: Pair,
    hw: HardwareDescription,
    tree_budget: int | None = None,
    overlap: bool = True,
    context_length: int | None = None,
) -> PairFit:
    """Fit and speed of `pair` on `hw` at `tree_budget` draft tokens per pass (lowered when VRAM is short;
    None: the automatic budget, see the module's docstring); `overlap`: drafting while the target streams
    (what the engine does on a GPU; core.models.speed.OverlapPrice); `context_length`: the tokens of a chat
    the KV caches are planned for, as the app's setting loads them (None: 4,096; at most the pair's limit)."""
    context = residency.resolve_context_length(context_length, pair.context_length, fit=True)
    return replace(_predict(pair, hw, tree_budget, overlap, context), planned_context=context)


def _predict(pair: Pair, hw: HardwareDescription, tree_budget: int | None, overlap: bool, context: int) -> PairFit:
    target = pair.target.shape
    gpu = hw.best_gpu
    # the downloader's own rule: room for the whole download with SPARE_BYTES left over (the app does not ask it
    # of a pair already downloaded)
    room = pair.download_bytes + SPARE_BYTES if pair.download_bytes else 0
    disk_ok = None if hw.disk.free_bytes is None else room <= hw.disk.free_bytes
    planned = tree_budget or AUTO_MAX_BUDGET
    if pair.id == BUILTIN_PAIR_ID:
        return _builtin_fit(pair, hw, gpu, tree_budget, disk_ok, overlap)
    if gpu is None:
        return _cpu_only_fit(pair, hw, tree_budget, _host_need(pair, None, on_cpu=True), disk_ok)
    now = _plan_on_gpu(pair, gpu.vram_free_bytes, planned, context)
    if now.plan is None:
        empty = _plan_on_gpu(pair, gpu.vram_total_bytes, planned, context)
        vram_fit = "tight" if empty.plan is not None else "no"
        vram_problem = now.problem + (": close programs that use the GPU" if empty.plan is not None else "")
        chosen = empty if empty.plan is not None else now
    else:
        vram_fit, vram_problem, chosen = "fits", None, now
    if chosen.plan is not None and chosen.tree_budget < planned and tree_budget is not None:
        vram_fit = "tight" if vram_fit == "fits" else vram_fit
        vram_problem = vram_problem or (
            f"VRAM is short: the tree budget drops from {tree_budget} to {chosen.tree_budget} draft tokens per pass"
        )
    host_need = _host_need(pair, chosen.plan, on_cpu=False)  # resident layers take no host RAM
    ram_fit, ram_problem = _ram_verdict(host_need, hw)
    fit = max(ram_fit, vram_fit, key=FIT_ORDER.__getitem__)
    problems = [p for p in (ram_problem, vram_problem) if p]
    rate, rate_source = h2d_rate(gpu)
    if chosen.plan is None:
        tokens, source = tokens_per_pass(pair, chosen.tree_budget)
        return PairFit(
            pair,
            fit,
            "; ".join(problems),
            None,
            target.num_hidden_layers,
            None,
            chosen.tree_budget,
            tokens,
            source,
            None,
            None,
            rate_source,
            host_need,
            disk_ok,
        )
    plan = chosen.plan
    rates = gpu_rates(gpu, rate)
    layer = decoder_layer_bytes(target, pair.target.weights)
    paths, staging = copy_paths(layer, plan.streamed_bytes_per_pass, hw, rate, measured=measured_pin_budget_here(hw))
    copy = paths.layer_seconds(layer)
    if staging:
        problems.append(staging)
    speed = fastest(
        pair,
        budgets_weighed(tree_budget, chosen.tree_budget),
        lambda b, tokens: gpu_pass(
            pair,
            plan.resident,
            plan.n_slots,
            copy,
            b,
            tokens,
            rates,
            engine_draft_kernel(gpu, hw),
            MEASURED_OVERLAP if overlap else None,
        ),
    )
    reason = (
        "; ".join(problems)
        if problems
        else f"fits: all {plan.n_layers} layers stay on the GPU, nothing streams from RAM"
        if not plan.streamed_bytes_per_pass
        else (
            f"fits: {len(plan.resident)} of {plan.n_layers} layers stay on the GPU, "
            f"{format_bytes(plan.streamed_bytes_per_pass)} stream from RAM every pass"
        )
    )
    return PairFit(
        pair,
        fit,
        reason,
        len(plan.resident),
        plan.n_layers,
        speed.pass_seconds,
        speed.budget,
        speed.tokens_per_pass,
        speed.source,
        speed.tokens_per_second,
        speed.draft_seconds,
        rate_source,
        host_need,
        disk_ok,
        draft_graph_bytes=_draft_graph_bytes(pair, chosen.tree_budget, context),
    )


def _builtin_fit(
    pair: Pair, hw: HardwareDescription, gpu: GpuInfo | None, tree_budget: int | None, disk_ok, overlap: bool = True
) -> PairFit:
    """The built-in pair always fits: 135M parameters, everything in memory, nothing streams. Its speed is the
    one measured on this computer when the engine has loaded it here (core.models.measured); before that,
    an estimate from the hardware."""
    target = pair.target.shape
    need = target.num_hidden_layers * decoder_layer_bytes(target, pair.target.weights) + non_layer_bytes(
        target, "float32"
    )
    where = "on the GPU" if gpu is not None else f"on the processor ({hw.cpu.physical_cores or '?'} cores)"
    reason = f"fits: it runs {where}, with memory to spare"
    layers = target.num_hidden_layers
    measured = measured_speed(pair.target.repo, pair.draft.repo, "GPU" if gpu is not None else "CPU")
    if measured is not None and (tree_budget is None or measured.method == "sequential"):
        plain = measured.method == "sequential"
        tokens, source = (
            (1.0, "plain decoding: one token per step") if plain else tokens_per_pass(pair, measured.budget)
        )
        how = "plain decoding" if plain else f"SpecExec with {measured.budget}-token trees"
        return PairFit(
            pair,
            "fits",
            reason,
            layers,
            layers,
            tokens / measured.tokens_per_second,
            measured.budget,
            tokens,
            source,
            measured.tokens_per_second,
            0.0 if plain else None,
            f"measured on this computer {measured.age_words()} ({how})",
            need,
            True if disk_ok is None else disk_ok,
        )
    budgets = budgets_weighed(tree_budget, tree_budget or AUTO_MAX_BUDGET)
    if gpu is not None:
        rate_source = "estimate: compute only, nothing streams"
        everything, rates = tuple(range(target.num_hidden_layers)), gpu_rates(gpu, h2d_rate(gpu)[0])
        speed = fastest(
            pair,
            budgets,
            lambda b, tokens: gpu_pass(
                pair,
                everything,
                0,
                0.0,
                b,
                tokens,
                rates,
                engine_draft_kernel(gpu, hw),
                MEASURED_OVERLAP if overlap else None,
            ),
        )
    else:
        flops = cpu_flops(hw)
        rate_source = f"estimate: compute only, nothing streams ({flops / 1e9:.0f} GFLOP/s assumed)"
        speed = fastest(pair, budgets, cpu_timing(pair, flops))
    return PairFit(
        pair,
        "fits",
        reason,
        layers,
        layers,
        speed.pass_seconds,
        speed.budget,
        speed.tokens_per_pass,
        speed.source,
        speed.tokens_per_second,
        speed.draft_seconds,
        rate_source,
        need,
        True if disk_ok is None else disk_ok,
    )


def _cpu_only_fit(pair: Pair, hw: HardwareDescription, tree_budget: int | None, host_need: int, disk_ok) -> PairFit:
    """No NVIDIA GPU: say plainly what running a big model on the processor would mean."""
    target, flops = pair.target.shape, cpu_flops(hw)
    speed = fastest(pair, budgets_weighed(tree_budget, tree_budget or AUTO_MAX_BUDGET), cpu_timing(pair, flops))
    _, ram_problem = _ram_verdict(host_need, hw)
    seconds = round((speed.pass_seconds + speed.draft_seconds) / speed.tokens_per_pass)
    words = (
        f"needs an NVIDIA GPU: this PC has none, and on the processor alone each word would take about "
        f"{seconds} second{'' if seconds == 1 else 's'}"
    )
    reason = words + (f"; {ram_problem}" if ram_problem else "")
    return PairFit(
        pair,
        "no",
        reason,
        0,
        target.num_hidden_layers,
        speed.pass_seconds,
        speed.budget,
        speed.tokens_per_pass,
        speed.source,
        speed.tokens_per_second,
        speed.draft_seconds,
        f"estimate: processor only ({flops / 1e9:.0f} GFLOP/s assumed)",
        host_need,
        disk_ok,
    )


def size_class(parameters: int) -> int:
    """Half-octaves of the parameter count: 70.6B and 72.7B are one class (the catalog's order decides
    between them), 32.8B the next one down."""
    return math.floor(2 * math.log2(max(parameters, 1)))


def recommend(
    catalog: Catalog,
    hw: HardwareDescription,
    tree_budget: int | None = None,
    draft_id: str | None = None,
    overlap: bool = True,
    context_length: int | None = None,
) -> Recommendation:
    """Every offered pair's prediction, best first, each with its other drafts' predictions (`draft_options`).
    Ranked by: usable (fits or is tight, and runs at least MIN_RECOMMENDED_TOKENS_PER_SECOND), the paper's
    calibration pair after the other usable ones, fits before tight, bigger size class first (`size_class`),
    then the catalog's own order (the curated preference among models of one size: Llama 3.3 70B before
    Qwen2.5 72B). The recommended pair is the first usable one that is not the calibration pair; the built-in
    pair when none is. Retired pairs are not predicted. `draft_id` ("16bit", ...) predicts the pairs that
    offer that draft with it instead of their own. `overlap` False predicts without drafting while the target
    streams (`models recommend --no-overlap`). `context_length`: as in `predict_pair`."""
    pairs = [
        pair.with_draft(draft_id) if draft_id and any(o.id == draft_id for o in pair.drafts) else pair
        for pair in catalog.pairs
    ]
    fits = [_with_options(pair, hw, tree_budget, overlap, context_length) for pair in pairs]
    order = {pair.id: index for index, pair in enumerate(pairs)}

    def usable(fit: PairFit) -> bool:
        return fit.fit != "no" and (fit.tokens_per_second or 0) >= MIN_RECOMMENDED_TOKENS_PER_SECOND

    def rank(fit: PairFit) -> tuple:
        return (
            not usable(fit),
            fit.pair.calibration,
            FIT_ORDER[fit.fit],
            -size_class(fit.pair.target.shape.parameters),
            order[fit.pair.id],
        )

    ranked = sorted(fits, key=rank)
    best = next(
        (fit for fit in ranked if usable(fit) and not fit.pair.calibration),
        next(fit for fit in fits if fit.pair.id == BUILTIN_PAIR_ID),
    )
    return Recommendation(
        hardware=hw, recommended=best.pair.id, pairs=(best, *(f for f in ranked if f is not best)), overlap=overlap
    )


def _with_options(
    pair: Pair, hw: HardwareDescription, tree_budget: int | None, overlap: bool, context_length: int | None
) -> PairFit:
    """`predict_pair` with the pair's own draft, carrying the prediction with each of its other drafts."""
    options = tuple(
        predict_pair(pair.with_draft(option.id), hw, tree_budget, overlap, context_length)
        for option in pair.draft_options
    )
    return replace(predict_pair(pair, hw, tree_budget, overlap, context_length), draft_options=options)
