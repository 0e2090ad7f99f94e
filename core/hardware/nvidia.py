"""NVIDIA GPUs through NVML (the `nvidia-ml-py` package, imported as `pynvml`): no CUDA, no torch needed.

Every failure is an answer, never an exception: no package, no driver, or a field the GPU does not report
(NVML_ERROR_NOT_SUPPORTED on some laptops and under WSL) give an empty list, a reason, or a None field.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from core.hardware.description import GpuInfo, PcieLink

log = logging.getLogger(__name__)
T = TypeVar("T")


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def read_nvidia_gpus(nvml: Any = None) -> tuple[list[GpuInfo], str | None]:
    """(GPUs, None), or ([], why there are none in plain words). `nvml`: the pynvml module (imported here
    when None; a parameter so the parsing can be tested against a stand-in where no NVIDIA driver exists)."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return [], "the NVIDIA management library bindings (nvidia-ml-py) are not installed"
    try:
        nvml.nvmlInit()
    except Exception as error:  # noqa: BLE001 - pynvml.NVMLError: library or driver not found / not loaded
        log.info("NVML is not available: %s", error)
        return [], "no NVIDIA driver was found"
    try:

        def field(call: Callable[..., T], *args: Any) -> T | None:
            try:
                return call(*args)
            except Exception as error:  # noqa: BLE001 - NVMLError_NotSupported and friends: that field stays unknown
                log.info("NVML %s failed: %s", getattr(call, "__name__", call), error)
                return None

        driver = field(nvml.nvmlSystemGetDriverVersion)
        cuda = field(nvml.nvmlSystemGetCudaDriverVersion_v2)
        count = field(nvml.nvmlDeviceGetCount) or 0
        gpus = []
        for index in range(count):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            capability = field(nvml.nvmlDeviceGetCudaComputeCapability, handle)
            gpus.append(
                GpuInfo(
                    index=index,
                    name=_text(nvml.nvmlDeviceGetName(handle)),
                    vram_total_bytes=int(memory.total),
                    vram_free_bytes=int(memory.free),
                    driver_version=_text(driver) if driver is not None else None,
                    cuda_version=f"{cuda // 1000}.{cuda % 1000 // 10}" if cuda else None,
                    compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
                    pcie=PcieLink(
                        gen_current=field(nvml.nvmlDeviceGetCurrPcieLinkGeneration, handle),
                        gen_max=field(nvml.nvmlDeviceGetMaxPcieLinkGeneration, handle),
                        width_current=field(nvml.nvmlDeviceGetCurrPcieLinkWidth, handle),
                        width_max=field(nvml.nvmlDeviceGetMaxPcieLinkWidth, handle),
                    ),
                )
            )
        return gpus, (None if gpus else "the NVIDIA driver reports no GPU")
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001 - nothing to release
            pass
