"""The doctor's report: one result per check, the conclusion, and the JSON file written to the log folder.

A check's result keeps what was *measured* (a plain JSON object) apart from what was *decided* from it
(status and sentence), so a report sent by a user can be decided again with newer rules
(`specexec doctor --replay FILE`), and the fixtures in tests/fixtures/doctor are measurements a real GPU
would give. The format is documented in docs/doctor.md; `SCHEMA_VERSION` changes when a field changes
meaning (adding a field does not).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from core.errors import DiskWriteError, DoctorReportError
from core.system import json_text
from core.system.disk import why_write_failed, write_text_atomically

SCHEMA_VERSION = 1
REPORT_FILE = "doctor-report.json"


class Status(str, Enum):
    """PASS: works as designed. DEGRADED: works, slower or with a feature off (the sentence says which).
    FAIL: the GPU must not be used; the app runs on the processor. SKIPPED: not run (no GPU, or an earlier
    failure made it pointless). Values are written to disk: never renamed."""

    PASS = "pass"
    DEGRADED = "degraded"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True)
class CheckResult:
    """name: the check's id (`compat`, `kernel`, ...); sentence: what a person reads; measured: the raw
    figures the decision was made from (JSON types only); seconds: how long the measurement took."""

    name: str
    status: Status
    sentence: str
    measured: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = self.status.value
        return data


# The environment variable that turns the draft's CUDA graphs off (core.decoding.captured_forward reads it; the app sets
# it to "0" for its engine when the graphs check did not pass). Here, not there, because the app's process
# must not import torch.


@dataclass(frozen=True)
class Conclusion:
    """What the app does with the report: use the GPU or not, CUDA graphs or not, and one line for people."""

    use_gpu: bool
    cuda_graphs: bool
    summary: str


@dataclass(frozen=True)
class DoctorReport:
    created: str  # ISO 8601, UTC
    app_version: str
    device: str  # what the checks ran on: "cuda:0", or "cpu"
    torch: dict[str, Any]  # core.hardware.torch_build.TorchBuild as a dict
    gpu: dict[str, Any] | None  # core.hardware.description.GpuInfo as a dict, None without an NVIDIA GPU
    platform: dict[str, str]
    checks: tuple[CheckResult, ...]
    conclusion: Conclusion
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "created": self.created,
            "app_version": self.app_version,
            "device": self.device,
            "torch": self.torch,
            "gpu": self.gpu,
            "platform": self.platform,
            "conclusion": asdict(self.conclusion),
            "checks": [check.to_dict() for check in self.checks],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DoctorReport":
        """Raises DoctorReportError naming what is wrong."""
        try:
            checks = tuple(
                CheckResult(
                    name=str(c["name"]),
                    status=Status(c["status"]),
                    sentence=str(c["sentence"]),
                    measured=dict(c.get("measured") or {}),
                    seconds=float(c.get("seconds", 0.0)),
                )
                for c in data["checks"]
            )
            return cls(
                created=str(data["created"]),
                app_version=str(data["app_version"]),
                device=str(data["device"]),
                torch=dict(data["torch"]),
                gpu=dict(data["gpu"]) if data.get("gpu") else None,
                platform=dict(data.get("platform") or {}),
                checks=checks,
                conclusion=Conclusion(**data["conclusion"]),
                schema_version=int(data["schema_version"]),
            )
        except (KeyError, TypeError, ValueError, OverflowError) as error:
            raise DoctorReportError(f"the doctor report is malformed: {error!r}") from error

    def check(self, name: str) -> CheckResult | None:
        return next((c for c in self.checks if c.name == name), None)

    def lines(self) -> list[str]:
        """The report as a person reads it: the conclusion, then one line per check."""
        marks = {Status.PASS: "ok  ", Status.DEGRADED: "slow", Status.FAIL: "FAIL", Status.SKIPPED: "skip"}
        lines = [self.conclusion.summary, ""]
        lines += [f"[{marks[c.status]}] {c.sentence}" for c in self.checks]
        return lines


def save_report(report: DoctorReport, folder: str | os.PathLike[str]) -> Path:
    """Write the report as `doctor-report.json` in `folder` (the app's log folder), atomically. Raises
    DiskWriteError, leaving any report already there as it was, when the drive refuses the write."""
    target = Path(folder) / REPORT_FILE
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomically(target, json.dumps(report.to_dict(), indent=2) + "\n")
    except OSError as error:
        raise DiskWriteError(
            f"the GPU check's report could not be saved: {why_write_failed(error, target.parent)}"
        ) from error
    return target


def load_report(path: str | os.PathLike[str]) -> DoctorReport:
    """Raises DoctorReportError when the file is missing, unreadable or not a report."""
    source = Path(path)
    try:
        data = json_text.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise DoctorReportError(f"no doctor report at {source}: run `specexec doctor` first") from error
    except (OSError, ValueError) as error:
        raise DoctorReportError(f"the doctor report {source} cannot be read: {error}") from error
    if not isinstance(data, dict):
        raise DoctorReportError(f"the doctor report {source} must hold a JSON object")
    return DoctorReport.from_dict(data)
