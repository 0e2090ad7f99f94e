"""The tree budgets the automatic choice may pick, and the most any command or request may ask for. No torch:
the fit prediction in the app's process predicts an automatic budget the way the engine chooses it.

The largest is 256, not more, because the engine plans memory for it at load (both KV caches and the
activation reserve of the target pass) before the tuner has measured anything. For an offloaded 70B GPTQ
target next to a 16-bit 7B draft on a 24 GB card, planning for 1,024 instead costs 4 resident layers and
1.6 GB more host RAM (the paper pair no longer fits a 32 GB PC), while the fit's speed model puts the
best budget at 256 or below (128-256 for the 70B pairs) for every catalog pair on every hardware fixture,
and 256 is the paper's own setting on an RTX 4090 (Table 4). Bigger trees pay off when passes are slow to
copy (a 16-bit 70B target); ask for them with an explicit budget.
"""

from core.errors import InvalidSettingError
from core.system import json_text

AUTO_BUDGETS = (16, 32, 64, 128, 256)
AUTO_MAX_BUDGET = AUTO_BUDGETS[-1]  # the caches and the activation reserve are planned for this one
# The most draft tokens per pass any command or request may ask for: the KV caches and activations are planned
# for the tree at load, so a budget of a billion asked for terabytes. The SpecExec paper's best budgets on an
# A100 were 1,024-2,048 (beyond them a pass costs more than the tokens it adds); 8,192 leaves room to measure
# past that.
MAX_TREE_BUDGET = 8192


def check_tree_budget(budget: int) -> int:
    """`budget` when it is a number of draft tokens a pass can take (1 to MAX_TREE_BUDGET); else
    InvalidSettingError in words."""
    if not json_text.is_whole(budget) or budget < 1:
        raise InvalidSettingError(f"budget must be at least 1 draft token, got {budget}")
    if budget > MAX_TREE_BUDGET:
        raise InvalidSettingError(
            f"budget must be at most {MAX_TREE_BUDGET:,} draft tokens per pass, got {budget:,}: the caches are "
            "planned for the whole tree, and trees past a few thousand tokens cost more than they add"
        )
    return budget
