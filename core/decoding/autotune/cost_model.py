"""What a pass costs on this machine: target seconds against tree tokens, draft seconds against batch width,
and the plain decoding step, measured with a few short timed forwards and cached per pair and machine.

Why measured: a target pass costs the same for 1 and 1,000 tokens while copying offloaded weights dominates,
and grows with the tokens once compute dominates (any CPU); which regime a machine is in decides whether a
speculative pass pays. The measurement stops after about `time_limit` seconds: sizes not reached are
extrapolated linearly from the last two measured points, which over-estimates a flat (offloaded) curve at
worst and is exact for a compute-bound one; the online corrections in core/decoding/autotune/chooser.py refine it.

What is timed is what the engine runs, warmed up: every size runs once untimed first (a Triton kernel
compiles on its first call of a shape, 0.3-2.5 s, and a CUDA graph is captured on its first), and the
draft is timed through the search's own forward (core.decoding.captured_forward.run_draft_forward: windowed KV writes,
bucketed columns, replayed from a CUDA graph on CUDA), so no cached figure includes a compile or a capture.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import platform
import time
from bisect import bisect_left
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from core.planning.budgets import AUTO_MAX_BUDGET
from core.modeling.causal_lm import CausalLM
from core.system.json_cache import read_entries, write_entries
from core.decoding.sampling import sample_token
from core.decoding.settings import SamplingParams
from core.decoding.timing import synchronize
from core.modeling.tree_mask import additive_mask, block_visibility, causal_visibility

CACHE_FILE = "cost-models.json"
CACHE_FORMAT = 3  # 3: every size warmed up first, the draft timed through the search's forward (graphs)
MAX_AGE_S = 30 * 24 * 3600  # re-measure a month-old entry: drivers, load and thermals drift
# Measured in this order (the span first, so a short time limit still brackets the range), then sorted.
TARGET_SIZES = (1, 64, 256, 16, 1024)  # tree tokens + root
DRAFT_WIDTHS = (1, 32, 8, 64)  # nodes per draft forward
_CONTEXT_TOKENS = 32  # a short committed prefix, as in a conversation's first turn


@dataclass(frozen=True)
class Curve:
    """Seconds against a size, from measured (size, seconds) points: linear in between, flat below the
    first point, linear beyond the last with the slope of the last two (never falling)."""

    points: tuple[tuple[int, float], ...]

    def __call__(self, size: float) -> float:
        sizes = [s for s, _ in self.points]
        secs = [t for _, t in self.points]
        if size <= sizes[0] or len(sizes) == 1:
            return secs[0] if size <= sizes[0] else secs[-1]
        if size >= sizes[-1]:
            slope = max(0.0, (secs[-1] - secs[-2]) / (sizes[-1] - sizes[-2]))
            return secs[-1] + slope * (size - sizes[-1])
        i = bisect_left(sizes, size)
        share = (size - sizes[i - 1]) / (sizes[i] - sizes[i - 1])
        return secs[i - 1] + share * (secs[i] - secs[i - 1])


@dataclass(frozen=True)
class CostModel:
    """target_pass(n): one target forward over n tokens (a tree of n - 1 draft tokens plus its root);
    draft_forward(b): one draft forward over b tree nodes; sequential_step: one plain decoding step."""

    target_pass: Curve
    draft_forward: Curve | None
    sequential_step: float

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> "CostModel":
        """The model `to_json` wrote. Raises KeyError, TypeError, ValueError or OverflowError for anything else
        (the cache file edited by hand): a curve without points or a time that is not a positive finite number
        of seconds, too."""
        if not isinstance(data, dict):
            raise TypeError("a cost model is a JSON object")
        draft = data.get("draft_forward")
        model = cls(
            target_pass=Curve(tuple((int(s), float(t)) for s, t in data["target_pass"]["points"])),
            draft_forward=Curve(tuple((int(s), float(t)) for s, t in draft["points"])) if draft else None,
            sequential_step=float(data["sequential_step"]),
        )
        curves = [model.target_pass] + ([model.draft_forward] if model.draft_forward else [])
        seconds = [model.sequential_step] + [t for curve in curves for _, t in curve.points]
        if not all(curve.points for curve in curves) or not all(0 < t < math.inf for t in seconds):
            raise ValueError("a cost model's curves hold times, each a positive number of seconds")
        return model


def _best_seconds(run, device, repeats: int) -> float:
    """Best of `repeats` timed calls of `run`, after one untimed call (compiles, captures, allocations)."""
    run()
    synchronize(device)
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        synchronize(device)
        best = min(best, time.perf_counter() - started)
    return best


def _time_forward(model: CausalLM, cache, tokens: int, repeats: int, logit_rows: slice | None) -> float:
    """A forward of `tokens` new causal tokens on top of `cache` (cropped back after each), with the LM head
    on `logit_rows` (None: every row): best of `repeats`, warmed up."""
    past = cache.length
    ids = torch.randint(3, model.vocab_size, (tokens,))
    positions = torch.arange(past, past + tokens)
    mask = additive_mask(causal_visibility(past, tokens, model.device), model.dtype)

    def forward() -> None:
        model.forward(ids, positions, mask, cache, logit_rows=logit_rows)
        cache.crop_to(past)

    return _best_seconds(forward, model.device, repeats)


def _time_search_forward(draft: CausalLM, cache, width: int, repeats: int) -> float:
    """A draft search forward of `width` rows above `cache`'s prefix, through the engine's own path
    (core.decoding.captured_forward.run_draft_forward: on CUDA the first call captures, the timed ones replay): best of
    `repeats`, warmed up."""
    from core.decoding.captured_forward import run_draft_forward
    from core.planning.graph_plan import column_bucket

    device, past = draft.device, cache.length
    ids = torch.randint(3, draft.vocab_size, (width,), device=device)
    rows = torch.arange(past, past + width, device=device)
    cols = column_bucket(past + width, cache.capacity)
    mask = additive_mask(block_visibility(past, width, cols, device), draft.dtype)
    return _best_seconds(lambda: run_draft_forward(draft, cache, ids, rows, mask, rows, cols), device, repeats)


def _prefilled_cache(model: CausalLM):
    cache = model.new_cache()
    ids = torch.randint(3, model.vocab_size, (_CONTEXT_TOKENS,))
    mask = additive_mask(causal_visibility(0, _CONTEXT_TOKENS, model.device), model.dtype)
    model.forward(ids, torch.arange(_CONTEXT_TOKENS), mask, cache, logit_rows=slice(-1, None))  # also warms up
    return cache


def _measure_curve(model: CausalLM, sizes: tuple[int, ...], deadline: float, draft: bool) -> Curve:
    """Time each size in turn (two tries for the small ones) until the deadline; at least two sizes.

    A draft forward is the search's (every row's logits); a target pass reads its LM head one row at a time,
    only on the rows verification visits (`RowLogits`), so it is timed with one."""
    cache = _prefilled_cache(model)
    points: list[tuple[int, float]] = []
    for size in (s for s in sizes if cache.length + s <= cache.capacity):  # a small planned context has fewer rows
        if len(points) >= 2 and time.perf_counter() > deadline:
            break
        repeats = 2 if size <= 16 else 1
        if draft:
            points.append((size, _time_search_forward(model, cache, size, repeats)))
        else:
            points.append((size, _time_forward(model, cache, size, repeats, slice(0, 1))))
    return Curve(tuple(sorted(points)))


def _measure_sequential_step(target: CausalLM) -> float:
    """One plain step: a one-token forward plus sampling (its penalty and nucleus work is not free)."""
    cache = _prefilled_cache(target)
    past = cache.length
    mask = additive_mask(causal_visibility(past, 1, target.device), target.dtype)
    params = SamplingParams(temperature=0.7, top_p=0.9)

    def step() -> None:
        logits = target.forward(torch.tensor([5]), torch.tensor([past]), mask, cache, logit_rows=slice(-1, None))
        sample_token(logits[0], params, past + 1)  # reads the token: the step's own sync
        cache.crop_to(past)

    return _best_seconds(step, target.device, 3)


def measure_cost_model(
    target: CausalLM, draft: CausalLM | None, time_limit: float = 1.5, max_tree_tokens: int = 1024
) -> CostModel:
    """Time a few short forwards of each model (about `time_limit` seconds in all on a slow machine)."""
    started = time.perf_counter()
    target_sizes = tuple(s for s in TARGET_SIZES if s <= max_tree_tokens + 1) or (1,)
    sequential = _measure_sequential_step(target)
    target_curve = _measure_curve(target, target_sizes, started + time_limit * (0.6 if draft else 1.0), draft=False)
    draft_curve = _measure_curve(draft, DRAFT_WIDTHS, started + time_limit, draft=True) if draft is not None else None
    return CostModel(target_curve, draft_curve, sequential)


# ----------------------------------------------------------------------------------------------------------
# Cache


def machine_fingerprint() -> dict[str, object]:
    """What makes timings of this machine differ from another's (or from its own after an upgrade)."""
    info: dict[str, object] = {
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
    }
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return info


