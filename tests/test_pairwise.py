"""The all-pairs helper the settings sweeps use: every pair of values of any two factors is in some row."""

import itertools

from pairwise import all_pairs


def test_every_pair_of_values_meets_in_some_row_in_far_fewer_rows_than_the_product():
    factors = [["a", "b", "c"], [1, 2, 3, 4], [(1, 1), (16, 4), (64, 8), (48, 8)], [0, 1]]
    rows = all_pairs(*factors)
    for (i, first), (j, second) in itertools.combinations(enumerate(factors), 2):
        for x, y in itertools.product(first, second):
            assert any(row[i] == x and row[j] == y for row in rows), (i, x, j, y)
    assert all(len(row) == len(factors) and all(v in f for v, f in zip(row, factors)) for row in rows)
    assert len(rows) == 16 and all_pairs(*factors) == rows  # 4 x 4 pairs need 16 rows at least; the same each time


def test_two_factors_give_their_whole_product():
    assert sorted(all_pairs([0, 1], "xyz")) == sorted(itertools.product([0, 1], "xyz"))
