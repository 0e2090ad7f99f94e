"""All-pairs test cases: a few rows in which every value of each factor meets every value of every other factor.

Most faults in a sweep of settings show with one setting or with two together; a full product of 4 x 4 x 3 x 2
values is 96 runs where 16 rows meet every pair. Used where a sweep's product cost minutes of the suite.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


def _pairs(row: Sequence[int]) -> set[tuple[int, int, int, int]]:
    """The (factor, value, factor, value) pairs one row of value indices covers."""
    return {(i, row[i], j, row[j]) for i, j in itertools.combinations(range(len(row)), 2)}


def all_pairs(*factors: Sequence) -> list[tuple]:
    """Rows (one value of each factor) that together hold every pair of values of any two factors.

    Greedy, deterministic: each row is the first of the full product that covers the most pairs still
    missing. Small products only (it scans the product once per row)."""
    sizes = [len(values) for values in factors]
    candidates = list(itertools.product(*(range(size) for size in sizes)))
    missing = set().union(*(_pairs(row) for row in candidates))
    rows: list[tuple[int, ...]] = []
    while missing:
        best = max(candidates, key=lambda row: len(_pairs(row) & missing))
        rows.append(best)
        missing -= _pairs(best)
    return [tuple(values[i] for values, i in zip(factors, row)) for row in rows]
