"""Expected tokens per target pass at a tree budget, from a table of measured rates with its source.

The tables live in the catalog (one per draft of a pair: `draft` names the draft a table was measured with,
since a 4-bit draft and its 16-bit original need not accept the same). Between measured budgets the rate is
interpolated linearly in log2(budget + 1), anchored at budget 0 -> 1 token (with no draft tokens every pass
emits exactly the target's own token); above the largest measured budget it is held flat, never extrapolated
(`interpolate`, which the autotuner's tables use too).
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
        # a pass emits at least one token and at most one more than the tree holds (NaN fails the comparison)
        if not points or any(budget < 1 or not 1 <= rate <= budget + 1 for budget, rate in points):
            raise ValueError(f"acceptance table needs budgets >= 1 with 1 to budget + 1 tokens per pass, got {points}")
        return cls(source=str(data["source"]), tokens_per_pass=points, draft=str(data.get("draft", "")))

    def at(self, budget: int) -> tuple[float, str]:
        """(tokens per pass, how it was obtained: measured / interpolated / held at the largest budget)."""
        value = interpolate(self.tokens_per_pass, budget, at_zero=1.0)
        measured = dict(((0, 1.0),) + self.tokens_per_pass)  # budget 0: the target's own token, always
        if budget in measured:
            return value, f"{self.source}; measured at budget {budget}"
        largest = self.tokens_per_pass[-1][0]
        if budget > largest:
            return value, f"{self.source}; largest measured budget {largest}, held flat"
        low = max(b for b in measured if b < budget)
        high = min(b for b in measured if b > budget)
        return value, f"{self.source}; interpolated between budgets {low} and {high}"


def interpolate(points: tuple[tuple[int, float], ...], budget: int, at_zero: float) -> float:
    """A tabled quantity at `budget`: linear in log2(budget + 1) between the (budget, value) `points`
    (ascending), anchored at budget 0 -> `at_zero`, held flat above the largest budget, never extrapolated.
    The one interpolation of acceptance tables: the wizard's prediction and the autotuner read tables alike.

    Raises ValueError for a negative budget."""
    if budget < 0:
        raise ValueError(f"tree budget must be >= 0, got {budget}")
    anchored = ((0, at_zero),) + tuple(points)
    if budget >= anchored[-1][0]:
        return anchored[-1][1]
    for (low, low_value), (high, high_value) in zip(anchored, anchored[1:]):
        if low <= budget < high:
            t = (math.log2(budget + 1) - math.log2(low + 1)) / (math.log2(high + 1) - math.log2(low + 1))
            return low_value + t * (high_value - low_value)
    raise AssertionError("unreachable: the budget lies in one segment")
