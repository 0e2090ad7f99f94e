"""Moving small values between the host and the compute device without making the host wait.

On a GPU every value the host reads from the device (`.item()`, `int(t)`, `.tolist()`, ...) and every
host-to-device copy that is not asynchronous stalls the host until the device has caught up, so it cannot
queue the next kernels ahead of time. The decoding loop therefore keeps its tensors on the device, reads
once per pass, and copies host data (token ids) with `to_device`, which is asynchronous on CUDA.

On a CPU the host *is* the device: a read waits for nothing, so a loop may stop early as soon as a read says
it is done (`host_reads_are_free`). A trace that counts what a GPU would pay (core.bench.device_trace) turns that
off with `gpu_semantics()`, so the code path a GPU runs is the one measured, on the CPU.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

import torch

_GPU_SEMANTICS: ContextVar[bool] = ContextVar("specexec_gpu_semantics", default=False)


def host_reads_are_free(device: torch.device | str) -> bool:
    """True on a CPU device, where reading a tensor's value costs no stall (unless a trace is simulating a
    GPU: then every read counts, and the loops take the GPU's read-free path)."""
    return torch.device(device).type == "cpu" and not _GPU_SEMANTICS.get()


@contextmanager
def gpu_semantics() -> Iterator[None]:
    """Within this block the loops behave as on a GPU even on the CPU (see module docstring)."""
    token = _GPU_SEMANTICS.set(True)
    try:
        yield
    finally:
        _GPU_SEMANTICS.reset(token)


def to_device(
    values: Sequence[int] | torch.Tensor, device: torch.device | str, dtype: torch.dtype = torch.long
) -> torch.Tensor:
    """Host values (a list or a host tensor) on `device` without stalling the host: on CUDA they are staged
    in pinned memory and copied with non_blocking=True (the copy is ordered on the current stream; PyTorch
    keeps the pinned block alive until it is done). On the CPU the same call is a plain conversion."""
    device = torch.device(device)
    pin = device.type == "cuda"
    if isinstance(values, torch.Tensor):
        host = values.to(dtype).pin_memory() if pin else values.to(dtype)
    else:
        host = torch.tensor(values, dtype=dtype, pin_memory=pin)
    return host.to(device, non_blocking=True)
