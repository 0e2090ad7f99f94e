"""Benchmarks behind `specexec bench ...`: ratios against a baseline measured in the same process."""
