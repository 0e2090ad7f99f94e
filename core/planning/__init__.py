"""Torch-free sizing: layer and cache sizes, residency, host memory, draft-graph plans, tree budgets."""
