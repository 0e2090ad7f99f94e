"""`specexec bench offload`: how close a streamed target pass gets to the host-to-device copy floor.

Synthetic Llama-2-70B-shaped decoder layers (hidden 8192, intermediate 28672, 64 heads, 8 KV heads),
GPTQ 4-bit (group 128, act-order) and/or fp16, filled with random data and streamed through the same
`LayerStreamer` the engine uses. First the pinned host-to-device copy rate of one layer is measured, then
for each tree size a full pass over `--layers` layers: seconds per pass, achieved GB/s, ratio to the copy
rate, the fraction of compute hidden under copies, and what the two-stream model of the plan predicts
(`pass_timeline`) from the measured copy and compute times. Each timed pass starts from an empty ring (no
prefetch). Finally a resident-layer sweep for the full-width 80-layer model under each `--vram-budgets`
value, with its pass floor at the measured copy rate.

`--pin-limit-gb G` page-locks at most G GB of the layers, as SPECEXEC_PIN_LIMIT_GB does in the engine (and as
Windows or WSL2 do on their own): the rest stage through the pinned ring (core.offload.staging), so its rate
can be measured against fully pinned (no limit) and pageable copies (the copy rate printed when layer 0 is
not locked) on any machine.

Without a GPU it still runs: the "copy" is a host memcpy issued in line with the compute (nothing
overlaps), compute is CPU float32 (CPU half-precision matmuls are ~70x slower), and by default the layer
widths are divided by 4 (`--width-divisor`) so two layers finish in well under a minute on two cores.
Those numbers only check the machinery; they say nothing about PCIe or GPU speed.
"""

from __future__ import annotations

import argparse
import json

from core.cli.options import add_threads_argument, int_list
from core.errors import InvalidSettingError
from core.planning.pinning import parse_pin_limit
from core.system.env import PIN_LIMIT_ENV
from core.system.threads import apply_torch_threads

NO_GPU_NOTE = (
    "NOTE: no CUDA GPU present. 'copy' is a host memcpy run in line with the compute (no overlap is "
    "possible), compute is CPU float32 at reduced width; these numbers check the machinery only and say "
    "nothing about PCIe bandwidth or GPU speed."
)


def _float_list(text: str) -> list[float]:
    return [float(part) for part in text.split(",") if part]


def _pin_limit(text: str) -> int | None:
    try:
        return parse_pin_limit(text)
    except InvalidSettingError as error:
        raise argparse.ArgumentTypeError(str(error).replace(PIN_LIMIT_ENV, "--pin-limit-gb")) from error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format", choices=["gptq", "fp16", "both"], default="both", help="weight format of the synthetic layers"
    )
    parser.add_argument(
        "--layers", type=int, default=None, help="layers in the host store (default: 8 on a GPU, 2 on the CPU)"
    )
    parser.add_argument(
        "--tree-sizes",
        type=int_list,
        default=None,
        help="tokens per pass, comma separated (default: 1,64,256,1024,2048 on a GPU, 1,16,64 on the CPU)",
    )
    parser.add_argument(
        "--vram-budgets",
        type=_float_list,
        default=[8.0, 12.0, 16.0, 20.0],
        help="GB of VRAM for the target's weights, for the resident-layer sweep of an 80-layer model",
    )
    parser.add_argument("--bits", type=int, choices=[2, 3, 4, 8], default=4, help="GPTQ bits of the synthetic layers")
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda[:i]")
    parser.add_argument("--context", type=int, default=256, help="tokens already in the KV cache under each pass")
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed passes per tree size (default: 5 on a GPU, 1 on the CPU)"
    )
    parser.add_argument(
        "--width-divisor",
        type=int,
        default=None,
        help="divide hidden/intermediate/heads by this (default: 1 on a GPU = real 70B shape, 4 on the CPU)",
    )
    parser.add_argument(
        "--pin-limit-gb",
        type=_pin_limit,
        default=None,
        help="page-lock at most this many GB of the layers; the rest stage through the pinned ring "
        "(default: no limit; 0 stages every layer)",
    )
    add_threads_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of tables")


