"""What the installed torch was built for: its CUDA version and the GPU architectures it has kernels for.

Read from torch's build constants, never by initialising CUDA, so it answers on a machine without a GPU or
with a driver too old to start CUDA at all (the case it exists to explain). Imports torch: call it in the
CLI or engine process, not in the app's Qt process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([a-z]?)$")


@dataclass(frozen=True)
class TorchBuild:
    """torch_version "2.13.0+cu130"; cuda_version "13.0" (None for a CPU build); arch_list as torch names
    them: "sm_86" = machine code for compute capability 8.6, "compute_90" = PTX the driver can compile for
    8.6... and newer."""

    torch_version: str
    cuda_version: str | None
    arch_list: tuple[str, ...]


def read_torch_build() -> TorchBuild:
    import torch

    cuda = torch.version.cuda
    # get_arch_list reads the compile-time flags; it does not need a GPU (it returns [] on a CPU build).
    archs = tuple(torch.cuda.get_arch_list()) if cuda else ()
    return TorchBuild(torch_version=str(torch.__version__), cuda_version=cuda, arch_list=archs)


def parse_arch(name: str) -> tuple[str, int, int] | None:
    """'sm_86' -> ('sm', 8, 6); 'compute_120' -> ('compute', 12, 0); arch-specific builds ('sm_90a') and
    unknown names -> None (their code runs only on that exact GPU, so they never widen support)."""
    match = _ARCH.match(name)
    if match is None or match.group(4):
        return None
    return match.group(1), int(match.group(2)), int(match.group(3))


def runs_on(arch_list: tuple[str, ...] | list[str], capability: tuple[int, int]) -> bool:
    """Whether a build with `arch_list` has kernels a GPU of compute `capability` can run: machine code
    (sm_XY) runs on the same major version at an equal or higher minor; PTX (compute_XY) is compiled by the
    driver for any GPU at or above XY."""
    for name in arch_list:
        parsed = parse_arch(name)
        if parsed is None:
            continue
        kind, major, minor = parsed
        if kind == "sm" and major == capability[0] and minor <= capability[1]:
            return True
        if kind == "compute" and (major, minor) <= capability:
            return True
    return False


def lowest_capability(arch_list: tuple[str, ...] | list[str]) -> tuple[int, int] | None:
    """The oldest compute capability the build has kernels for (None when it has none)."""
    parsed = [p for p in map(parse_arch, arch_list) if p is not None]
    return min(((major, minor) for _, major, minor in parsed), default=None)
