"""The machine description: typed, and the same shape as `specexec hw --json` (the app's wizard parses it).

Fixture files (tests/fixtures/hw/*.json) are this JSON too: SPECEXEC_HW_FIXTURE or `--hw FILE` makes every
command that reads the hardware use one instead of probing, so tests and the wizard can be run for a 12 GB
card on PCIe 3 from a machine that has no GPU at all.
"""

from __future__ import annotations

import os
import reprlib
import types
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

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
        """Every field checked for its type and range (a fixture file is anyone's JSON: a count given as text,
        a size beyond a float or a negative one would fail or mislead the fit far from here). Raises
        HardwareDescriptionError naming the field at fault."""
        try:
            gpus = data.get("gpus", [])
            if not isinstance(gpus, list):
                raise ValueError(f"gpus is {reprlib.repr(gpus)} where a list is due")
            platform = data.get("platform", {})
            if not (isinstance(platform, dict) and all(isinstance(value, str) for value in platform.values())):
                raise ValueError(f"platform is {reprlib.repr(platform)} where an object of texts is due")
            gpu_note = data.get("gpu_note", "")
            if not isinstance(gpu_note, str):
                raise ValueError(f"gpu_note is {reprlib.repr(gpu_note)} where text is due")
            return cls(
                cpu=_record(CpuInfo, data["cpu"], "cpu"),
                ram=_record(RamInfo, data["ram"], "ram"),
                gpus=tuple(
                    _record(GpuInfo, _gpu_fields(gpu, f"gpus[{i}]"), f"gpus[{i}]") for i, gpu in enumerate(gpus)
                ),
                gpu_note=gpu_note,
                platform=dict(platform),
                disk=_record(DiskInfo, data["disk"], "disk"),
                source=source,
            )
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            said = f"{error} is missing" if isinstance(error, KeyError) else str(error)
            raise HardwareDescriptionError(f"the hardware description ({source}) is malformed: {said}") from error

    @property
    def best_gpu(self) -> GpuInfo | None:
        """The GPU with the most free VRAM (the one a model would load on), or None."""
        return max(self.gpus, key=lambda gpu: gpu.vram_free_bytes, default=None)


# Beyond any machine's bytes, cores or copy rate: a larger number is a damaged file (and one beyond a float,
# which Python's json reads from 400 digits, fails every sum it enters).
MAX_FIGURE = 2**63


def _gpu_fields(gpu: Any, where: str) -> dict[str, Any]:
    """A GPU's fields as _record takes them; a description written before the draft kernels were measured
    one by one kept the fused kernel's rate alone, which reads as that kernel's. Raises ValueError."""
    if not isinstance(gpu, dict):
        raise ValueError(f"{where} is {reprlib.repr(gpu)} where an object is due")
    given = {key: value for key, value in gpu.items() if key != "fused_matmul_bytes_per_second"}
    rates = given.get("draft_kernel_bytes_per_second") or {}
    if gpu.get("fused_matmul_bytes_per_second") and isinstance(rates, dict):
        rates = {"fused": gpu["fused_matmul_bytes_per_second"], **rates}
    given["draft_kernel_bytes_per_second"] = rates
    given["pcie"] = gpu.get("pcie") or {}
    return given


def _record(kind: type, data: Any, where: str) -> Any:
    """`kind` (one of this module's records) from a JSON object, each field checked against its annotation.
    Raises ValueError naming the field (`where`.name)."""
    if not isinstance(data, dict):
        raise ValueError(f"{where} is {reprlib.repr(data)} where an object is due")
    hints = get_type_hints(kind)
    known = {spec.name for spec in fields(kind)}
    if unknown := sorted(set(data) - known):
        raise ValueError(f"{where} has a field this version does not know: {reprlib.repr(unknown[0])}")
    return kind(**{name: _value(hints[name], value, f"{where}.{name}") for name, value in data.items()})


def _value(annotation: Any, value: Any, where: str) -> Any:
    """`value` if it is of the `annotation`'s type and in range (see MAX_FIGURE); raises ValueError."""
    allowed = get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None and type(None) in allowed:
        return None
    kind = next(option for option in allowed if option is not type(None))
    if kind is PcieLink:
        return _record(PcieLink, value, where)
    if get_origin(kind) is dict:
        if not isinstance(value, dict):
            raise ValueError(f"{where} is {reprlib.repr(value)} where an object of rates is due")
        return {str(name): _value(float, rate, f"{where}.{name}") for name, rate in value.items()}
    if kind is str and isinstance(value, str):
        return value
    if kind is int and json_text.is_whole(value) and 0 <= value <= MAX_FIGURE:
        return value
    # (NaN and the infinities fail the comparison)
    if kind is float and json_text.is_number(value) and 0 < value <= MAX_FIGURE:
        return float(value)
    due = {
        str: "text",
        int: f"a whole number from 0 to {MAX_FIGURE:.3g}",
        float: f"a number above 0, to {MAX_FIGURE:.3g}",
    }[kind]
    raise ValueError(f"{where} is {reprlib.repr(value)} where {due} is due")


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
