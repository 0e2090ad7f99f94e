"""The tree budgets the automatic choice may pick. Pure data, no torch: the fit prediction in the app's
process predicts an automatic budget the way the engine chooses it.

The largest is 256, not more, because the engine plans memory for it at load (both KV caches and the
activation reserve of the target pass) before the tuner has measured anything. For an offloaded 70B GPTQ
target next to a 16-bit 7B draft on a 24 GB card, planning for 1,024 instead costs 4 resident layers and
1.6 GB more host RAM (the paper pair no longer fits a 32 GB PC), while the fit's speed model puts the
best budget at 256 or below (128-256 for the 70B pairs) for every catalog pair on every hardware fixture,
and 256 is the paper's own setting on an RTX 4090 (Table 4). Bigger trees pay off when passes are slow to
copy (a 16-bit 70B target); ask for them with an explicit budget.
"""

AUTO_BUDGETS = (16, 32, 64, 128, 256)
AUTO_MAX_BUDGET = AUTO_BUDGETS[-1]  # the caches and the activation reserve are planned for this one
