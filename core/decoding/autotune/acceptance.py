"""Expected tokens per SpecExec pass against the tree budget, before any pass has run: recorded tables.

The built-in pair's table is docs/benchmarks.md's acceptance table (SpecExec, MT-Bench first turns,
temperature 0.6, top-p 0.9). Any other pair starts from a conservative default (a draft from the same
family accepts at least this much on ordinary chat, by the paper's Figure 4 and our table) so that a pair of
unknown quality is not sold on speculation it has not shown; what passes actually deliver replaces the
prior as they come in (core/decoding/autotune/chooser.py).

Tree depth is tabled too: the draft search runs about one forward per tree level, so depth drives the draft's
share of a pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.models.acceptance import interpolate

BUILTIN_PAIR = ("builtin", "builtin-draft")


@dataclass(frozen=True)
class AcceptanceTable:
    """(budget, tokens per pass) and (budget, mean tree depth) points, read as the catalog's tables are
    (core.models.acceptance.interpolate: 1 token and no depth at budget 0, flat above the largest budget)."""

    tokens_per_pass: tuple[tuple[int, float], ...]
    tree_depth: tuple[tuple[int, float], ...]
    source: str

    def tokens(self, budget: int) -> float:
        return interpolate(self.tokens_per_pass, budget, at_zero=1.0)

    def depth(self, budget: int) -> float:
        return interpolate(self.tree_depth, budget, at_zero=0.0)


# docs/benchmarks.md, "Acceptance: tokens per target pass (built-in pair)"; depths from the same pair
# (2 MT-Bench prompts, temperature 0.6: 6.4 levels at budget 16, 10.4 at 64, about two per doubling).
BUILTIN_TABLE = AcceptanceTable(
    tokens_per_pass=((16, 3.65), (64, 4.72), (256, 5.70), (1024, 6.70)),
    tree_depth=((16, 6.4), (64, 10.4), (256, 14.4), (1024, 18.4)),
    source="the built-in pair's recorded table",
)

# Any other pair: about half the built-in pair's gain over plain decoding (which is 1 token per pass).
DEFAULT_TABLE = AcceptanceTable(
    tokens_per_pass=((16, 2.3), (64, 2.9), (256, 3.4), (1024, 3.9)),
    tree_depth=((16, 5.0), (64, 8.0), (256, 11.0), (1024, 14.0)),
    source="a conservative default for an unmeasured pair",
)


def prior_table(target_spec: str | None, draft_spec: str | None) -> AcceptanceTable:
    """The recorded table for a pair named as on the command line (or in a Load request)."""
    if (target_spec, draft_spec) == BUILTIN_PAIR:
        return BUILTIN_TABLE
    return DEFAULT_TABLE