def cost_key(target: CausalLM, draft: CausalLM | None) -> str:
    """The cache key: the pair, how each is placed and run, and the machine."""

    def describe(model: CausalLM | None) -> object:
        if model is None:
            return None
        return [model.name, type(model).__name__, str(model.device), str(model.dtype), model.max_tree_tokens]

    text = json.dumps(
        [describe(target), describe(draft), machine_fingerprint(), CACHE_FORMAT], sort_keys=True, default=str
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def cache_path() -> Path:
    from core.system.locations import cache_dir

    return cache_dir() / "autotune" / CACHE_FILE


def cached_cost_model(
    target: CausalLM,
    draft: CausalLM | None,
    time_limit: float = 1.5,
    path: Path | None = None,
    now: float | None = None,
) -> tuple[CostModel, bool]:
    """The pair's cost model from the cache, or measured now and stored; second value: it was measured.

    The cache is a small JSON file (`cache_path()`: under SPECEXEC_CACHE_DIR when set) keyed by `cost_key`,
    so a different pair, device, dtype, thread count or machine measures afresh; entries older than a month
    are measured again.
    """
    path = path or cache_path()
    now = time.time() if now is None else now
    key = cost_key(target, draft)
    entries = read_entries(path)
    entry = entries.get(key)
    try:
        if now - float(entry["measured_at"]) < MAX_AGE_S:
            return CostModel.from_json(entry["model"]), False
    except (KeyError, TypeError, ValueError, OverflowError):
        pass  # none, or an entry of another shape (the file edited by hand): measure again
    model = measure_cost_model(target, draft, time_limit, max_tree_tokens=target.max_tree_tokens or AUTO_MAX_BUDGET)
    entries[key] = {"measured_at": now, "model": model.to_json()}
    write_entries(path, entries)
    return model, True
