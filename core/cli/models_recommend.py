"""`specexec models recommend [--json] [--budget K|auto] [--draft ID] [--context-length N] [--hw FILE]
[--measure]`: which catalog pairs this computer can run, how fast, and which one to pick (core.models.fit). Each
pair is predicted with its own draft (`draft` in the JSON) and with every other draft it offers
(`draft_options`); `--draft 16bit` predicts and ranks the pairs with that draft instead."""

from __future__ import annotations

import argparse
import json
import os

from core.cli.hw import add_hw_argument
from core.cli.options import budget_value, whole_number_at_least
from core.hardware.summary import describe_lines
from core.planning.residency import MIN_CONTEXT, PLANNED_CONTEXT
from core.planning.sizes import format_bytes
from core.system.disk import SPARE_BYTES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object (a stable contract)")
    parser.add_argument(
        "--budget",
        type=budget_value,
        default="auto",
        metavar="K|auto",
        help="draft tokens per target pass to predict for (lowered where VRAM is short); auto "
        "(default): planned as the engine loads, at the fastest budget it may choose",
    )
    parser.add_argument(
        "--draft",
        default=None,
        metavar="ID",
        help="predict the pairs that offer this draft (e.g. 16bit) with it instead of their own",
    )
    parser.add_argument(
        "--context-length",
        type=whole_number_at_least(MIN_CONTEXT, f"the context length must be at least {MIN_CONTEXT} tokens"),
        default=None,
        metavar="N",
        help=f"tokens of a chat the KV caches are planned for (default {PLANNED_CONTEXT}); a pair that keeps "
        "less is planned for its own limit, as the app loads it",
    )
    parser.add_argument(
        "--measure",
        action="store_true",
        help="measure the host-to-device copy rate instead of estimating it from the PCIe link",
    )
    parser.add_argument(
        "--no-overlap",
        action="store_true",
        help="predict without drafting while the target's layers stream (as with SPECEXEC_OVERLAP=0)",
    )
    add_hw_argument(parser)


def run(args: argparse.Namespace) -> int:
    from core.errors import InvalidSettingError
    from core.hardware.probe import describe_hardware
    from core.models.catalog import load_catalog
    from core.models.fit import recommend
    from core.planning.budgets import check_tree_budget
    from core.system.env import OVERLAP_ENV

    budget = None if args.budget == "auto" else check_tree_budget(args.budget)
    catalog = load_catalog()
    offered = sorted({option.id for pair in catalog.pairs for option in pair.drafts})
    if args.draft is not None and args.draft not in offered:
        raise InvalidSettingError(
            f"no pair offers a draft '{args.draft}': the catalog's drafts are {', '.join(offered)}"
        )
    result = recommend(
        catalog,
        describe_hardware(args.hw, measure=args.measure),
        budget,
        args.draft,
        overlap=not args.no_overlap and os.environ.get(OVERLAP_ENV) != "0",
        context_length=args.context_length,
    )
    print(json.dumps(result.to_dict(), indent=2) if args.json else "\n".join(table_lines(result)))
    return 0


DISK_FULL_MARK = "*"  # after a download the models' drive cannot hold; the note under the table says so


def table_lines(result) -> list[str]:
    lines = describe_lines(result.hardware) + [""]
    best = result.pairs[0]
    lines.append(f"Recommended: {best.pair.name} ({best.pair.id})")
    lines.append("")
    # a pair's other drafts follow it on rows without its name
    rows = [row for top in result.pairs for row in [(top.pair.name, top), *(("", o) for o in top.draft_options)]]
    name_width = max(len("pair"), *(len(name) for name, _ in rows))
    draft_width = max(len("draft"), *(len(_draft(fit)) for _, fit in rows))
    lines.append(
        f"  {'pair':<{name_width}} {'draft':<{draft_width}} {'fit':<5} {'tokens/s':>8} {'on GPU':>7} {'download':>9}  why"
    )
    lines.extend(_row(name, fit, name_width, draft_width) for name, fit in rows)
    lines.append("")
    if best.pass_seconds is not None:
        lines.append(
            f"{best.pair.name}: {best.pass_seconds:.2f} s per target pass + {best.draft_seconds:.2f} s drafting, "
            f"{best.tokens_per_pass:.1f} tokens per pass at budget {best.budget}"
        )
    lines.append(f"  copy rate: {best.rate_source}")
    lines.append(f"  context: planned for {best.planned_context:,} tokens of a chat (`--context-length`)")
    lines.append(f"  tokens per pass: {best.acceptance_source}")
    lines.append(
        "Speeds are estimates; `--json` has every figure and its source. Indented rows: the same pair with "
        "another draft (`--draft ID` ranks with it)."
    )
    if any(fit.disk_ok is False for _, fit in rows):
        lines.append(
            f"{DISK_FULL_MARK} More than the drive holding the models has free (with {format_bytes(SPARE_BYTES)} "
            "left over): free some space there before downloading it."
        )
    return lines


def _draft(fit) -> str:
    """The draft's id where the pair offers a choice of drafts; empty where it has one."""
    return fit.pair.draft_id if fit.pair.draft_options else ""


def _row(name: str, fit, name_width: int, draft_width: int) -> str:
    """One line of the table: the columns as wide as their longest entry, so a long pair name never runs into
    the next column."""
    speed = "-" if fit.tokens_per_second is None else f"{fit.tokens_per_second:.1f}"
    layers = "-" if fit.resident_layers is None else f"{fit.resident_layers}/{fit.total_layers}"
    download = format_bytes(fit.pair.download_bytes) if fit.pair.download_bytes else "built-in"
    download += DISK_FULL_MARK if fit.disk_ok is False else ""
    return f"  {name:<{name_width}} {_draft(fit):<{draft_width}} {fit.fit:<5} {speed:>8} {layers:>7} {download:>9}  {fit.reason}"
