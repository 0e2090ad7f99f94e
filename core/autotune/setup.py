"""Building the tuner for a loaded pair: the cached cost model, the pair's acceptance table, the device."""

from __future__ import annotations

from core.autotune.acceptance import prior_table
from core.autotune.chooser import AutoTuner
from core.autotune.cost_model import cached_cost_model
from core.causal_lm import CausalLM


def device_kind(model: CausalLM) -> str:
    """'CPU' or 'GPU', for the one-line explanation."""
    return "CPU" if model.device.type == "cpu" else "GPU"


def tuner_for_pair(target: CausalLM, draft: CausalLM | None, max_depth: int = 32) -> AutoTuner:
    """An AutoTuner for this pair on this machine (measures the cost model on first use, then reads the cache)."""
    cost, _ = cached_cost_model(target, draft)
    return AutoTuner(cost, prior_table(target.name, draft.name if draft else None), device_kind(target), max_depth)
