"""The fused 4-bit matmul's read rate at a draft's shapes (and a 70B layer's): what the speed model's draft
rate, the doctor's draft check and `specexec hw --measure` record for a card, and what `specexec bench matmul`
prints. The weights rotate through more copies than the GPU's L2 cache holds, so every call reads memory.
"""

from __future__ import annotations

import dataclasses
import itertools

import torch

# (name, K, N) of an 8B Llama draft's linears (hidden 4096, 8 KV heads of 128, MLP 14336) and a 70B layer's.
DRAFT_SHAPES = (("q/o", 4096, 4096), ("k/v", 4096, 1024), ("gate/up", 4096, 14336), ("down", 14336, 4096))
TARGET_SHAPES = (("70B q/o", 8192, 8192), ("70B k/v", 8192, 1024), ("70B gate/up", 8192, 28672),
                 ("70B down", 28672, 8192))
# Tiny linears for a smoke run on the CPU (Triton's interpreter takes minutes at the draft's shapes).
SMOKE_SHAPES = (("smoke", 256, 128),)
ROWS = (1, 16, 32, 64, 256)
GROUP_SIZE = 128
# Copies of each weight the timing rotates through: together larger than any GPU's L2 cache (H100: 50 MB),
# at most MAX_COPIES of them.
L2_BYTES = 128 * 1024**2
MAX_COPIES = 64



@dataclasses.dataclass
class _Weights:
    """Copies of one random 4-bit linear on the device, read in turn."""

    copies: list
    bytes_read: int  # packed weights, zeros and scales of one copy


def _weights(k: int, n: int, device: torch.device, generator: torch.Generator) -> _Weights:
    from core.offload.synthetic_gptq import finalised_linear, random_gptq_tensors

    tensors = random_gptq_tensors(generator, k, n, 4, GROUP_SIZE, False)
    first = finalised_linear(tensors, k, n, 4, GROUP_SIZE, False, device)
    nbytes = sum(t.numel() * t.element_size() for t in (first.qweight, first.qzeros, first.scales))
    count = min(MAX_COPIES, max(2, -(-L2_BYTES // nbytes)))
    copies = [first] + [finalised_linear(tensors, k, n, 4, GROUP_SIZE, False, device) for _ in range(count - 1)]
    return _Weights(copies, nbytes)


def _time(run, copies: list, repeats: int, device: torch.device) -> float:
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

    return lambda linear: fused_gptq_matmul(x, linear.qweight, linear.qzeros, linear.scales, None, 4, GROUP_SIZE,
                                            linear.zero_offset, config)


def _sweep_configs(rows: int, n: int, k: int):
    from core.offload.gptq_matmul import LaunchConfig, launch_config

    default = launch_config(rows, n, k, GROUP_SIZE)
    for block_n, split, (warps, stages) in itertools.product((32, 64, 128), (1, 2, 4, 8, 16), ((4, 3), (8, 3), (4, 4))):
        if k // (default.block_k * split) >= 1:
            yield LaunchConfig(default.block_m, block_n, default.block_k, split, warps, stages)


def measure_shapes(device: torch.device, shapes, rows_list, repeats: int, sweep: bool = False) -> list[dict]:
    """One row per (shape, rows): the default launch's seconds and GB/s, dequantise + GEMM's, and with
    `sweep` the best configuration found."""
    generator = torch.Generator().manual_seed(0)
    results = []
    for name, k, n in shapes:
        weights = _weights(k, n, device, generator)
        for rows in rows_list:
            x = torch.randn(rows, k, generator=generator).to(device=device, dtype=torch.float16)
            fused = _time(_fused(x), weights.copies, repeats, device)
            dequant = _time(lambda linear: x @ linear.dequantize(x.dtype), weights.copies, repeats, device)
            row = {"shape": name, "k": k, "n": n, "rows": rows, "bytes": weights.bytes_read,
                   "fused_s": fused, "fused_gbps": weights.bytes_read / fused / 1e9,
                   "dequantise_gemm_s": dequant}
            if sweep:
                timed = [(_time(_fused(x, config), weights.copies, repeats, device), config)
                         for config in _sweep_configs(rows, n, k)]
                best_s, best = min(timed, key=lambda pair: pair[0])
                row.update(best_s=best_s, best_gbps=weights.bytes_read / best_s / 1e9, best=dataclasses.asdict(best))
            results.append(row)
        del weights
    return results


def measured_bandwidth(device: torch.device, rows: int = 32, repeats: int = 20) -> float:
    """Bytes per second the fused matmul reads at `rows` rows over the 8B draft's linears (their total bytes
    over their total time, so the large MLP projections weigh as they do in a forward)."""
    results = measure_shapes(device, DRAFT_SHAPES, (rows,), repeats)
    return sum(r["bytes"] for r in results) / sum(r["fused_s"] for r in results)
