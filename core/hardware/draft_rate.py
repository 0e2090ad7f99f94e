"""Measure how fast each 4-bit draft kernel reads a draft's weights on one GPU: the speed model's draft rates.

Needs torch with CUDA, so it runs only in the CLI / engine process (`specexec hw --measure`), never in the
app's Qt process. The measurement is core.offload.matmul_rate.measured_rates (an 8B draft's linears at a
draft's row counts, the weights rotated past the L2 cache), a few seconds including the Triton kernels' compiles.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def measure_draft_kernels(index: int) -> dict[str, float]:
    """Bytes per second each draft kernel reads on cuda:`index` (core.planning.draft_kernel names); {} without
    CUDA or when the measurement fails (the speed model then prices the kernel by its stated default)."""
    try:
        import torch

        from core.offload.matmul_rate import measured_rates
    except ImportError:
        return {}
    if not torch.cuda.is_available() or index >= torch.cuda.device_count():
        return {}
    try:
        return measured_rates(torch.device("cuda", index))
    except Exception as error:  # noqa: BLE001 - a measurement that fails leaves the estimate in place
        log.warning("could not measure the 4-bit draft kernels on cuda:%d: %s", index, error)
        return {}
