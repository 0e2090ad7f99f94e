"""`specexec bench autotune`: the automatic method and budget against a sweep of fixed settings.

Every setting (plain decoding, SpecExec at each --budgets, and auto) answers the same prompts with the same
seeds in the same process, interleaved: each repetition runs every setting once, in a rotated order, so a
machine whose load changes slows them all alike. tokens/s is wall-clock over whole answers (prefill
included). The auto tuner keeps what it learned from one repetition to the next, as the engine does from
one turn to the next. Goals (issue 11): auto within 10% of the best fixed setting, never below 0.9x plain.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from typing import TYPE_CHECKING

from core.cli.options import add_model_arguments, add_sampling_arguments, budget_list, sampling_params
from core.cli.pair import load_pair

if TYPE_CHECKING:
    from core.decoding.settings import DecodingSettings

# Used when no --prompts file is given: short chat questions like the app's first turns.
DEFAULT_PROMPTS = (
    "Why is the sky blue?",
    "Write a haiku about a lighthouse.",
    "Explain what a hash table is in two sentences.",
    "Give me three tips for a job interview.",
)


@dataclass
class Row:
    setting: str
    tokens: int = 0
    passes: int = 0
    seconds: float = 0.0
    per_repeat: list[float] = field(default_factory=list)  # tokens/s of each repetition

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--prompts", default=None, help="JSON Lines prompt file (default: four built-in questions)")
    parser.add_argument("--limit", type=int, default=None, help="use the first N prompts")
    parser.add_argument("--budgets", type=budget_list, default=[16, 64, 256], help="fixed SpecExec budgets to sweep")
    parser.add_argument("--expand", type=int, default=32, help="expansion width of the fixed SpecExec settings")
    parser.add_argument("--max-depth", type=int, default=32, help="deepest draft node (default %(default)s)")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions of the whole sweep")
    add_sampling_arguments(parser, temperature=0.6)
    parser.add_argument("--max-new-tokens", type=int, default=32, help="tokens per answer (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def _settings(args: argparse.Namespace) -> dict[str, DecodingSettings]:
    from core.decoding.settings import DecodingSettings, TreeSettings

    fixed = {
        f"specexec {k}": DecodingSettings(
            method="specexec",
            tree=TreeSettings(budget=k, max_depth=args.max_depth, expand=args.expand),
            max_new_tokens=args.max_new_tokens,
        )
        for k in args.budgets
    }
    auto = DecodingSettings(
        method="auto",
        auto_budget=True,
        tree=TreeSettings(budget=max([1024] + args.budgets), max_depth=args.max_depth),
        max_new_tokens=args.max_new_tokens,
    )
    return {
        "sequential": DecodingSettings(method="sequential", max_new_tokens=args.max_new_tokens),
        **fixed,
        "auto": auto,
    }


def run(args: argparse.Namespace) -> int:
    from core.decoding.autotune.cost_model import cached_cost_model
    from core.decoding.autotune.setup import tuner_for_pair
    from core.decoding.generation import stream_generate
    from core.text.prompts import Prompt, encode_prompt, read_prompt_file

    say = (lambda text: None) if args.json else (lambda text: print(text, file=sys.stderr, flush=True))
    target, draft = load_pair(args, need_draft=True)
    texts = (
        read_prompt_file(args.prompts)
        if args.prompts
        else [Prompt(messages=({"role": "user", "content": q},)) for q in DEFAULT_PROMPTS]
    )
    prompts = [encode_prompt(target.tokenizer, p) for p in texts[: args.limit]]
    started = time.perf_counter()
    _, measured = cached_cost_model(target.lm, draft.lm)
    say(f"cost model {'measured' if measured else 'read from the cache'} in {time.perf_counter() - started:.2f} s")
    tuner = tuner_for_pair(target.lm, draft.lm, args.max_depth)
    settings = _settings(args)
    rows = {name: Row(name) for name in settings}
    chosen: Counter[str] = Counter()
    names = list(settings)
    for repeat in range(args.repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for name in order:
            row, before = rows[name], (rows[name].tokens, rows[name].seconds)
            for index, prompt_ids in enumerate(prompts):
                params = sampling_params(args, seed=args.seed + index)
                begin = time.perf_counter()
                for chunk in stream_generate(
                    target.lm,
                    draft.lm,
                    target.tokenizer,
                    prompt_ids,
                    params,
                    settings[name],
                    tuner=tuner if name == "auto" else None,
                ):
                    row.tokens += len(chunk.token_ids)
                    row.passes += 1
                    if chunk.choice is not None:
                        config = chunk.choice.config
                        chosen[
                            f"{config.method} {config.budget}/{config.expand}" if config.budget else config.method
                        ] += 1
                row.seconds += time.perf_counter() - begin
            row.per_repeat.append((row.tokens - before[0]) / max(row.seconds - before[1], 1e-9))
            say(f"  repetition {repeat + 1}/{args.repeats} {name}: {row.per_repeat[-1]:.2f} tokens/s")
    report = _report(rows, chosen, tuner.current.reason if tuner.current else "")
    if args.json:
        print(json.dumps(report))
    else:
        _print(report)
    return 0


def _report(rows: dict[str, Row], chosen: Counter, reason: str) -> dict:
    auto, sequential = rows["auto"], rows["sequential"]
    fixed = [r for name, r in rows.items() if name != "auto"]
    best = max(fixed, key=lambda r: r.tokens_per_s)
    repeats = range(len(auto.per_repeat))
    best_each = [max(r.per_repeat[i] for r in fixed) for i in repeats]
    return {
        "rows": [dict(asdict(r), tokens_per_s=r.tokens_per_s) for r in rows.values()],
        "best_fixed": best.setting,
        "auto_vs_best_fixed": auto.tokens_per_s / best.tokens_per_s,
        "auto_vs_sequential": auto.tokens_per_s / sequential.tokens_per_s,
        # per repetition (robust to load that changes between repetitions): median of the ratios
        "median_auto_vs_best_fixed": statistics.median(auto.per_repeat[i] / best_each[i] for i in repeats),
        "median_auto_vs_sequential": statistics.median(auto.per_repeat[i] / sequential.per_repeat[i] for i in repeats),
        "auto_passes_by_choice": dict(chosen),
        "auto_reason": reason,
    }


def _print(report: dict) -> None:
    print(f"{'setting':<14}{'tokens':>8}{'passes':>8}{'seconds':>9}{'tok/s':>8}   per repetition")
    for row in report["rows"]:
        each = " ".join(f"{v:.2f}" for v in row["per_repeat"])
        print(
            f"{row['setting']:<14}{row['tokens']:>8}{row['passes']:>8}{row['seconds']:>9.2f}{row['tokens_per_s']:>8.2f}   {each}"
        )
    print(
        f"auto / best fixed ({report['best_fixed']}): {report['auto_vs_best_fixed']:.2f}x "
        f"(median per repetition {report['median_auto_vs_best_fixed']:.2f}x; goal >= 0.90x)"
    )
    print(
        f"auto / sequential: {report['auto_vs_sequential']:.2f}x "
        f"(median per repetition {report['median_auto_vs_sequential']:.2f}x; goal >= 0.90x)"
    )
    print(f"auto passes by choice: {report['auto_passes_by_choice']}")
    print(f"auto's last choice: {report['auto_reason']}")
