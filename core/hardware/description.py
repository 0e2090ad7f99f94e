"""The machine description: typed, and the same shape as `specexec hw --json` (the app's wizard parses it).

Fixture files (tests/fixtures/hw/*.json) are this JSON too: SPECEXEC_HW_FIXTURE or `--hw FILE` makes every
command that reads the hardware use one instead of probing, so tests and the wizard can be run for a 12 GB
card on PCIe 3 from a machine that has no GPU at all.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.errors import HardwareDescriptionError
from core.system import json_text
from core.system.env import HW_FIXTURE_ENV
from core.system.text_files import read_text_file


@dataclass(frozen=True)
class PcieLink:
    """Generation and lane width, now and at most. GPUs drop the link to Gen1 when idle, so `*_max` (the
    most the GPU and the board allow together, from NVML) is what a streaming load will get."""

    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: str
    vram_total_bytes: int
    vram_free_bytes: int
    driver_version: str | None = None
    cuda_version: str | None = None
    compute_capability: str | None = None
    pcie: PcieLink = field(default_factory=PcieLink)
    h2d_bytes_per_second: float | None = None  # measured pinned host-to-device copy rate (`hw --measure`)
    # measured read rate of each 4-bit draft kernel at a draft's shapes (`hw --measure`,
    # core.offload.matmul_rate), by core.planning.draft_kernel's names; {} when not measured
    draft_kernel_bytes_per_second: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class CpuInfo:
    model: str
    physical_cores: int | None
    logical_cores: int | None


@dataclass(frozen=True)
class RamInfo:
    total_bytes: int
    available_bytes: int


@dataclass(frozen=True)
class DiskInfo:
    path: str
    free_bytes: int | None


@dataclass(frozen=True)
class HardwareDescription:
    cpu: CpuInfo
    ram: RamInfo
    gpus: tuple[GpuInfo, ...]
    gpu_note: str
    platform: dict[str, str]
    disk: DiskInfo
    source: str = "probe"  # "probe", or "fixture <path>"

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [asdict(gpu) for gpu in self.gpus]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "probe") -> "HardwareDescription":
        """Raises HardwareDescriptionError naming the field at fault."""
        try:
            gpus = tuple(GpuInfo(**_gpu_fields(gpu)) for gpu in data.get("gpus", []))
            return cls(
                cpu=CpuInfo(**data["cpu"]),
                ram=RamInfo(**data["ram"]),
                gpus=gpus,
                gpu_note=str(data.get("gpu_note", "")),
                platform=dict(data.get("platform", {})),
                disk=DiskInfo(**data["disk"]),
                source=source,
            )
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise HardwareDescriptionError(f"the hardware description ({source}) is malformed: {error!r}") from error

    @property
    def best_gpu(self) -> GpuInfo | None:
        """The GPU with the most free VRAM (the one a model would load on), or None."""
        return max(self.gpus, key=lambda gpu: gpu.vram_free_bytes, default=None)


def _gpu_fields(gpu: dict[str, Any]) -> dict[str, Any]:
    """A GPU's fields as GpuInfo takes them; a description written before the draft kernels were measured
    one by one kept the fused kernel's rate alone, which reads as that kernel's. Raises TypeError, ValueError."""
    fields = {key: value for key, value in gpu.items() if key != "fused_matmul_bytes_per_second"}
    rates = dict(fields.get("draft_kernel_bytes_per_second") or {})
    if gpu.get("fused_matmul_bytes_per_second"):
        rates.setdefault("fused", gpu["fused_matmul_bytes_per_second"])
    fields["draft_kernel_bytes_per_second"] = {str(name): float(rate) for name, rate in rates.items()}
    fields["pcie"] = PcieLink(**(gpu.get("pcie") or {}))
    return fields


def load_description(path: str | Path) -> HardwareDescription:
    """A hardware description from a JSON file. Raises HardwareDescriptionError."""
    source = Path(path).expanduser()
    try:
        data = json_text.loads(read_text_file(source))
    except FileNotFoundError as error:
        raise HardwareDescriptionError(f"hardware description file {source} does not exist") from error
    except (OSError, ValueError) as error:  # ValueError: not JSON, or not text
        raise HardwareDescriptionError(f"hardware description file {source} cannot be read: {error}") from error
    if not isinstance(data, dict):
        raise HardwareDescriptionError(f"hardware description file {source} must hold a JSON object")
    return HardwareDescription.from_dict(data, source=f"fixture {source}")


def fixture_path(explicit: str | None = None) -> str | None:
    """--hw FILE wins over SPECEXEC_HW_FIXTURE; None: probe the real machine."""
    return explicit or os.environ.get(HW_FIXTURE_ENV) or None
