"""Host-to-device copy rate of a GPU's PCIe link: the measured one when `hw --measure` ran, else an
estimate from the link's generation and width.

Estimates are pinned-copy rates measured on x16 links (docs: engineering facts): Gen3 ~12 GB/s, Gen4 ~25,
Gen5 ~50; lanes scale them linearly. An estimate always says it is one.
"""

from __future__ import annotations

from core.hardware.description import GpuInfo

X16_RATE = {1: 3.0e9, 2: 6.0e9, 3: 12.0e9, 4: 25.0e9, 5: 50.0e9, 6: 100.0e9}
ASSUMED_GEN, ASSUMED_WIDTH = 3, 16


def h2d_rate(gpu: GpuInfo) -> tuple[float, str]:
    """(bytes per second, where the figure comes from, in words)."""
    if gpu.h2d_bytes_per_second:
        return gpu.h2d_bytes_per_second, f"measured pinned copy: {gpu.h2d_bytes_per_second / 1e9:.1f} GB/s"
    # The maximum, not the current link: an idle GPU drops its link to Gen1 to save power.
    gen = gpu.pcie.gen_max or gpu.pcie.gen_current
    width = gpu.pcie.width_max or gpu.pcie.width_current
    if gen in X16_RATE and width:
        rate = X16_RATE[gen] * width / 16
        return (
            rate,
            f"estimate for PCIe Gen{gen} x{width}: ~{rate / 1e9:.0f} GB/s (run `specexec hw --measure` to measure)",
        )
    rate = X16_RATE[ASSUMED_GEN] * ASSUMED_WIDTH / 16
    return (
        rate,
        f"estimate: the PCIe link is unknown, Gen{ASSUMED_GEN} x{ASSUMED_WIDTH} assumed (~{rate / 1e9:.0f} GB/s)",
    )
