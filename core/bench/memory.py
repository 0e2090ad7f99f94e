"""`specexec bench memory`: the host RAM and VRAM plan of an offloaded 70B GPTQ target per GPU size.

Nothing is loaded or allocated: each model is built on the meta device from its published shape, its GPTQ
layer layout gives the exact bytes of a layer, and the plan is the one the loader makes, from the same
functions (core.planning.residency): the default VRAM budget after the draft, both KV caches (preallocated
at the planned context plus the tree) and the activations of one pass; the resident layers that fit in it;
the bytes streamed per pass; and the host RAM the streamed layers and the embedding table take. The free
VRAM of a card is its size less `--reserved-gb` (CUDA context, the desktop). The draft (when there is one)
is counted as the loader counts it: its weights out of free VRAM (a GPTQ draft packed, with its dequantisation
scratch, as `core.offload.loader.load_on_device` checks), its KV cache and what its CUDA graphs keep
(`draft_graph_bytes`: core.decoding.graph_memory.planned_graph_bytes, the engine's own search forward on the meta
device at the plan's search width over the cache's capacity) in the budget.
"""

from __future__ import annotations

import argparse
import functools
import json
from dataclasses import asdict, dataclass

from typing import TYPE_CHECKING

from core.cli.options import int_list
from core.planning import residency
from core.planning.host_memory import host_bytes_needed
from core.planning.sizes import gptq_scratch_bytes

if TYPE_CHECKING:
    from transformers import LlamaConfig

    from core.offload.gptq import GPTQSettings

GIB = 1024**3
GB = 1e9
PCIE4_BYTES_PER_S = 25e9  # pinned host-to-device, PCIe 4.0 x16 (engineering-facts.md)

_LLAMA_70B = dict(
    hidden_size=8192, intermediate_size=28672, num_hidden_layers=80, num_attention_heads=64, num_key_value_heads=8
)
# name -> (LlamaConfig fields, GPTQSettings fields): plain numbers, so that `--help` lists the names without
# loading transformers; _shape builds the objects
MODELS = {
    "llama-2-70b-gptq": (
        dict(**_LLAMA_70B, vocab_size=32000, max_position_embeddings=4096),
        dict(bits=4, group_size=128, desc_act=True),
    ),
    "llama-3.1-70b-gptq": (
        dict(**_LLAMA_70B, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0),
        dict(bits=4, group_size=128),
    ),
}
_LLAMA_2_7B = dict(
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    vocab_size=32000,
)
_LLAMA_31_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
)
# name -> (config fields, GPTQ settings fields of a 4-bit draft or None for 16 bits): the catalog's drafts
DRAFTS = {
    "none": None,
    "llama-2-7b-fp16": (_LLAMA_2_7B, None),
    "llama-3.1-8b-fp16": (_LLAMA_31_8B, None),
    "llama-2-7b-gptq": (_LLAMA_2_7B, dict(bits=4, group_size=128)),
    "llama-3.1-8b-gptq": (_LLAMA_31_8B, dict(bits=4, group_size=128, desc_act=True)),
}


@functools.cache
def _shape(name: str) -> tuple[LlamaConfig, GPTQSettings | None]:
    """The config and GPTQ settings of a target of MODELS or a draft of DRAFTS (not "none")."""
    from transformers import LlamaConfig

    from core.offload.gptq import GPTQSettings

    config, gptq = MODELS[name] if name in MODELS else DRAFTS[name]
    return LlamaConfig(**config), GPTQSettings(**gptq) if gptq is not None else None


@dataclass(frozen=True)
class MemoryPlan:
    """One target on one card: what the loader would decide, in bytes (None fields when it does not fit)."""

    model: str
    card_gb: int
    draft: str
    context: int
    tree_budget: int
    draft_weight_bytes: int
    draft_graph_bytes: int
    kv_bytes: int
    activation_bytes: int
    budget_bytes: int | None
    device_fixed_bytes: int
    resident_layers: int | None
    n_layers: int
    streamed_bytes_per_pass: int | None
    host_ram_bytes: int | None
    floor_s_per_pass: float | None
    error: str | None = None


@functools.cache
def _layer_shapes(name: str) -> tuple[tuple[int, ...], int, int, int, int]:
    """(layer bytes, non-layer bytes, embedding bytes, largest checkpoint tensor, dequantisation scratch) of a
    GPTQ target or draft."""
    import torch
    from torch import nn

    from core.offload.gptq import DequantScratch
    from core.offload.gptq_loader import quantize_layers
    from core.offload.layout import layer_layout
    from core.offload.meta_model import EMBEDDING_KEY, build_meta_model

    config, gptq = _shape(name)
    model = build_meta_model(config, torch.float16)
    linears = [name for name, module in model.model.layers[0].named_modules() if isinstance(module, nn.Linear)]
    keys = {f"model.layers.{i}.{name}.qweight" for i in range(config.num_hidden_layers) for name in linears}
    largest_linear = quantize_layers(model, "llama", keys, gptq, DequantScratch())
    layer_bytes = tuple(layer_layout(layer).nbytes for layer in model.model.layers)
    top = {
        name: p.numel() * p.element_size()
        for name, p in model.named_parameters()
        if not name.startswith("model.layers.")
    }
    largest_layer_tensor = max(
        t.numel() * t.element_size()
        for layer in model.model.layers[:1]
        for t in list(layer.parameters()) + list(layer.buffers())
    )
    scratch = gptq_scratch_bytes(largest_linear, 2)
    return layer_bytes, sum(top.values()), top[EMBEDDING_KEY], max(max(top.values()), largest_layer_tensor), scratch


