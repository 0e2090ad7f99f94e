"""Where two token sequences part: used wherever two decodings of the same request are compared (the
agreement benchmark, the GPU check's streamed-vs-processor run)."""

from __future__ import annotations


def first_difference(a: list[int], b: list[int]) -> int | None:
    """Index of the first position where the two sequences differ (a length mismatch counts), or None."""
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))
