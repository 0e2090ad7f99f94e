"""Expected tokens per target pass at a tree budget, from a table of measured rates with its source.

The tables live in the catalog (one per draft of a pair: `draft` names the draft a table was measured with,
since a 4-bit draft and its 16-bit original need not accept the same). Between measured budgets the rate is interpolated linearly
in log2(budget + 1), anchored at budget 0 -> 1 token (with no draft tokens every pass emits exactly the
target's own token); above the largest measured budget it is held flat, never extrapolated.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Acceptance:
    source: str
    tokens_per_pass: tuple[tuple[int, float], ...]  # (budget, mean tokens per target pass), budgets ascending
    draft: str = ""  # the draft the table describes (a repo id, or a built-in name)

    @classmethod
    def from_dict(cls, data: dict) -> "Acceptance":
        points = tuple(sorted((int(budget), float(rate)) for budget, rate in data["tokens_per_pass"].items()))
        if not points or any(budget < 1 or rate < 1 for budget, rate in points):
            raise ValueError(f"acceptance table needs budgets >= 1 with >= 1 token per pass, got {points}")
        return cls(source=str(data["source"]), tokens_per_pass=points, draft=str(data.get("draft", "")))

    def at(self, budget: int) -> tuple[float, str]:
        """(tokens per pass, how it was obtained: measured / interpolated / held at the largest budget)."""
        points = ((0, 1.0),) + self.tokens_per_pass
        for budget_, rate in points:
            if budget_ == budget:
                return rate, f"{self.source}; measured at budget {budget}"
        if budget > points[-1][0]:
            return points[-1][1], f"{self.source}; largest measured budget {points[-1][0]}, held flat"
        for (low, low_rate), (high, high_rate) in zip(points, points[1:]):
            if low < budget < high:
                t = (math.log2(budget + 1) - math.log2(low + 1)) / (math.log2(high + 1) - math.log2(low + 1))
                return low_rate + t * (high_rate - low_rate), f"{self.source}; interpolated between budgets {low} and {high}"
        raise ValueError(f"tree budget must be >= 0, got {budget}")
