"""The prepared GPU check (scripts/gpu-check.sh, docs/gpu-check.md): the questions only a GPU answers, each
part run in its own process under its own time limit, its findings written as JSON (`python -m
core.bench.gpu_check PART`), then merged into one report with a short Markdown summary (`report`).

It must run on a lent machine as it is (no network, a 64 MiB working tree): the built-in model's weights cannot
travel, so every part runs random weights of its shape (`random_pair`) on token ids, with no tokenizer.
"""
