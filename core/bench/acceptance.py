"""`specexec bench acceptance`: tokens per target pass (the paper's generation rate) per method and budget.

Every row runs the same prompts and seeds. With `sequential` among the methods (or --baseline) the
plain decoding speed is measured in the same process and each row reports its speed-up against it.
`--trace` adds the GPU proxies of `bench trace` (host syncs, kernels, host-to-device bytes per pass, every
pass of an answer after the first); tracing slows the run, so its seconds are then not comparable.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from core.cli.options import (
    add_grammar_argument,
    add_model_arguments,
    add_overlap_arguments,
    add_sampling_arguments,
    add_threads_argument,
    budget_list,
    grammar_spec,
    output_controls,
    sampling_params,
    tree_settings,
)
from core.cli.pair import load_pair
from core.decoding.defaults import METHODS
from core.system.threads import apply_torch_threads

if TYPE_CHECKING:
    from core.decoding.constraints import GrammarSpec


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
    # --trace: per pass (after each answer's first), as a GPU would see it (core/bench/device_trace.py)
    syncs_per_pass: float | None = None
    kernels_per_draft_forward: float | None = None
    kernels_per_pass: float | None = None
    h2d_bytes_per_pass: float | None = None
    # the draft-while-the-target-streams overlap (core/bench/overlap_stats.py), per pass
    overlap: bool = False
    critical_path_draft_forwards: float = 0.0
    shadow_draft_forwards: float = 0.0
    kept_subtree_share: float = 0.0
    kept_subtree_nodes: float = 0.0
    critical_path_draft_forwards_kept: float = 0.0  # in passes that started from a kept subtree
    critical_path_draft_forwards_fresh: float = 0.0  # in passes that started from their root alone


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
    parser.add_argument(
        "--budgets",
        type=budget_list,
        default=[16, 64, 256, 1024],
        help="draft tokens per target pass to measure, comma separated (default 16,64,256,1024)",
    )
    parser.add_argument(
        "--methods",
        type=_method_list,
        default=["specexec", "specinfer"],
        help=f"decoding methods to measure, comma separated, from: {', '.join(METHODS)} (default specexec,specinfer)",
    )
    parser.add_argument("--baseline", action="store_true", help="also time sequential decoding for speed-ups")
    add_sampling_arguments(parser, temperature=0.6)
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per answer (default %(default)s)")
    parser.add_argument("--seeds", type=int, default=1, help="number of seeds, starting at --seed")
    parser.add_argument("--max-depth", type=int, default=32, help="deepest draft node (default %(default)s)")
    parser.add_argument("--expand", type=int, default=32, help="nodes expanded per draft forward (default %(default)s)")
    parser.add_argument("--draft-top-p", action="store_true", help="truncate the draft to the target's nucleus")
    parser.add_argument(
        "--no-adaptive-depth",
        action="store_true",
        help="every pass makes the search's full draft forwards (adaptive depth off)",
    )
    add_overlap_arguments(parser)
    parser.add_argument("--trace", action="store_true", help="add host syncs, kernels and copies per pass (slower)")
    add_grammar_argument(parser)
    parser.add_argument(
        "--grammar-target-only",
        action="store_true",
        help="with --json-schema: mask the target only, not the draft's proposals",
    )
    add_threads_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    parser.add_argument("--plot", default=None, help="write a PNG of tokens per pass against budget")


def measure(
    target, draft, prompts_ids, method: str, budget: int, args: argparse.Namespace, spec: GrammarSpec | None
) -> Row:
    from core.bench.overlap_stats import OverlapTally
    from core.bench.pass_trace import PassTrace, traced_stream
    from core.decoding.generation import stream_generate
    from core.decoding.settings import DecodingSettings, TreeSettings

    tokens = passes = forwards = 0
    draft_s = draft_forward_s = target_s = 0.0
    # sequential drafts nothing: its row has budget 0 and the tree settings are unused
    tree = tree_settings(args, budget=budget) if method != "sequential" else TreeSettings()
    if args.no_adaptive_depth:
        tree = dataclasses.replace(tree, adaptive_depth=False)
    settings = DecodingSettings(method=method, tree=tree, max_new_tokens=args.max_new_tokens)
    traced = PassTrace()
    tally = OverlapTally()
    for seed in range(args.seed, args.seed + args.seeds):
        params = sampling_params(args, seed=seed)
        for prompt_ids in prompts_ids:
            pair = (target.lm, draft.lm if draft else None, target.tokenizer, prompt_ids, params, settings)
            controls = output_controls(spec, args.max_new_tokens, target, mask_draft=not args.grammar_target_only)
            stream = traced_stream(*pair, traced, controls) if args.trace else stream_generate(*pair, controls=controls)
            for chunk in stream:
                tokens += len(chunk.token_ids)
                passes += 1
                draft_s += chunk.stats.draft_seconds
                draft_forward_s += chunk.stats.draft_forward_seconds
                forwards += chunk.stats.draft_forwards
                target_s += chunk.stats.target_seconds
                tally.add(chunk.stats)
    total = draft_s + target_s
    trace = traced.summary() if args.trace else {}
    return Row(
        method=method,
        budget=budget if method != "sequential" else 0,
        tokens_per_pass=tokens / passes,
        draft_s=draft_s / passes,
        target_s=target_s / passes,
        tokens_per_s=tokens / total,
        search_overhead=(draft_s - draft_forward_s) / total,
        draft_forwards=forwards / passes,
        syncs_per_pass=trace.get("syncs_per_pass"),
        kernels_per_draft_forward=trace.get("kernels_per_draft_forward"),
        kernels_per_pass=trace.get("kernels_per_pass"),
        h2d_bytes_per_pass=trace.get("h2d_bytes_per_pass"),
        overlap=tree.overlap and method == "specexec",
        **tally.summary(),
    )


def print_table(rows: list[Row]) -> None:
    traced = any(row.syncs_per_pass is not None for row in rows)
    trace_header = f"{'syncs/pass':>11}{'kern/fwd':>9}{'kern/pass':>10}{'H2D KB/pass':>12}" if traced else ""
    print(
        f"{'method':<11}{'budget':>7}{'tok/pass':>10}{'draft s':>10}{'target s':>10}{'tok/s':>9}{'search%':>9}{'fwd/pass':>9}{'speedup':>9}"
        + trace_header
    )
    for row in rows:
        speedup = f"{row.speedup:.2f}x" if row.speedup is not None else "-"
        trace = ""
        if traced and row.syncs_per_pass is not None:
            trace = (
                f"{row.syncs_per_pass:>11.2f}{row.kernels_per_draft_forward:>9.0f}{row.kernels_per_pass:>10.0f}"
                f"{row.h2d_bytes_per_pass / 1e3:>12.1f}"
            )
        print(
            f"{row.method:<11}{row.budget:>7}{row.tokens_per_pass:>10.2f}{row.draft_s:>10.4f}{row.target_s:>10.4f}"
            f"{row.tokens_per_s:>9.2f}{100 * row.search_overhead:>8.1f}%{row.draft_forwards:>9.1f}{speedup:>9}" + trace
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
    from core.text.prompts import encode_prompt, read_prompt_file  # transformers: not for `--help`

    apply_torch_threads(args.threads)
    methods = list(args.methods)
    if args.baseline and "sequential" not in methods:
        methods.insert(0, "sequential")
    needs_draft = any(m != "sequential" for m in methods)
    prompts = read_prompt_file(args.prompts)[: args.limit]  # a missing file or grammar: an error before the load
    spec = grammar_spec(args)
    target, draft = load_pair(args, need_draft=needs_draft)
    prompts_ids = [encode_prompt(target.tokenizer, p) for p in prompts]
    rows = []
    for method in methods:
        for budget in [0] if method == "sequential" else args.budgets:
            row = measure(target, draft, prompts_ids, method, budget, args, spec)
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
