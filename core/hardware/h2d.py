"""Measure the pinned host-to-device copy rate of one GPU: what a streamed target pass is made of.

Needs torch with CUDA, so it runs only in the CLI / engine process (`specexec hw --measure`), never in
the app's Qt process. A short test: one pinned 256 MiB block, one warm-up copy, then the best of five.
"""

from __future__ import annotations

MEASURE_BYTES = 256 * 1024**2
REPEATS = 5


def measure_h2d(index: int, nbytes: int = MEASURE_BYTES, repeats: int = REPEATS) -> float | None:
    """Bytes per second of a pinned copy to cuda:`index`, or None without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        return None
    device = torch.device("cuda", index)
    source = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    target.copy_(source, non_blocking=True)  # warm-up: first-touch and driver setup are not the link
    torch.cuda.synchronize(device)
    best = None
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(torch.cuda.current_stream(device))
        target.copy_(source, non_blocking=True)
        end.record(torch.cuda.current_stream(device))
        end.synchronize()
        seconds = start.elapsed_time(end) / 1000
        best = seconds if best is None else min(best, seconds)
    return nbytes / best if best else None
