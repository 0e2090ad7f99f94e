"""The choice: plain decoding or SpecExec, and the tree budget and expansion width, for the most expected
tokens per second on this machine, re-evaluated every few passes and kept unless another choice promises
clearly more (hysteresis), so timing noise never makes it flap.

Expected tokens per second of a configuration = expected tokens per pass / expected seconds per pass:
- tokens per pass: 1 for plain decoding; for SpecExec the recorded table (core/decoding/autotune/acceptance.py)
  scaled by how this conversation's passes compare with it, blended with the passes seen at that budget;
- seconds per pass: the measured cost model (core/decoding/autotune/cost_model.py) for the draft search (about one
  draft forward per tree level, of the expansion width at most; with the overlap on, only those left on the
  critical path, core.models.speed.OverlapPrice: the shadow fills the target's pass, a kept subtree spares
  forwards) plus one target pass over the tree, scaled
  by how observed passes of that method compare with the model, blended with the passes seen at that
  configuration.
Every estimate starts from the model and moves to what passes show, so a cost model measured on a busy
machine, or a pair that accepts more or less than its table, is corrected within a few passes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from core.decoding.autotune.acceptance import AcceptanceTable
from core.planning.budgets import AUTO_BUDGETS
from core.decoding.autotune.cost_model import CostModel
from core.models.speed import OverlapPrice
from core.planning.graph_plan import search_width

SEQUENTIAL = "sequential"
SPECEXEC = "specexec"
AUTO_EXPANDS = (16, 32, 64)


@dataclass(frozen=True)
class Config:
    """method: sequential or specexec; budget K and expand B for SpecExec (0 for plain decoding)."""

    method: str
    budget: int = 0
    expand: int = 0


@dataclass(frozen=True)
class Choice:
    """The configuration in force, what it is expected to deliver, and why, in one line for people."""

    config: Config
    tokens_per_pass: float
    pass_seconds: float
    reason: str

    @property
    def tokens_per_second(self) -> float:
        return self.tokens_per_pass / self.pass_seconds if self.pass_seconds > 0 else 0.0


def candidate_configs(method: str, budget: int | None, expand: int, max_budget: int, has_draft: bool) -> list[Config]:
    """The configurations the tuner may pick from. method 'auto' adds plain decoding to SpecExec; budget None
    (automatic) tries AUTO_BUDGETS up to max_budget with each of AUTO_EXPANDS (capped at the budget), a
    fixed budget keeps it and `expand`."""
    configs = [Config(SEQUENTIAL)] if method in ("auto", SEQUENTIAL) or not has_draft else []
    if method == SEQUENTIAL or not has_draft:
        return configs
    if budget is not None:
        return configs + [Config(SPECEXEC, budget, expand)]
    budgets = [b for b in AUTO_BUDGETS if b <= max_budget] or [max(1, max_budget)]
    for k in budgets:
        for b in sorted({min(k, e) for e in AUTO_EXPANDS}):
            configs.append(Config(SPECEXEC, k, b))
    return configs


class _Mean:
    """A running mean that forgets slowly (weights of old passes decay once `horizon` passes are in), so
    it follows a machine whose load changes."""

    def __init__(self, horizon: int = 32) -> None:
        self.count = 0.0
        self.mean = 0.0
        self.horizon = horizon

    def add(self, value: float) -> None:
        self.count = min(self.count + 1.0, float(self.horizon))
        self.mean += (value - self.mean) / self.count


class AutoTuner:
    """Learns from every pass of the loaded pair (across answers) and picks the configuration per pass.

    Call `begin(candidates)` at the start of an answer, `choose()` before each pass and `observe(...)`
    after it. `interval`: passes between re-evaluations; `hysteresis`: how much more (0.1 = 10%) another
    configuration must promise to replace the current one; `prior_passes`: how many passes the model's
    estimate weighs against observed ones; `overlap`: the price of drafting while the target streams, where
    the engine runs it (None: the whole search is on the critical path).
    """

    def __init__(
        self,
        cost: CostModel,
        table: AcceptanceTable,
        device_kind: str = "CPU",
        max_depth: int = 32,
        interval: int = 4,
        hysteresis: float = 0.1,
        prior_passes: float = 4.0,
        overlap: OverlapPrice | None = None,
    ) -> None:
        self.cost = cost
        self.overlap = overlap
        self.table = table
        self.device_kind = device_kind
        self.max_depth = max_depth
        self.interval = interval
        self.hysteresis = hysteresis
        self.prior_passes = prior_passes
        self._tokens: dict[Config, _Mean] = {}
        self._seconds: dict[Config, _Mean] = {}
        self._acceptance_logs: deque[float] = deque(maxlen=64)  # log(observed / table tokens per pass)
        self._time_logs: dict[str, deque[float]] = {SEQUENTIAL: deque(maxlen=64), SPECEXEC: deque(maxlen=64)}
        self._candidates: list[Config] = [Config(SEQUENTIAL)]
        self._current: Choice | None = None
        self._passes_since_choice = 0

    # -- the model -----------------------------------------------------------------------------------------

    def model_tokens_per_pass(self, config: Config) -> float:
        if config.method == SEQUENTIAL:
            return 1.0
        return self.table.tokens(config.budget) * math.exp(_shrunk_mean(self._acceptance_logs, 0.0, 3.0))

    def model_seconds(self, config: Config) -> float:
        """Seconds of one pass by the cost model alone (before any correction from observed passes)."""
        if config.method == SEQUENTIAL:
            return self.cost.sequential_step
        k, b = config.budget, max(1, config.expand)
        levels = max(min(float(self.max_depth), self.table.depth(k)), math.ceil(k / b))
        width = min(float(b), max(1.0, k / levels))
        draft, target = self.cost.draft_forward, self.cost.target_pass(k + 1)
        if draft is None:
            return target
        if self.overlap is not None:  # the catch-up forward and the levels, less what a kept subtree spares
            forwards = self.overlap.critical_forwards(1 + levels, target, draft(width), k, search_width(k, b))
            levels = forwards - 1
        return draft(self.table.tokens(k)) + levels * draft(width) + target

    def _time_factor(self, method: str) -> float:
        """Observed / modelled pass seconds for this method; a method not seen yet borrows the other's
        (the machine's load slows both)."""
        everything = [v for logs in self._time_logs.values() for v in logs]
        overall = _shrunk_mean(everything, 0.0, 3.0)
        return math.exp(_shrunk_mean(self._time_logs[method], overall, 3.0))

    def estimate(self, config: Config) -> tuple[float, float]:
        """(tokens per pass, seconds per pass) expected of `config` now."""
        k = self.prior_passes
        model_tokens = self.model_tokens_per_pass(config)
        model_seconds = self.model_seconds(config) * self._time_factor(config.method)
        tokens, seconds = self._tokens.get(config), self._seconds.get(config)
        if tokens is not None and tokens.count:
            model_tokens = (tokens.count * tokens.mean + k * model_tokens) / (tokens.count + k)
        if seconds is not None and seconds.count:
            model_seconds = (seconds.count * seconds.mean + k * model_seconds) / (seconds.count + k)
        return model_tokens, model_seconds

    def rate(self, config: Config) -> float:
        tokens, seconds = self.estimate(config)
        return tokens / seconds if seconds > 0 else 0.0

    # -- choosing ------------------------------------------------------------------------------------------

    def begin(self, candidates: Iterable[Config]) -> None:
        """A new answer with these configurations allowed (the current choice stays if it is among them)."""
        self._candidates = list(candidates) or [Config(SEQUENTIAL)]
        if self._current is not None and self._current.config not in self._candidates:
            self._current = None
        self._passes_since_choice = self.interval  # re-evaluate before the first pass

    @property
    def current(self) -> Choice | None:
        return self._current

    def choose(self) -> Choice:
        """The configuration for the next pass."""
        if self._current is None or self._passes_since_choice >= self.interval:
            self._passes_since_choice = 0
            best = max(self._candidates, key=self.rate)
            keep = self._current.config if self._current is not None else None
            if keep is None or self.rate(best) > self.rate(keep) * (1.0 + self.hysteresis):
                keep = best
            self._current = self._describe(keep)
        return self._current

    def observe(self, config: Config, tokens: int, seconds: float, timed: bool = True) -> None:
        """What a pass of `config` delivered. timed False: its seconds include a prefill or a draft catch-up
        (the first pass of an answer, the first SpecExec pass after plain steps) and are not typical."""
        self._passes_since_choice += 1
        if config.method == SPECEXEC and tokens > 0:
            self._tokens.setdefault(config, _Mean()).add(float(tokens))
            self._acceptance_logs.append(math.log(tokens / self.table.tokens(config.budget)))
        if timed and seconds > 0:
            self._seconds.setdefault(config, _Mean()).add(seconds)
            self._time_logs[config.method].append(math.log(seconds / self.model_seconds(config)))

    # -- explaining ----------------------------------------------------------------------------------------

    def _describe(self, config: Config) -> Choice:
        tokens, seconds = self.estimate(config)
        if config.method == SPECEXEC:
            reason = f"SpecExec, {config.budget}-token trees: ~{tokens:.1f} tokens per {_seconds(seconds)} pass"
            if Config(SEQUENTIAL) in self._candidates:
                gain = (tokens / seconds) / self.rate(Config(SEQUENTIAL))
                reason += f" ({gain:.1f}x plain decoding)"
            return Choice(config, tokens, seconds, reason)
        trees = [c for c in self._candidates if c.method == SPECEXEC]
        if not trees:
            return Choice(config, tokens, seconds, "plain decoding: no draft model is loaded")
        best = max(trees, key=self.rate)
        tree_tokens, tree_seconds = self.estimate(best)
        reason = (
            f"plain decoding: on this {self.device_kind} a speculative pass costs more than it saves "
            f"(~{tree_tokens:.1f} tokens per {_seconds(tree_seconds)} pass vs {_seconds(seconds)} per token)"
        )
        return Choice(config, tokens, seconds, reason)


def _shrunk_mean(values: Iterable[float], prior: float, prior_count: float) -> float:
    values = list(values)
    return (sum(values) + prior * prior_count) / (len(values) + prior_count)


def _seconds(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
