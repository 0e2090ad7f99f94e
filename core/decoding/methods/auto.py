"""Automatic method and budget: each pass is a plain step or a SpecExec pass, as the tuner chooses.

Switching is exact: both methods sample the token at absolute position t with the draw keyed by (seed, t)
(core/decoding/sampling.py) and share one DecodeState, so whatever the tuner picks, pass by pass, the tokens are the
ones plain sequential sampling with the same seed gives. After plain steps the draft cache lags behind the
sequence; the next SpecExec pass's first draft forward catches it up (build_draft_tree prefills whatever is
pending), which is why that pass's seconds are not taken as typical.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator

from core.decoding.autotune.chooser import SEQUENTIAL, AutoTuner
from core.decoding.autotune.depth import DepthPolicy
from core.modeling.causal_lm import CausalLM
from core.decoding.decode_state import DecodeState
from core.decoding.methods.sequential import sequential_steps
from core.decoding.methods.specexec import specexec_steps
from core.decoding.settings import SamplingParams, TreeSettings
from core.decoding.methods.step import OutputControls, Step


def auto_steps(
    state: DecodeState,
    target: CausalLM,
    draft: CausalLM | None,
    params: SamplingParams,
    tree: TreeSettings,
    tuner: AutoTuner,
    max_new_tokens: int,
    depth: DepthPolicy | None = None,
    controls: OutputControls | None = None,
) -> Iterator[Step]:
    """One Step per pass; tuner.current is the choice the last yielded pass ran with. `tree` gives the
    depth cap, draft truncation and adaptive depth (`depth` chooses the forwards); budget and expand come
    from the tuner's choice."""
    emitted = 0
    previous_method: str | None = None
    for first in itertools.chain([True], itertools.repeat(False)):
        if emitted >= max_new_tokens:
            return
        config = tuner.choose().config
        remaining = max_new_tokens - emitted
        if config.method == SEQUENTIAL or draft is None:
            steps = sequential_steps(state, target, params, 1, controls)
        else:
            pass_tree = dataclasses.replace(tree, budget=config.budget, expand=config.expand)
            steps = specexec_steps(state, target, draft, params, pass_tree, remaining, depth, controls)
        try:
            step = next(steps)
        finally:
            steps.close()
        catch_up = config.method != SEQUENTIAL and previous_method == SEQUENTIAL
        stats = step.stats
        tuner.observe(config, stats.tokens, stats.draft_seconds + stats.target_seconds, timed=not (first or catch_up))
        previous_method = config.method
        emitted += len(step.token_ids)
        yield step
