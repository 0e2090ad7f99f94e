"""Flags shared by commands that load models and sample (generate, chat, bench)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from core.generation import METHODS, DecodingSettings
from core.methods.specexec import TreeSettings
from core.sampling import SamplingParams

if TYPE_CHECKING:
    from core.offload.routing import OffloadSettings

DEFAULTS = TreeSettings()


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--target", default="builtin", help="folder, .gguf file, cached repo id, or 'builtin'")
    parser.add_argument("--draft", default="builtin-draft", help="folder, .gguf file, cached repo id, or 'builtin-draft'")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--dtype", choices=["auto", "float32", "float16", "bfloat16"], default="auto")
    parser.add_argument("--offload", choices=["auto", "on", "off"], default="auto",
                        help="stream the target's layers from host RAM (auto: GPTQ, or when it does not fit in VRAM)")
    parser.add_argument("--vram-budget", type=float, default=None, metavar="GB",
                        help="VRAM for the offloaded target's weights (default: free VRAM minus draft, caches, margin)")
    parser.add_argument("--resident-layers", default="auto", metavar="N|auto",
                        help="offloaded target layers kept on the GPU (auto: as many as the budget allows)")


def add_tree_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", type=int, default=DEFAULTS.budget, help="draft tokens per target pass (K)")
    parser.add_argument("--max-depth", type=int, default=DEFAULTS.max_depth, help="deepest draft node (D)")
    parser.add_argument("--expand", type=int, default=DEFAULTS.expand, help="nodes expanded per draft forward (B), at least; widened to budget/8 for big budgets")
    parser.add_argument("--draft-top-p", action="store_true", help="truncate the draft tree to the target's top-p nucleus")


def add_sampling_arguments(parser: argparse.ArgumentParser, temperature: float = 0.7, top_p: float = 0.9) -> None:
    parser.add_argument("--temperature", type=float, default=temperature, help="0 = greedy")
    parser.add_argument("--top-p", type=float, default=top_p)
    parser.add_argument("--top-k", type=int, default=0, help="0 = off")
    parser.add_argument("--repetition-penalty", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)


def add_generation_arguments(parser: argparse.ArgumentParser) -> None:
    """Everything `generate` and `chat` share."""
    add_model_arguments(parser)
    parser.add_argument("--method", choices=METHODS, default="specexec")
    add_tree_arguments(parser)
    add_sampling_arguments(parser)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--stop", action="append", default=[], metavar="STR", help="stop string (repeatable)")


def offload_settings(args: argparse.Namespace) -> "OffloadSettings":
    from core.offload.routing import OffloadSettings, parse_resident_layers

    return OffloadSettings(
        mode=args.offload,
        vram_budget_gb=args.vram_budget,
        resident_layers=parse_resident_layers(args.resident_layers),
        tree_budget=_largest_budget(args),
    )


def engine_load_settings(args: argparse.Namespace) -> dict[str, object]:
    """The model flags as fields of the engine's Load request (commands that drive the engine process)."""
    offload_settings(args)  # bad offload flags fail here, before an engine starts
    return dict(
        dtype=args.dtype, device=args.device, offload=args.offload, vram_budget_gb=args.vram_budget,
        resident_layers=args.resident_layers,
    )


def _largest_budget(args: argparse.Namespace) -> int:
    """The biggest tree the command will score: it sizes the activations an offloaded target reserves."""
    return max(getattr(args, "budgets", None) or [getattr(args, "budget", DEFAULTS.budget)])


def tree_settings(args: argparse.Namespace, budget: int | None = None) -> TreeSettings:
    return TreeSettings(
        budget=args.budget if budget is None else budget,
        max_depth=args.max_depth,
        expand=args.expand,
        draft_top_p=args.draft_top_p,
    )


def sampling_params(args: argparse.Namespace, seed: int | None = None) -> SamplingParams:
    return SamplingParams(
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        repetition_penalty=getattr(args, "repetition_penalty", 1.0),
        seed=args.seed if seed is None else seed,
    )


def decoding_settings(args: argparse.Namespace) -> DecodingSettings:
    return DecodingSettings(
        method=args.method, tree=tree_settings(args), max_new_tokens=args.max_new_tokens, stop=tuple(args.stop)
    )
