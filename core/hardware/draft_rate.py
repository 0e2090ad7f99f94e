"""Measure how fast one GPU's fused 4-bit matmul reads a draft's weights: the speed model's draft rate.

Needs torch with CUDA and Triton, so it runs only in the CLI / engine process (`specexec hw --measure`),
never in the app's Qt process. The measurement is core.offload.matmul_rate.measured_bandwidth (32 rows over an 8B
draft's linears, the weights rotated past the L2 cache), a few seconds including the kernels' compiles.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def measure_fused_matmul(index: int) -> float | None:
    """Bytes per second the fused matmul reads on cuda:`index`; None without CUDA or Triton (torch's Windows
    builds: the speed model then prices the eager dequantisation) or when the measurement fails."""
    try:
        import torch

        from core.offload.matmul_rate import measured_bandwidth
        from core.offload.gptq_kernel import triton_available
    except ImportError:
        return None
    if not torch.cuda.is_available() or index >= torch.cuda.device_count() or not triton_available():
        return None
    try:
        return measured_bandwidth(torch.device("cuda", index))
    except Exception as error:  # noqa: BLE001 - a measurement that fails leaves the estimate in place
        log.warning("could not measure the fused 4-bit matmul on cuda:%d: %s", index, error)
        return None