def _print_tables(result: dict) -> None:
    from core.offload.pass_timing import FULL_MODEL_LAYERS, GB

    print(
        f"device: {result['device']}  layers: {result['layers']}  width divisor: {result['width_divisor']}  "
        f"context: {result['context']}  compute dtype: {result['dtype']}"
    )
    if result.get("note"):
        print(result["note"])
    for fmt in result["formats"]:
        print(
            f"\n[{fmt['format']}] layer {fmt['layer_bytes'] / GB:.3f} GB, host->device copy rate "
            f"{fmt['copy_rate_gbps']:.2f} GB/s (from {fmt['copy_from']} memory)"
        )
        if fmt["ring_slots"]:
            print(
                f"{fmt['pinned_gb']:.2f} GB of the layers pinned, {fmt['staged_gb_per_pass']:.2f} GB per pass staged "
                f"through a ring of {fmt['ring_slots']} pinned slots (one worker fills {fmt['ring_fill_gbps']:.2f} GB/s)"
            )
        if fmt["dequant_path"]:
            reference = fmt["reference_dequant_s_per_layer"]
            against = f" (eager reference: {reference * 1000:.2f} ms)" if reference is not None else ""
            print(
                f"dequantisation alone ({fmt['dequant_path']}): {fmt['dequant_s_per_layer'] * 1000:.2f} ms per layer{against}"
            )
        for row in fmt["draft_matmuls"]:
            path = "fused small-batch kernel" if row["fused"] else "dequantise + GEMM (no fused kernel here)"
            print(
                f"draft batch of {row['rows']:>3} rows through the layer's linears: {row['engine_s'] * 1000:.2f} ms "
                f"({path}); dequantise + GEMM {row['dequantise_gemm_s'] * 1000:.2f} ms"
            )
        print(
            f"{'tree':>6} {'s/pass':>9} {'GB/s':>7} {'/copy':>6} {'compute s':>10} {'dequant s':>10} {'copy s':>8} "
            f"{'hidden':>7} {'model s':>8} {'80-layer s':>11}"
        )
        for row in fmt["passes"]:
            print(
                f"{row['tree_size']:>6} {row['pass_s']:>9.4f} {row['achieved_gbps']:>7.2f} {row['ratio_to_copy']:>6.2f} "
                f"{row['compute_s']:>10.4f} {row['dequant_s']:>10.4f} {row['copy_s']:>8.4f} {row['hidden_fraction']:>7.2f} "
                f"{row['model_s']:>8.4f} {row['projected_80_layer_s']:>11.3f}"
            )
        print(
            f"resident layers of the full-width {FULL_MODEL_LAYERS}-layer model per VRAM budget for its weights "
            f"(floor = streamed bytes / copy rate above):"
        )
        for row in fmt["residency"]:
            if "error" in row:
                print(f"  {row['budget_gb']:>5.1f} GB: does not fit ({row['error'].split(':')[0]})")
            else:
                print(
                    f"  {row['budget_gb']:>5.1f} GB: {row['resident_layers']:>2} resident, "
                    f"{row['streamed_gb_per_pass']:.2f} GB streamed per pass, floor {row['floor_s_per_pass']:.3f} s/pass"
                )


def run(args: argparse.Namespace) -> int:
    import torch

    from core.offload.pass_timing import GB, layer_config, measure_format

    apply_torch_threads(args.threads)
    requested = args.device
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(requested)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: --device cuda was given but no CUDA GPU is available")
        return 2
    gpu = device.type == "cuda"
    args.layers = args.layers or (8 if gpu else 2)
    args.repeats = args.repeats or (5 if gpu else 1)
    args.width_divisor = args.width_divisor or (1 if gpu else 4)
    tree_sizes = args.tree_sizes or ([1, 64, 256, 1024, 2048] if gpu else [1, 16, 64])
    if args.layers < 1 or args.width_divisor not in (1, 2, 4, 8):
        print("error: --layers must be >= 1 and --width-divisor one of 1, 2, 4, 8")
        return 2
    dtype = torch.float16 if gpu else torch.float32
    config = layer_config(args.width_divisor)
    formats = ["gptq", "fp16"] if args.format == "both" else [args.format]
    result = {
        "device": torch.cuda.get_device_name(device) if gpu else "cpu",
        "note": None if gpu else NO_GPU_NOTE,
        "layers": args.layers,
        "pin_limit_gb": None if args.pin_limit_gb is None else args.pin_limit_gb / GB,
        "width_divisor": args.width_divisor,
        "context": args.context,
        "dtype": str(dtype),
        "formats": [
            measure_format(
                fmt,
                config,
                device,
                dtype,
                tree_sizes,
                layers=args.layers,
                bits=args.bits,
                repeats=args.repeats,
                context=args.context,
                vram_budgets=args.vram_budgets,
                pin_limit_bytes=args.pin_limit_gb,
            )
            for fmt in formats
        ],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_tables(result)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specexec bench offload", description=__doc__.splitlines()[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
