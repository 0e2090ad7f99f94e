"""`specexec bench acceptance`: tokens per target pass (the paper's generation rate) per method and budget.

Every row runs the same prompts and seeds. With `sequential` among the methods (or --baseline) the
plain decoding speed is measured in the same process and each row reports its speed-up against it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

from core.cli.pair import load_pair
from core.cli.options import add_model_arguments, add_threads_argument, sampling_params, tree_settings
from core.generation import METHODS, DecodingSettings, stream_generate
from core.methods.specexec import TreeSettings
from core.prompts import encode_prompt, read_prompt_file
from core.threads import apply_torch_threads


@dataclass
class Row:
    method: str
    budget: int
    tokens_per_pass: float
    draft_s: float
    target_s: float
    tokens_per_s: float
    search_overhead: float  # share of a pass spent in the draft search beyond its forwards
    draft_forwards: float  # draft model forwards per target pass (the search's sequential steps)
    speedup: float | None = None  # tokens/s against sequential, measured in this run


def _int_list(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def _method_list(text: str) -> list[str]:
    methods = [part for part in text.split(",") if part]
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    return methods


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--prompts", required=True, help="JSON Lines prompt file (messages or text)")
    parser.add_argument("--limit", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--budgets", type=_int_list, default=[16, 64, 256, 1024])
    parser.add_argument("--methods", type=_method_list, default=["specexec", "specinfer"])
    parser.add_argument("--baseline", action="store_true", help="also time sequential decoding for speed-ups")
    parser.add_argument("--temperature", type=float, default=0.6)
    parser.add_argument("--top-p", type=float, default=0.9)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds, starting at --seed")
    parser.add_argument("--max-depth", type=int, default=32)
    parser.add_argument("--expand", type=int, default=32)
    parser.add_argument("--draft-top-p", action="store_true", help="truncate the draft to the target's nucleus")
    add_threads_argument(parser)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--plot", default=None, help="write a PNG of tokens per pass against budget")


def measure(target, draft, prompts_ids, method: str, budget: int, args: argparse.Namespace) -> Row:
    tokens = passes = forwards = 0
    draft_s = draft_forward_s = target_s = 0.0
    # sequential drafts nothing: its row has budget 0 and the tree settings are unused
    tree = tree_settings(args, budget=budget) if method != "sequential" else TreeSettings()
    settings = DecodingSettings(method=method, tree=tree, max_new_tokens=args.max_new_tokens)
    for seed in range(args.seed, args.seed + args.seeds):
        params = sampling_params(args, seed=seed)
        for prompt_ids in prompts_ids:
            stream = stream_generate(target.lm, draft.lm if draft else None, target.tokenizer, prompt_ids, params, settings)
            for chunk in stream:
                tokens += len(chunk.token_ids)
                passes += 1
                draft_s += chunk.stats.draft_seconds
                draft_forward_s += chunk.stats.draft_forward_seconds
                forwards += chunk.stats.draft_forwards
                target_s += chunk.stats.target_seconds
    total = draft_s + target_s
    return Row(
        method=method,
        budget=budget if method != "sequential" else 0,
        tokens_per_pass=tokens / passes,
        draft_s=draft_s / passes,
        target_s=target_s / passes,
        tokens_per_s=tokens / total,
        search_overhead=(draft_s - draft_forward_s) / total,
        draft_forwards=forwards / passes,
    )


def print_table(rows: list[Row]) -> None:
    print(f"{'method':<11}{'budget':>7}{'tok/pass':>10}{'draft s':>10}{'target s':>10}{'tok/s':>9}{'search%':>9}{'fwd/pass':>9}{'speedup':>9}")
    for row in rows:
        speedup = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
        print(
            f"{row.method:<11}{row.budget:>7}{row.tokens_per_pass:>10.2f}{row.draft_s:>10.4f}{row.target_s:>10.4f}"
            f"{row.tokens_per_s:>9.2f}{100 * row.search_overhead:>8.1f}%{row.draft_forwards:>9.1f}{speedup:>9}"
        )


def plot(rows: list[Row], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6, 4))
    for method in dict.fromkeys(r.method for r in rows if r.method != "sequential"):
        points = [(r.budget, r.tokens_per_pass) for r in rows if r.method == method]
        axis.plot(*zip(*points), marker="o", label=method)
    axis.set_xscale("log", base=2)
    axis.set_xlabel("budget (draft tokens per target pass)")
    axis.set_ylabel("tokens per target pass")
    axis.grid(True, alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)


def run(args: argparse.Namespace) -> int:
    apply_torch_threads(args.threads)
    methods = list(args.methods)
    if args.baseline and "sequential" not in methods:
        methods.insert(0, "sequential")
    needs_draft = any(m != "sequential" for m in methods)
    target, draft = load_pair(args, need_draft=needs_draft)
    prompts = read_prompt_file(args.prompts)[: args.limit]
    prompts_ids = [encode_prompt(target.tokenizer, p) for p in prompts]
    rows = []
    for method in methods:
        for budget in ([0] if method == "sequential" else args.budgets):
            row = measure(target, draft, prompts_ids, method, budget, args)
            rows.append(row)
            print(f"  measured {method} budget {budget}: {row.tokens_per_pass:.2f} tokens/pass", file=sys.stderr)
    baseline = next((r.tokens_per_s for r in rows if r.method == "sequential"), None)
    for row in rows:
        row.speedup = row.tokens_per_s / baseline if baseline else None
    if args.plot:
        plot(rows, args.plot)
    if args.json:
        print(json.dumps({"rows": [asdict(r) for r in rows]}))
    else:
        print_table(rows)
    return 0
