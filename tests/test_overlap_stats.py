"""The overlap's per-pass means in the bench commands' JSON (core/bench/overlap_stats.py): the critical-path
forwards of passes that started from a kept subtree and of those that did not, apart, are what the speed
model's price of a keep is measured from (core.models.speed.OverlapPrice)."""

from __future__ import annotations

import pytest

from core.bench.overlap_stats import OverlapTally
from core.decoding.methods.step import PassStats


def _pass(forwards: int, shadow: int, kept: int) -> PassStats:
    return PassStats(2, 16, 3, 0.1, 0.08, 0.2, forwards, shadow_forwards=shadow, kept_nodes=kept)


def test_kept_and_fresh_passes_are_counted_apart():
    tally = OverlapTally()
    for stats in (_pass(8, 4, 0), _pass(2, 4, 12), _pass(6, 4, 0), _pass(4, 3, 20)):
        tally.add(stats)
    summary = tally.summary()
    assert summary["critical_path_draft_forwards"] == pytest.approx(5.0)
    assert summary["shadow_draft_forwards"] == pytest.approx(3.75)
    assert summary["kept_subtree_share"] == pytest.approx(0.5)
    assert summary["kept_subtree_nodes"] == pytest.approx(16.0)
    assert summary["critical_path_draft_forwards_kept"] == pytest.approx(3.0)
    assert summary["critical_path_draft_forwards_fresh"] == pytest.approx(7.0)


def test_no_pass_and_no_keep_give_zeros_not_a_division_error():
    assert set(OverlapTally().summary().values()) == {0.0}
    tally = OverlapTally()
    tally.add(_pass(5, 0, 0))
    summary = tally.summary()
    assert summary["critical_path_draft_forwards_kept"] == 0.0 and summary["critical_path_draft_forwards_fresh"] == 5.0
