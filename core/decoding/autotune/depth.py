"""Adaptive search depth: how many draft forwards a SpecExec pass makes, so that each one pays for itself.

Forward f of a search proposes the nodes "born" at f (core.decoding.draft_search.DraftTree.births). Had a pass made
only F forwards, it would have emitted exactly 1 + (its accepted path's nodes born at or before F) tokens:
those nodes were found by then, a node of the full top K found by forward F is in that search's top K too
(the K-th best of fewer nodes is no higher), and the walk reaches it through the same ancestors with the same
position-keyed draws. So every pass tells, for every F up to the forwards it made, what F forwards would have
delivered; `DepthPolicy` keeps the mean accepted nodes per birth forward (`gain[f]`) per (budget, width).

It then picks the F that maximises expected tokens per second,

    (1 + gain[1] + ... + gain[F]) / (target_pass(K + 1) + draft_forward(P) + (F - 1) * draft_forward(B)),

with the seconds from the auto-tuner's measured cost model (P: about a pass's tokens, the catch-up forward;
B: the expansion width), i.e. it stops drafting when the expected extra accepted tokens of one more forward
are worth less than that forward's time at this machine's measured costs. A forward not yet observed often
enough is assumed as good as the last well-observed one, so the search tries it and its real yield decides;
every REFRESH-th pass makes two forwards more than chosen, so the gains just past the choice stay measured.
"""

from __future__ import annotations

from collections import defaultdict

from core.decoding.autotune.cost_model import CostModel

MIN_OBSERVATIONS = 3  # passes that ran forward f before its own mean is trusted
REFRESH = 8
HORIZON = 64  # the means weigh roughly the last HORIZON passes (a conversation's text changes)


class _ForwardGains:
    """Per birth forward f: decaying sums of accepted nodes and of passes that made forward f."""

    def __init__(self) -> None:
        self.accepted: defaultdict[int, float] = defaultdict(float)
        self.passes: defaultdict[int, float] = defaultdict(float)

    def add(self, births: list[int], forwards: int) -> None:
        decay = 1.0 - 1.0 / HORIZON
        for f in range(1, forwards + 1):
            self.accepted[f] *= decay
            self.passes[f] = self.passes[f] * decay + 1.0
        for birth in births:
            if 1 <= birth <= forwards:
                self.accepted[birth] += 1.0

    def gains(self, max_forwards: int) -> list[float]:
        """gain[f - 1] for f = 1..max_forwards; unobserved forwards borrow the last observed gain."""
        out, last = [], 1.0  # before anything is seen: one accepted token per forward (optimistic)
        for f in range(1, max_forwards + 1):
            if self.passes[f] >= MIN_OBSERVATIONS:
                last = self.accepted[f] / self.passes[f]
            out.append(last)
        return out


class DepthPolicy:
    """Chooses draft forwards per pass (`forwards`) and learns from each pass (`observe`)."""

    def __init__(self, cost: CostModel) -> None:
        self.cost = cost
        self._gains: dict[tuple[int, int], _ForwardGains] = defaultdict(_ForwardGains)
        self._passes = 0

    def forwards(self, budget: int, width: int, max_forwards: int, catch_up_tokens: int = 1) -> int:
        """Draft forwards for the next pass of a `budget` tree expanded `width` nodes at a time."""
        draft = self.cost.draft_forward
        if draft is None:
            return max_forwards
        gains = self._gains[(budget, width)].gains(max_forwards)
        fixed = self.cost.target_pass(budget + 1) + draft(max(catch_up_tokens, 1))
        per_forward = draft(width)
        best, best_rate, tokens = 1, 0.0, 1.0
        for f, gain in enumerate(gains, start=1):
            tokens += gain
            rate = tokens / (fixed + (f - 1) * per_forward)
            if rate > best_rate:
                best, best_rate = f, rate
        self._passes += 1
        if self._passes % REFRESH == 0:
            best += 2
        return min(best, max_forwards)

    def observe(self, budget: int, width: int, forwards: int, path_births: list[int]) -> None:
        """A pass of a `budget` tree made `forwards` forwards and accepted nodes born at `path_births`."""
        self._gains[(budget, width)].add(path_births, forwards)
