"""Check: how fast pinned host-to-device copies are, against what the GPU's PCIe link should carry.

Streaming a 70B model is these copies, so their rate is the product's speed limit. An x8 or x4 link, a
Gen3 slot, or copies far below the link's nominal rate (another program on the bus, a wrong NUMA node, a
riser cable that trained at a lower generation) are DEGRADED: the app works, slower, and the sentence says
what to change. Nominal rates are core.hardware.link's pinned x16 figures scaled by lanes.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status
from core.hardware.link import X16_RATE

NAME = "link"
GB = 1e9
# Below this share of the link's nominal rate the copies are called slow (a healthy Gen4 x16 link measures
# 23-26 GB/s of the nominal 25: engineering facts).
SLOW_SHARE = 0.6


@dataclass(frozen=True)
class LinkMeasurement:
    """h2d_bytes_per_second: best of several pinned 256 MiB copies; the link as NVML reports it right after
    them (`*_max`: the most card and slot allow together; `*_current` only a hint, as an idle GPU drops to Gen1)."""

    h2d_bytes_per_second: float | None
    gen_current: int | None = None
    gen_max: int | None = None
    width_current: int | None = None
    width_max: int | None = None


def measure(index: int, nvml=None) -> LinkMeasurement:
    """Time the copies on cuda:`index`, then read its link from NVML (`nvml`: the pynvml module or a stand-in)."""
    from core.hardware.h2d import measure_h2d
    from core.hardware.nvidia import read_nvidia_gpus

    rate = measure_h2d(index)
    gpus, _ = read_nvidia_gpus(nvml)
    link = next((gpu.pcie for gpu in gpus if gpu.index == index), None)
    if link is None:
        return LinkMeasurement(rate)
    return LinkMeasurement(rate, link.gen_current, link.gen_max, link.width_current, link.width_max)


def nominal_rate(gen: int | None, width: int | None) -> float | None:
    if gen not in X16_RATE or not width:
        return None
    return X16_RATE[gen] * width / 16


def decide(m: LinkMeasurement) -> CheckResult:
    measured = asdict(m)
    if not m.h2d_bytes_per_second:
        return CheckResult(NAME, Status.SKIPPED, "Copies to the GPU were not measured.", measured)
    rate = m.h2d_bytes_per_second
    # Judged against the most the card and slot allow together; the current link is only a hint, because an
    # idle GPU drops it to Gen1 within moments.
    gen, width = m.gen_max or m.gen_current, m.width_max or m.width_current
    nominal = nominal_rate(gen, width)
    where = f"PCIe Gen{gen or '?'} x{width or '?'}"
    problems = []
    if width and width < 16:
        problems.append(
            f"the card's link is x{width}, not x16: if it sits in a second slot, the first x16 slot "
            "streams up to twice as fast"
        )
    if gen and gen <= 3:
        problems.append(f"the link is PCIe Gen{gen}: a Gen4 or Gen5 slot streams two to four times as fast")
    if nominal and rate < SLOW_SHARE * nominal:
        slow = (
            f"copies reach only {rate / GB:.1f} GB/s of the link's ~{nominal / GB:.0f} GB/s (another program may "
            "be using the GPU or the bus"
        )
        if m.gen_current and gen and m.gen_current < gen:
            slow += f"; the link was at Gen{m.gen_current} during the test: check the riser or the slot's BIOS setting"
        problems.append(slow + ")")
    if problems:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"Copies to the GPU: {rate / GB:.1f} GB/s on {where}, so large models run slower: "
            + "; ".join(problems)
            + ".",
            measured,
        )
    expected = f" (nominal ~{nominal / GB:.0f} GB/s)" if nominal else ""
    return CheckResult(NAME, Status.PASS, f"Copies to the GPU: {rate / GB:.1f} GB/s on {where}{expected}.", measured)