def _draft_bytes(draft: str) -> int:
    """VRAM of the draft's weights: 16-bit, or packed GPTQ layers + 16-bit non-layer weights + scratch."""
    import torch

    from core.offload.meta_model import build_meta_model

    if DRAFTS[draft] is None:
        return 0
    config, gptq = _shape(draft)
    if gptq is not None:
        layer_bytes, top_bytes, _, _, scratch = _layer_shapes(draft)
        return sum(layer_bytes) + top_bytes + scratch
    model = build_meta_model(config, torch.float16)
    return sum(p.numel() * p.element_size() for p in model.parameters())


@functools.cache
def _draft_graph_bytes(draft: str, context: int, tree_budget: int) -> int:
    """What the draft's CUDA graphs may keep, as `OffloadSettings.with_draft` reserves it (float16)."""
    import torch

    from core.decoding.graph_memory import planned_graph_bytes
    from core.planning.graph_plan import search_width

    config, _ = _shape(draft)
    return planned_graph_bytes(
        config, torch.float16, search_width(tree_budget), residency.kv_rows(context, tree_budget)
    )


def plan_for(
    model: str, card_gb: int, draft: str, context: int | None, tree_budget: int, reserved_gb: float
) -> MemoryPlan:
    """The loader's plan for `model` on a `card_gb` GB card (free VRAM = card - reserved_gb)."""
    config, _ = _shape(model)
    context = residency.resolve_context_length(context, config.max_position_embeddings)
    layer_bytes, top_bytes, embedding_bytes, largest_tensor, scratch = _layer_shapes(model)
    fixed = residency.device_fixed_bytes(top_bytes, embedding_bytes, embedding_on_host=True, scratch_bytes=scratch)
    draft_config = _shape(draft)[0] if DRAFTS[draft] is not None else None
    draft_weights = _draft_bytes(draft)
    draft_kv = (
        residency.config_kv_bytes(draft_config, residency.kv_rows(context, tree_budget), 2) if draft_config else 0
    )
    draft_graphs = _draft_graph_bytes(draft, context, tree_budget) if draft_config else 0
    free = int(card_gb * GIB - reserved_gb * GIB) - draft_weights  # the draft loads first
    target_kv = residency.config_kv_bytes(config, residency.kv_rows(context, tree_budget), 2)
    activation = residency.activation_bytes(config, tree_budget, context, 2)
    common = dict(
        model=model,
        card_gb=card_gb,
        draft=draft,
        context=context,
        tree_budget=tree_budget,
        draft_weight_bytes=draft_weights,
        draft_graph_bytes=draft_graphs,
        kv_bytes=target_kv + draft_kv,
        activation_bytes=activation,
        device_fixed_bytes=fixed,
        n_layers=len(layer_bytes),
    )
    try:
        minimum = residency.minimum_device_bytes(layer_bytes, fixed)
        fit = residency.fit_default_budget(config, free, 2, context, 0, draft_kv, minimum, tree_budget, draft_graphs)
        plan = residency.plan_residency(layer_bytes, fit.budget_bytes, fixed, residency.DEFAULT_SLOTS)
    except Exception as error:  # noqa: BLE001 - does not fit: the row says why
        return MemoryPlan(
            **common,
            budget_bytes=None,
            resident_layers=None,
            streamed_bytes_per_pass=None,
            host_ram_bytes=None,
            floor_s_per_pass=None,
            error=str(error),
        )
    host = host_bytes_needed(plan.streamed_bytes_per_pass, largest_tensor, embedding_bytes)
    return MemoryPlan(
        **dict(common, tree_budget=fit.tree_budget),
        budget_bytes=fit.budget_bytes,
        resident_layers=len(plan.resident),
        streamed_bytes_per_pass=plan.streamed_bytes_per_pass,
        host_ram_bytes=host,
        floor_s_per_pass=plan.streamed_bytes_per_pass / PCIE4_BYTES_PER_S,
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma separated, from: {', '.join(MODELS)}")
    parser.add_argument("--cards", type=int_list, default=[12, 16, 24], help="GPU sizes in GB (GiB), comma separated")
    parser.add_argument("--draft", choices=list(DRAFTS), default="none", help="draft model on the same GPU")
    parser.add_argument("--context-length", type=int, default=None, help="planned context (default 4096)")
    parser.add_argument("--tree-budget", type=int, default=128, help="draft tokens per pass the plan reserves for")
    parser.add_argument(
        "--reserved-gb", type=float, default=0.8, help="VRAM taken before loading (CUDA context, desktop)"
    )
    parser.add_argument(
        "--graphs",
        action="store_true",
        help="instead: what the draft's CUDA graphs keep, per catalog draft and context",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


GRAPH_CASES = ((4096, 256), (8192, 256), (32768, 256), (4096, 1024))  # (context, tree budget)


def graph_rows() -> list[dict]:
    """Per catalog draft and (context, tree budget) of GRAPH_CASES: the search width, the column buckets, the
    pool's scratch from the engine's forward on the meta device, the app's torch-free bound, and the plan."""
    import torch
    from transformers import AutoConfig

    from core.decoding.graph_memory import planned_graph_bytes, search_forward_peak_bytes
    from core.planning.graph_plan import column_buckets, scratch_estimate_bytes, search_width
    from core.models.catalog import load_catalog

    shapes = {}
    for pair in load_catalog().pairs:
        for option in pair.drafts:
            shapes.setdefault(option.model.repo, option.model.shape)
    rows = []
    for repo, shape in shapes.items():
        config = AutoConfig.for_model(
            shape.model_type,
            hidden_size=shape.hidden_size,
            num_hidden_layers=1,
            intermediate_size=shape.intermediate_size,
            vocab_size=shape.vocab_size,
            num_attention_heads=shape.num_attention_heads,
            head_dim=shape.head_dim,
            num_key_value_heads=shape.num_key_value_heads,
        )
        for context, tree in GRAPH_CASES:
            width, capacity = search_width(tree), residency.kv_rows(context, tree)
            rows.append(
                {
                    "draft": repo,
                    "context": context,
                    "tree_budget": tree,
                    "width": width,
                    "buckets": len(column_buckets(capacity)),
                    "scratch_meta_bytes": search_forward_peak_bytes(config, torch.float16, width, capacity),
                    "scratch_bound_bytes": scratch_estimate_bytes(shape, 2, width, capacity),
                    "planned_bytes": planned_graph_bytes(config, torch.float16, width, capacity),
                }
            )
    return rows


def _print_graphs(rows: list[dict]) -> None:
    mib = 1024**2
    print(
        f"{'draft':<52} {'ctx':>6} {'tree':>5} {'width':>5} {'buckets':>7} {'scratch MiB':>11} {'bound MiB':>9} "
        f"{'planned MiB':>11}"
    )
    for r in rows:
        print(
            f"{r['draft']:<52} {r['context']:>6} {r['tree_budget']:>5} {r['width']:>5} {r['buckets']:>7} "
            f"{r['scratch_meta_bytes'] / mib:>11.1f} {r['scratch_bound_bytes'] / mib:>9.1f} {r['planned_bytes'] / mib:>11.0f}"
        )


def run(args: argparse.Namespace) -> int:
    if args.graphs:
        rows = graph_rows()
        if args.json:
            print(json.dumps(rows, indent=2))
        else:
            _print_graphs(rows)
        return 0
    names = [name for name in args.models.split(",") if name]
    unknown = [name for name in names if name not in MODELS]
    if unknown:
        raise SystemExit(f"unknown model {', '.join(unknown)}: choose from {', '.join(MODELS)}")
    plans = [
        plan_for(name, card, args.draft, args.context_length, args.tree_budget, args.reserved_gb)
        for name in names
        for card in args.cards
    ]
    if args.json:
        print(json.dumps([asdict(plan) for plan in plans], indent=2))
        return 0
    print(f"draft: {args.draft}; free VRAM = card - {args.reserved_gb} GiB; floor at {PCIE4_BYTES_PER_S / GB:.0f} GB/s")
    print(
        f"{'model':<20} {'card':>5} {'ctx':>6} {'tree':>5} {'KV GiB':>7} {'graphs GiB':>10} {'act GiB':>8} {'fixed GiB':>9} "
        f"{'budget GiB':>10} {'resident':>9} {'GB/pass':>8} {'floor s':>8} {'host RAM GiB':>12}"
    )
    for p in plans:
        head = (
            f"{p.model:<20} {p.card_gb:>5} {p.context:>6} {p.tree_budget:>5} {p.kv_bytes / GIB:>7.2f} "
            f"{p.draft_graph_bytes / GIB:>10.2f} {p.activation_bytes / GIB:>8.2f} {p.device_fixed_bytes / GIB:>9.2f}"
        )
        if p.error is not None:
            print(f"{head} does not fit: {p.error.split(':')[0]}")
            continue
        print(
            f"{head} {p.budget_bytes / GIB:>10.2f} {p.resident_layers:>4}/{p.n_layers:<4} "
            f"{p.streamed_bytes_per_pass / GB:>8.2f} {p.floor_s_per_pass:>8.2f} {p.host_ram_bytes / GIB:>12.2f}"
        )
    return 0
