"""What a caller asks of the decoding loop: the sampling (SamplingParams), the draft tree (TreeSettings), the
answer (DecodingSettings), an
automatic budget's meaning (resolve_budget) and whether the shadow search runs (overlap_wanted). Plain data
that checks itself and imports no torch, so the CLI refuses a bad flag before anything heavy loads (`specexec
chat` and `serve` check their flags before the engine starts, which took ~10 s of imports when these lived
beside the decoding loop) and the engine builds the same objects from its requests."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from core.decoding.defaults import DEFAULT_BUDGET, DEFAULT_MAX_DEPTH, METHODS, Method
from core.errors import InvalidSettingError
from core.planning.budgets import AUTO_MAX_BUDGET, check_tree_budget
from core.planning.graph_plan import DEFAULT_EXPAND
from core.system.env import OVERLAP_ENV


@dataclass(frozen=True)
class SamplingParams:
    """How to turn target logits into tokens. temperature 0 means greedy."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    repetition_penalty: float = 1.0
    seed: int = 0
    presence_penalty: float = 0.0  # OpenAI's: subtracted once from every token the answer already has
    frequency_penalty: float = 0.0  # OpenAI's: subtracted per occurrence in the answer so far

    def __post_init__(self) -> None:
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise InvalidSettingError(f"temperature must be a number >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise InvalidSettingError(f"top-p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise InvalidSettingError(f"top-k must be >= 0 (0 = off), got {self.top_k}")
        if not (math.isfinite(self.repetition_penalty) and self.repetition_penalty > 0):
            raise InvalidSettingError(
                f"repetition penalty must be a number > 0 (1 = off), got {self.repetition_penalty}"
            )
        for name, value in (("presence", self.presence_penalty), ("frequency", self.frequency_penalty)):
            if not (math.isfinite(value) and -2.0 <= value <= 2.0):
                raise InvalidSettingError(f"{name} penalty must be between -2 and 2 (0 = off), got {value}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    @property
    def occurrence_penalties(self) -> bool:
        """Whether the presence or frequency penalty is on (the decoding loop then counts the answer's tokens)."""
        return self.presence_penalty != 0.0 or self.frequency_penalty != 0.0


@dataclass(frozen=True)
class TreeSettings:
    """budget K: draft tokens per target pass; max_depth D; expand B: nodes per draft forward;
    draft_top_p: truncate the draft to the target's nucleus (measured in docs/benchmarks.md);
    adaptive_depth: stop drafting when one more forward is worth less than it costs (core/decoding/autotune/depth.py;
    off: every pass makes the search's full DEFAULT_MAX_FORWARDS forwards on a GPU);
    overlap: a shadow search grows the tree on the draft's stream while the target scores it, and the next
    search starts from the subtree under the emitted token (core.decoding.methods.specexec's docstring; off with
    a grammar);
    shadow_forwards: the shadow's forwards per pass (None: as many as the last target pass's time holds at the
    last search's time per forward, up to `shadow_cap`; the first pass: as many as its search made)."""

    budget: int = DEFAULT_BUDGET
    max_depth: int = DEFAULT_MAX_DEPTH
    expand: int = DEFAULT_EXPAND
    draft_top_p: bool = False
    adaptive_depth: bool = True
    overlap: bool = False
    shadow_forwards: int | None = None

    def __post_init__(self) -> None:
        check_tree_budget(self.budget)
        if self.max_depth < 1:
            raise InvalidSettingError(f"max depth must be at least 1, got {self.max_depth}")
        if self.expand < 1:
            raise InvalidSettingError(f"expand (nodes per draft forward) must be at least 1, got {self.expand}")
        if self.shadow_forwards is not None and self.shadow_forwards < 0:
            raise InvalidSettingError(f"shadow forwards must be 0 or more, got {self.shadow_forwards}")


@dataclass(frozen=True)
class DecodingSettings:
    """method 'auto': plain decoding or SpecExec, chosen per pass by core/decoding/autotune. auto_budget: the tuner
    picks the SpecExec budget and expansion width, with tree.budget as the largest it may pick."""

    method: Method = "specexec"
    tree: TreeSettings = field(default_factory=TreeSettings)
    max_new_tokens: int = 256
    stop: tuple[str, ...] = ()
    auto_budget: bool = False

    @property
    def tuned(self) -> bool:
        """Whether core/decoding/autotune drives the passes (auto method, or SpecExec with an automatic budget)."""
        return self.method == "auto" or (self.method == "specexec" and self.auto_budget)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise InvalidSettingError(f"unknown method '{self.method}'; choose one of {', '.join(METHODS)}")
        if self.max_new_tokens < 1:
            raise InvalidSettingError(f"max new tokens must be at least 1, got {self.max_new_tokens}")
        if any(not s for s in self.stop):
            raise InvalidSettingError("stop strings must not be empty")


def overlap_wanted(device: object, switched_off: bool = False, measuring: bool = False) -> bool:
    """Whether SpecExec runs the shadow search (core.system.env.OVERLAP_ENV says how the variable decides).
    `switched_off`: a command's --no-overlap; `measuring`: a bench command, which runs it on any device (the
    keep logic and tokens per pass are the same in sequence) unless told not to. `device`: the draft's, a
    torch.device or its name (read without importing torch)."""
    value = os.environ.get(OVERLAP_ENV, "")
    if switched_off or value == "0":
        return False
    return value == "1" or measuring or str(getattr(device, "type", device)).split(":")[0] == "cuda"


FIXED_METHOD_BUDGET = 128  # an automatic budget for a method the tuner does not drive (SpecInfer)


def resolve_budget(budget: int | str, method: str) -> tuple[int, bool]:
    """(tree budget, automatic) for a budget of K or 'auto': automatic for 'auto' and SpecExec, with the
    largest tunable budget as the tree budget (the cap); SpecInfer gets FIXED_METHOD_BUDGET."""
    if budget != "auto":
        return check_tree_budget(budget), False
    if method in ("auto", "specexec"):
        return AUTO_MAX_BUDGET, True
    return FIXED_METHOD_BUDGET, False
