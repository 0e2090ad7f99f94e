"""`specexec bench trace`: the GPU proxies of a SpecExec pass, counted on any device (core/bench/device_trace.py).

Per tree budget and per target placement (resident; offloaded: the target's layers streamed from a host
store through device ring slots, `stream_on_cpu` on a CPU), SpecExec answers one prompt and every pass after
the first (which also prefills the prompt) is traced: host syncs per pass (by site) and inside draft
forwards (and in the whole draft search, per forward), kernels per draft forward and per pass, bytes copied
host to device per pass, tokens per pass.
`--methods sequential,specexec --answer-tokens 200` traces whole answers instead (the prefill included): the
distinct attention shapes an answer sends to `scaled_dot_product_attention` (issue 37: each may cost cuDNN a plan
on a GPU), and kernels per token. `SPECEXEC_ATTENTION_FIX=0` shows the shapes without column buckets.
The counting is core/bench/pass_trace.py's, which `bench acceptance --trace` adds its columns from.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from core.cli.options import (
    add_model_arguments,
    add_overlap_arguments,
    add_sampling_arguments,
    add_threads_argument,
    budget_list,
    sampling_params,
)
from core.system.threads import apply_torch_threads

TARGET_KINDS = ("resident", "offloaded")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument(
        "--budgets",
        type=budget_list,
        default=[64, 256, 1024],
        help="draft tokens per target pass to trace, comma separated (default 64,256,1024)",
    )
    parser.add_argument(
        "--methods",
        type=lambda t: [p for p in t.split(",") if p],
        default=["specexec"],
        help="specexec and/or sequential (plain decoding: one row, whatever the budgets)",
    )
    parser.add_argument(
        "--answer-tokens",
        type=int,
        default=None,
        help="trace whole answers of this many tokens instead of --passes passes",
    )
    parser.add_argument(
        "--targets",
        type=lambda t: [p for p in t.split(",") if p],
        default=list(TARGET_KINDS),
        help="resident and/or offloaded (the target's layers streamed; on a CPU through host copies)",
    )
    parser.add_argument(
        "--offload-resident-layers",
        type=int,
        default=8,
        help="layers of the offloaded target kept resident (the rest stream every pass)",
    )
    parser.add_argument("--prompts", default=None, help="JSON Lines prompt file (default: a built-in chat prompt)")
    parser.add_argument("--prompt-index", type=int, default=0, help="which prompt of the file to answer (from 0)")
    parser.add_argument("--passes", type=int, default=6, help="passes traced per configuration (after the first)")
    add_sampling_arguments(parser, temperature=0.6)
    parser.add_argument("--max-depth", type=int, default=32, help="deepest draft node (default %(default)s)")
    parser.add_argument("--expand", type=int, default=32, help="nodes expanded per draft forward (default %(default)s)")
    parser.add_argument("--no-adaptive-depth", action="store_true", help="every pass makes the search's full forwards")
    add_overlap_arguments(parser)
    add_threads_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")


_DEFAULT_QUESTION = "Explain why the sky is blue in a few sentences."


def _load(args: argparse.Namespace, kind: str):
    """(target CausalLM, draft LoadedModel, tokenizer) for a target placement."""
    from core.loading.builtin import ensure_converted, is_builtin
    from core.cli.pair import load_pair
    from core.loading.load import resolve_spec
    from core.offload import load_offloaded

    target, draft = load_pair(args)
    if kind == "resident":
        return target.lm, draft, target.tokenizer
    folder = ensure_converted() if is_builtin(args.target) else resolve_spec(args.target)[1]
    offloaded = load_offloaded(
        str(folder),
        str(target.lm.device),
        target.lm.dtype,
        resident_layers=args.offload_resident_layers,
        n_slots=2,
        tree_budget=max(args.budgets),
        stream_on_cpu=target.lm.device.type == "cpu",
    )
    return offloaded, draft, target.tokenizer


def measure(args: argparse.Namespace) -> list[dict[str, object]]:
    from core.text.prompts import Prompt, encode_prompt, read_prompt_file  # transformers: not for `--help`

    prompts = (
        read_prompt_file(args.prompts)
        if args.prompts
        else [Prompt(messages=({"role": "user", "content": _DEFAULT_QUESTION},))]
    )
    params = sampling_params(args)
    rows = []
    for kind in args.targets:
        target, draft, tokenizer = _load(args, kind)
        prompt_ids = encode_prompt(tokenizer, prompts[args.prompt_index])
        for method in args.methods:
            for budget in args.budgets if method == "specexec" else [0]:
                rows.append(
                    {
                        "target": kind,
                        "method": method,
                        "budget": budget,
                        **_trace_one(args, method, budget, target, draft, tokenizer, prompt_ids, params),
                    }
                )
                print(
                    f"  traced {kind} target, {method}, budget {budget}: {rows[-1]['syncs_per_pass']:.1f} syncs "
                    f"per pass, {rows[-1]['attention_shapes_whole_answer']} attention shapes",
                    file=sys.stderr,
                )
    return rows


def _trace_one(args, method: str, budget: int, target, draft, tokenizer, prompt_ids, params) -> dict[str, object]:
    """One traced configuration: --passes passes after the first, or a whole answer of --answer-tokens."""
    from core.bench.pass_trace import PassTrace, traced_stream
    from core.decoding.settings import DecodingSettings, TreeSettings, overlap_wanted

    tree = TreeSettings(
        budget=max(budget, 1),
        max_depth=args.max_depth,
        expand=args.expand,
        overlap=method == "specexec" and overlap_wanted(target.device, args.no_overlap, measuring=True),
        shadow_forwards=args.shadow_forwards,
    )
    if args.no_adaptive_depth:
        tree = dataclasses.replace(tree, adaptive_depth=False)
    settings = DecodingSettings(method=method, tree=tree, max_new_tokens=args.answer_tokens or 1024)
    totals = PassTrace()
    stream = traced_stream(
        target, draft.lm if method == "specexec" else None, tokenizer, prompt_ids, params, settings, totals
    )
    for _ in stream:
        if args.answer_tokens is None and totals.passes >= args.passes:
            break
    stream.close()
    return {"overlap": tree.overlap, **totals.summary()}


def print_table(rows: list[dict[str, object]]) -> None:
    print(
        f"{'target':<10}{'method':>11}{'budget':>7}{'syncs/pass':>11}{'max':>5}{'in fwd':>7}{'search/fwd':>11}{'fwd/pass':>9}"
        f"{'kern/fwd':>9}{'kern/pass':>10}{'kern/tok':>9}{'graphs':>7}{'H2D MB/pass':>12}{'tok/pass':>9}{'attn shapes':>12}"
    )
    for r in rows:
        print(
            f"{r['target']:<10}{r['method']:>11}{r['budget']:>7}{r['syncs_per_pass']:>11.2f}{r['max_syncs_in_a_pass']:>5}"
            f"{r['syncs_per_draft_forward']:>7.2f}{r['search_syncs_per_draft_forward']:>11.2f}"
            f"{r['draft_forwards_per_pass']:>9.1f}{r['kernels_per_draft_forward']:>9.0f}"
            f"{r['kernels_per_pass']:>10.0f}{r['kernels_per_token']:>9.0f}{r['kernels_per_token_step_graphs']:>7.0f}{r['h2d_bytes_per_pass'] / 1e6:>12.2f}"
            f"{r['tokens_per_pass']:>9.2f}{r['attention_shapes_whole_answer']:>12}"
        )
    print("\nhost syncs per pass by site:")
    for r in rows:
        print(f"  {r['target']} target, {r['method']}, budget {r['budget']}:")
        for site, count in r["sync_sites_per_pass"].items():
            print(f"    {count:6.2f}  {site}")


def run(args: argparse.Namespace) -> int:
    apply_torch_threads(args.threads)
    rows = measure(args)
    if args.json:
        print(json.dumps({"rows": rows}))
    else:
        print_table(rows)
    return 0
