"""`specexec bench matmul`: the fused 4-bit matmul's memory bandwidth at a draft's shapes, and its launches.

A 4-bit draft's forward is a string of small matrix products (1-256 rows) whose time is reading the packed
weights: the rate it reaches, in bytes of packed weights, zeros and scales per second, is what the speed
model needs for the draft (core/models/speed.py), and differs from the card's datasheet bandwidth by the
kernel's efficiency. This measures it on the shapes of an 8B Llama draft's linears (q/o, k/v, gate/up, down)
and of a 70B layer's, against dequantise-then-GEMM, with the weights rotated through more copies than the
GPU's L2 cache holds so that every call reads memory. `--sweep` also times a grid of launch configurations
(tiles, K splits, warps, stages) to choose `core.offload.gptq_matmul.launch_config`'s rule.

`core.offload.matmul_rate.measured_bandwidth(device)` is the one figure the doctor and `specexec hw --measure` record for a card:
the default launch at 32 rows over the 8B draft's linears, bytes read over seconds.
"""

from __future__ import annotations

import argparse
import json

import torch

from core.offload.matmul_rate import DRAFT_SHAPES, GROUP_SIZE, ROWS, SMOKE_SHAPES, TARGET_SHAPES, measure_shapes

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto, cpu (Triton's interpreter: slow, for a check) or cuda[:i]")
    parser.add_argument("--rows", type=lambda t: [int(p) for p in t.split(",") if p], default=list(ROWS))
    parser.add_argument("--target-shapes", action="store_true", help="also a 70B layer's linears")
    parser.add_argument("--smoke", action="store_true",
                        help="one tiny linear instead of the draft's (a check that it runs, e.g. on the CPU)")
    parser.add_argument("--sweep", action="store_true", help="time a grid of launch configurations too")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from core.loading.load import resolve_device

    device = resolve_device(args.device)
    shapes = (SMOKE_SHAPES if args.smoke else DRAFT_SHAPES) + (TARGET_SHAPES if args.target_shapes else ())
    results = measure_shapes(device, shapes, args.rows, args.repeats, args.sweep)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu (Triton interpreter)"
    if args.json:
        print(json.dumps({"device": name, "rows": results}, indent=1))
        return 0
    print(f"fused 4-bit matmul on {name} (group {GROUP_SIZE}, weights rotated past the L2 cache)")
    for r in results:
        best = f"; best {r['best_gbps']:.0f} GB/s with {r['best']}" if "best" in r else ""
        print(f"{r['shape']:>12} {r['k']:>6}x{r['n']:<6} rows {r['rows']:>4}: {r['fused_s'] * 1e6:8.1f} us "
              f"({r['fused_gbps']:6.0f} GB/s); dequantise + GEMM {r['dequantise_gemm_s'] * 1e6:8.1f} us{best}")
    return 0
