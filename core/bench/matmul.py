"""`specexec bench matmul`: every 4-bit draft kernel's read rate at a draft's shapes, beside a dense 16-bit product.

A 4-bit draft's forward is a string of small matrix products (1-64 rows) whose time is reading the packed
weights: the rate a kernel reaches, in bytes of packed weights, zeros and scales per second, is what the
engine chooses a draft's kernel by (core.offload.draft_kernels) and what the speed model prices the draft with
(core/models/speed.py). This times each kernel this build runs here (torch's int4 kernel, the fused Triton
matmul, dequantise + GEMM, PyTorch's unpacking + GEMM) on the shapes of an 8B Llama draft's linears (q/o, k/v,
gate/up, down) and, with --target-shapes, a 70B layer's, each beside a dense 16-bit product of the same shape
(the rate this card reads memory at in a GEMM; `floor` is the 4-bit bytes at that rate), with the weights
rotated through more copies than the GPU's L2 cache holds so that every call reads memory. `--sweep` also
times a grid of the fused kernel's launch configurations to choose `core.offload.gptq_matmul.launch_config`.

`core.offload.matmul_rate.measured_rates(device)` gives the figures the doctor and `specexec hw --measure`
record for a card: each kernel's bytes over seconds across the 8B draft's linears at 1, 16, 32 and 64 rows.
"""

from __future__ import annotations

import argparse
import json

from core.cli.options import int_list


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        default="auto",
        help="auto, cpu (the eager path and torch's CPU int4 kernel: a check only) or cuda[:i]",
    )
    parser.add_argument(
        "--rows",
        type=int_list,
        default=None,
        help="rows of each product, comma separated (default: core.offload.matmul_rate.ROWS, 1 to 256)",
    )
    parser.add_argument("--target-shapes", action="store_true", help="also a 70B layer's linears")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="one tiny linear instead of the draft's (a check that it runs, e.g. on the CPU)",
    )
    parser.add_argument("--sweep", action="store_true", help="time a grid of launch configurations too")
    parser.add_argument(
        "--repeats", type=int, default=20, help="timed calls per kernel and shape (default %(default)s)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    import torch

    from core.loading.load import resolve_device
    from core.offload.matmul_rate import (
        DRAFT_SHAPES,
        GROUP_SIZE,
        ROWS,
        SMOKE_SHAPES,
        TARGET_SHAPES,
        kernels_on,
        measure_shapes,
    )

    device = resolve_device(args.device)
    rows = list(ROWS) if args.rows is None else args.rows
    shapes = (SMOKE_SHAPES if args.smoke else DRAFT_SHAPES) + (TARGET_SHAPES if args.target_shapes else ())
    kernels = kernels_on(device)
    results = measure_shapes(device, shapes, rows, args.repeats, args.sweep, kernels=kernels)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    if args.json:
        print(json.dumps({"device": name, "kernels": list(kernels), "rows": results}, indent=1))
        return 0
    print(
        f"4-bit draft kernels on {name} (group {GROUP_SIZE}, weights rotated past the L2 cache); GB/s of packed "
        "bytes read, and the 16-bit product's time and rate"
    )
    print(
        f"{'shape':>12} {'K x N':>13} {'rows':>4}  "
        + "  ".join(f"{kernel:>17}" for kernel in kernels)
        + f"  {'dense 16-bit':>17}  {'floor':>9}"
    )
    for r in results:
        cells = []
        for kernel in kernels:
            key = kernel.replace(" ", "_")
            cells.append(f"{r[key + '_s'] * 1e6:8.1f} us {r[key + '_gbps']:5.0f}" if key + "_s" in r else f"{'-':>17}")
        best = f"; fused best {r['best_gbps']:.0f} GB/s with {r['best']}" if "best" in r else ""
        print(
            f"{r['shape']:>12} {r['k']:>6}x{r['n']:<6} {r['rows']:>4}  "
            + "  ".join(cells)
            + f"  {r['dense16_s'] * 1e6:8.1f} us {r['dense16_gbps']:5.0f}  {r['floor_s'] * 1e6:6.1f} us{best}"
        )
    return 0
