"""The per-pass device trace of a generation stream: `PassTrace` totals a DeviceTrace's counts over the passes
after the first, and `traced_stream` wraps stream_generate to fill it. `bench trace` and `bench acceptance
--trace` report from it; it sits apart from the commands, which load it only when they run (it imports torch)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core.bench.device_trace import DeviceTrace, TraceCounts
from core.bench.overlap_stats import OverlapTally
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings
from core.decoding.methods.step import PassStats

# What replaying a captured step launches: four copies into its static inputs (embedded token, position, mask,
# row) and the graph's replay (core.decoding.captured_forward.CapturedForward.replay)
STEP_REPLAY_LAUNCHES = 5


@dataclass
class PassTrace:
    """Trace totals over the traced passes of one configuration (`counts`: their sum), and per-pass figures."""

    passes: int = 0
    tokens: int = 0
    max_syncs: int = 0
    counts: TraceCounts = field(default_factory=TraceCounts)
    overlap: OverlapTally = field(default_factory=OverlapTally)
    whole: TraceCounts = field(default_factory=TraceCounts)  # the whole trace, the first pass (prefill) included

    def add(self, counts: TraceCounts, tokens: int, stats: PassStats | None = None) -> None:
        """One pass: its counts (a difference of two snapshots), the tokens it emitted and its stats."""
        if stats is not None:
            self.overlap.add(stats)
        self.passes += 1
        self.tokens += tokens
        self.max_syncs = max(self.max_syncs, counts.sync_count)
        self.counts = self.counts + counts

    def summary(self) -> dict[str, object]:
        c = self.counts
        passes = max(self.passes, 1)
        forwards = max(c.draft_forwards, 1)
        return {
            "passes": self.passes,
            "tokens_per_pass": self.tokens / passes,
            "syncs_per_pass": c.sync_count / passes,
            "max_syncs_in_a_pass": self.max_syncs,
            "syncs_per_draft_forward": c.draft_syncs / forwards,
            "search_syncs_per_draft_forward": c.search_syncs / forwards,  # the search's bookkeeping too
            "draft_forwards_per_pass": c.draft_forwards / passes,
            "kernels_per_draft_forward": c.draft_kernels / forwards,
            "kernels_per_pass": c.kernels / passes,
            "search_kernels_per_pass_outside_draft_forwards": (c.search_kernels - c.search_draft_kernels) / passes,
            "kernels_per_pass_after_the_search": (c.kernels - c.search_kernels) / passes,
            "h2d_bytes_per_pass": c.h2d_bytes / passes,
            "sync_sites_per_pass": {site: n / passes for site, n in c.syncs.most_common()},
            **self.overlap.summary(),
            "kernels_per_token": c.kernels / max(self.tokens, 1),
            # launched per token where a resident target's one-token step is replayed from a CUDA graph: its
            # decoder stack becomes STEP_REPLAY_LAUNCHES launches (copies into the static inputs, the replay)
            "kernels_per_token_step_graphs": (c.kernels - c.step_graph_kernels + STEP_REPLAY_LAUNCHES * c.step_forwards)
            / max(self.tokens, 1),
            "attention_shapes_per_pass": len(c.attention_shapes) / passes,
            "attention_shapes_whole_answer": len(self.whole.attention_shapes),
            "attention_calls_whole_answer": sum(self.whole.attention_shapes.values()),
        }


def traced_stream(
    target, draft, tokenizer, prompt_ids, params, settings: DecodingSettings, totals: PassTrace, controls=None
):
    """stream_generate under a DeviceTrace, adding every pass after the first to `totals`; yields the chunks.
    `controls`: a grammar or log-probabilities (core.decoding.methods.step.OutputControls), to count what they cost."""
    trace = DeviceTrace()
    for model in (target, draft):
        if model is not None:
            trace.mark_model(model)
    if draft is not None:
        trace.watch_draft(draft)
        trace.watch_search()
    trace.watch_steps()
    with trace:
        before = trace.snapshot()
        for index, chunk in enumerate(
            stream_generate(target, draft, tokenizer, prompt_ids, params, settings, controls=controls)
        ):
            after = trace.snapshot()
            if index > 0:  # the first pass also prefills the prompt
                totals.add(after - before, len(chunk.token_ids), chunk.stats)
            before = after
            totals.whole = after
            yield chunk
