"""Building the tuner for a loaded pair (the cached cost model, the pair's acceptance table, the device) and
the pair's adaptive-depth policy."""

from __future__ import annotations

import time
import weakref

from torch import nn

from core.decoding.autotune.acceptance import prior_table
from core.planning.budgets import AUTO_MAX_BUDGET
from core.decoding.autotune.chooser import AUTO_EXPANDS, AutoTuner, candidate_configs
from core.decoding.autotune.cost_model import cached_cost_model
from core.decoding.autotune.depth import DepthPolicy
from core.decoding.settings import overlap_wanted
from core.modeling.causal_lm import CausalLM
from core.models.measured import MeasuredSpeed, record_speed
from core.models.speed import MEASURED_OVERLAP

# One adaptive-depth policy per loaded pair (target module -> draft module -> policy), so what it learned
# carries over from one answer to the next whoever asks; weak keys: an unloaded pair takes its policy along.
_DEPTH_POLICIES: weakref.WeakKeyDictionary[nn.Module, weakref.WeakKeyDictionary[nn.Module, DepthPolicy]] = (
    weakref.WeakKeyDictionary()
)


def device_kind(model: CausalLM) -> str:
    """'CPU' or 'GPU', for the one-line explanation."""
    return "CPU" if model.device.type == "cpu" else "GPU"


def tuner_for_pair(target: CausalLM, draft: CausalLM | None, max_depth: int = 32) -> AutoTuner:
    """An AutoTuner for this pair on this machine (measures the cost model on first use, then reads the cache),
    priced with the overlap where the engine runs it (core.decoding.settings.overlap_wanted: a CUDA draft).
    The speed it expects of the fastest way to answer is kept for predictions (core.models.measured)."""
    cost, _ = cached_cost_model(target, draft)
    overlap = MEASURED_OVERLAP if draft is not None and overlap_wanted(draft.device) else None
    table = prior_table(target.name, draft.name if draft else None)
    tuner = AutoTuner(cost, table, device_kind(target), max_depth, overlap=overlap)
    record_expected_speed(tuner, target, draft)
    return tuner


def record_expected_speed(tuner: AutoTuner, target: CausalLM, draft: CausalLM | None) -> MeasuredSpeed:
    """The tokens per second of the configuration the tuner would pick on its own ('auto'), from this
    machine's measured timings and the passes it has seen, kept for `specexec models recommend` and the app's
    wizard (at load, and by the engine after each tuned answer)."""
    budgets = target.max_tree_tokens or AUTO_MAX_BUDGET
    candidates = candidate_configs("auto", None, AUTO_EXPANDS[0], budgets, draft is not None)
    best = max(candidates, key=tuner.rate)
    speed = MeasuredSpeed(tuner.rate(best), best.method, best.budget, time.time())
    record_speed(target.name, draft.name if draft else None, device_kind(target), speed)
    return speed


def depth_policy_for(target: CausalLM, draft: CausalLM) -> DepthPolicy:
    """The pair's adaptive-depth policy, built on first use from the pair's cached cost model."""
    by_draft = _DEPTH_POLICIES.setdefault(target.model, weakref.WeakKeyDictionary())
    policy = by_draft.get(draft.model)
    if policy is None:
        policy = by_draft[draft.model] = DepthPolicy(cached_cost_model(target, draft)[0])
    return policy
