"""Every 4-bit draft kernel's read rate at a draft's shapes (and a 70B layer's): what the engine chooses a draft's
kernel by (core.offload.draft_kernels), what the doctor's draft check and `specexec hw --measure` record for a
card, and what `specexec bench matmul` prints, each beside a dense 16-bit product of the same shape (the rate
this card reads memory at in a GEMM: the read floor of the 4-bit bytes is their size at that rate). The weights
rotate through more copies than the GPU's L2 cache holds, so every call reads memory.

The kernels (core.planning.draft_kernel): torch's int4 kernel (tinygemm), the fused Triton matmul, the Triton
dequantisation then a GEMM, and PyTorch operations then a GEMM; each where this build and card run it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable

import torch

from core.offload.gptq import GPTQLinear, dequantize_into, unpack_cols, unpack_rows
from core.offload.gptq_kernel import fused_dequant_available, triton_available
from core.offload.int4pack import int4_matmul, pack_int4, tinygemm_layout, tinygemm_op_available
from core.planning.draft_kernel import DEQUANTISE, EAGER_DEQUANTISE, FUSED, TINYGEMM, available_kernels, weight_passes

# (name, K, N) of an 8B Llama draft's linears (hidden 4096, 8 KV heads of 128, MLP 14336) and a 70B layer's.
DRAFT_SHAPES = (("q/o", 4096, 4096), ("k/v", 4096, 1024), ("gate/up", 4096, 14336), ("down", 14336, 4096))
TARGET_SHAPES = (
    ("70B q/o", 8192, 8192),
    ("70B k/v", 8192, 1024),
    ("70B gate/up", 8192, 28672),
    ("70B down", 28672, 8192),
)
# Tiny linears for a smoke run on the CPU (Triton's interpreter takes minutes at the draft's shapes).
SMOKE_SHAPES = (("smoke", 256, 128),)
ROWS = (1, 16, 32, 64, 256)
DRAFT_ROWS = (1, 16, 32, 64)  # a draft's forwards: one-token catch-ups, and the search's widths (32 by default)
GROUP_SIZE = 128
# Copies of each weight the timing rotates through: together larger than any GPU's L2 cache (H100: 50 MB),
# at most MAX_COPIES of them.
L2_BYTES = 128 * 1024**2
MAX_COPIES = 64


@dataclasses.dataclass
class LinearCopies:
    """Copies of one random 4-bit linear on the device, read in turn."""

    copies: list
    bytes_read: int  # packed weights, zeros and scales of one copy


def random_linear_copies(k: int, n: int, device: torch.device, generator: torch.Generator) -> LinearCopies:
    """A random 4-bit `k` x `n` linear (GPTQ layout, group GROUP_SIZE) on `device`, in as many copies as a GPU's
    L2 cache is rotated past by (two on a processor)."""
    from core.offload.synthetic_gptq import finalised_linear, random_gptq_tensors

    tensors = random_gptq_tensors(generator, k, n, 4, GROUP_SIZE, False)
    first = finalised_linear(tensors, k, n, 4, GROUP_SIZE, False, device)
    nbytes = first.packed.nbytes
    # a GPU's L2 cache is rotated past; a processor's timing only checks the machinery: two copies
    count = min(MAX_COPIES, max(2, -(-L2_BYTES // nbytes))) if device.type == "cuda" else 2
    copies = [first] + [finalised_linear(tensors, k, n, 4, GROUP_SIZE, False, device) for _ in range(count - 1)]
    return LinearCopies(copies, nbytes)


def kernels_on(device: torch.device) -> tuple[str, ...]:
    """The draft kernels this torch build runs on `device` (core.planning.draft_kernel's order). On the CPU:
    the eager path, and tinygemm's CPU twin (not chosen there by default, but timed for the record)."""
    if device.type != "cuda":
        return (EAGER_DEQUANTISE, TINYGEMM) if tinygemm_op_available(device) else (EAGER_DEQUANTISE,)
    found = available_kernels(torch.cuda.get_device_capability(device), triton_available())
    return tuple(name for name in found if name != TINYGEMM or tinygemm_op_available(device))


def kernel_call(linear: GPTQLinear, kernel: str) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """x [M, K] -> x @ W through `kernel`, for a GPTQ linear that has not been repacked (a tinygemm copy of
    its weights is made here); None where the kernel cannot take this linear."""
    from core.offload.gptq_matmul import fused_gptq_matmul

    if kernel == TINYGEMM:
        layout = tinygemm_layout(linear.bits, linear.group_size, linear.mode, linear.in_features, linear.out_features)
        if isinstance(layout, str):
            return None
        values = unpack_rows(linear.qweight, linear.bits)[: linear.in_features]
        zeros = unpack_cols(linear.qzeros, linear.bits)[:, : linear.out_features] + linear.zero_offset
        weights = pack_int4(values, zeros, linear.scales, linear.group_size, *layout)
        return lambda x: int4_matmul(x, weights)
    if kernel == FUSED:
        return lambda x: fused_gptq_matmul(x, linear.packed)
    if kernel == DEQUANTISE and fused_dequant_available(linear.qweight.device):
        return lambda x: x @ linear.dequantize(x.dtype)

    def eager(x: torch.Tensor) -> torch.Tensor:
        out = linear.scratch.matrix(linear.in_features, linear.out_features, x.dtype, x.device)
        return x @ dequantize_into(out, linear.packed)

    return eager if kernel in (DEQUANTISE, EAGER_DEQUANTISE) else None


def time_calls(run, copies: list, repeats: int, device: torch.device) -> float:
    """Median seconds of one call, each call on the next copy; a warm-up round first (compiles, allocates)."""
    for linear in copies:
        run(linear)
    if device.type != "cuda":
        import time

        start = time.perf_counter()
        for i in range(repeats):
            run(copies[i % len(copies)])
        return (time.perf_counter() - start) / repeats
    times = []
    for i in range(repeats):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        run(copies[i % len(copies)])
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end) / 1e3)
    return sorted(times)[len(times) // 2]


def _fused(x: torch.Tensor, config=None):
    from core.offload.gptq_matmul import fused_gptq_matmul

    return lambda linear: fused_gptq_matmul(x, linear.packed, config)


def _sweep_configs(rows: int, n: int, k: int):
    from core.offload.gptq_matmul import LaunchConfig, launch_config

    default = launch_config(rows, n, k, GROUP_SIZE)
    for block_n, split, (warps, stages) in itertools.product((32, 64, 128), (1, 2, 4, 8, 16), ((4, 3), (8, 3), (4, 4))):
        if k // (default.block_k * split) >= 1:
            yield LaunchConfig(default.block_m, block_n, default.block_k, split, warps, stages)


def measure_shapes(
    device: torch.device, shapes, rows_list, repeats: int, sweep: bool = False, kernels: tuple[str, ...] | None = None
) -> list[dict]:
    """One row per (shape, rows): for each kernel (`kernels`, default every one this build runs here) its
    seconds and GB/s of 4-bit bytes read, `dense16_s` / `dense16_gbps` for a 16-bit product of the same shape,
    `floor_s` (the 4-bit bytes at the dense product's rate), and with `sweep` the fused kernel's best launch."""
    kernels = kernels or kernels_on(device)
    generator = torch.Generator().manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    results = []
    for name, k, n in shapes:
        weights = random_linear_copies(k, n, device, generator)
        calls = {kernel: [kernel_call(linear, kernel) for linear in weights.copies] for kernel in kernels}
        dense = [
            torch.randn(k, n, generator=generator).to(device=device, dtype=dtype)
            for _ in range(
                len(weights.copies) if device.type != "cuda" else min(MAX_COPIES, max(2, -(-L2_BYTES // (2 * k * n))))
            )
        ]
        for rows in rows_list:
            x = torch.randn(rows, k, generator=generator).to(device=device, dtype=dtype)
            dense_s = time_calls(lambda w, x=x: x @ w, dense, repeats, device)
            row = {
                "shape": name,
                "k": k,
                "n": n,
                "rows": rows,
                "bytes": weights.bytes_read,
                "dense16_s": dense_s,
                "dense16_gbps": 2 * k * n / dense_s / 1e9,
                "floor_s": weights.bytes_read / (2 * k * n / dense_s),
            }
            for kernel, runs in calls.items():
                if any(run is None for run in runs):
                    continue
                seconds = time_calls(lambda run, x=x: run(x), runs, repeats, device)
                key = kernel.replace(" ", "_")
                row.update({f"{key}_s": seconds, f"{key}_gbps": weights.bytes_read / seconds / 1e9})
            if sweep and FUSED in calls:
                timed = [
                    (time_calls(_fused(x, config), weights.copies, repeats, device), config)
                    for config in _sweep_configs(rows, n, k)
                ]
                best_s, best = min(timed, key=lambda pair: pair[0])
                row.update(best_s=best_s, best_gbps=weights.bytes_read / best_s / 1e9, best=dataclasses.asdict(best))
            results.append(row)
        del weights, calls, dense
    return results


def kernel_rates(results: list[dict], kernels: tuple[str, ...]) -> dict[str, float]:
    """Each kernel's rate over `results` in core.planning.draft_kernel's unit (the bytes of its passes over
    the weights, `weight_passes`, over its total time, so the large MLP projections weigh as they do in a
    forward); kernels missing from any row are left out."""
    rates = {}
    for kernel in kernels:
        key = f"{kernel.replace(' ', '_')}_s"
        if results and all(key in row for row in results):
            read = sum(row["bytes"] * weight_passes(kernel, row["rows"]) for row in results)
            rates[kernel] = read / sum(row[key] for row in results)
    return rates


def measured_rates(device: torch.device, rows: tuple[int, ...] = DRAFT_ROWS, repeats: int = 20) -> dict[str, float]:
    """Every draft kernel's read rate here over the 8B draft's linears at a draft's row counts: what
    `specexec hw --measure` and the doctor record, and what the speed model prices a card's draft with."""
    kernels = kernels_on(device)
    return kernel_rates(measure_shapes(device, DRAFT_SHAPES, rows, repeats, kernels=kernels), kernels)
