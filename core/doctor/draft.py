"""Check: the fused 4-bit matmul every draft forward runs, at a draft's own shapes, and how fast it reads.

A 4-bit draft multiplies its small batches with the fused kernel (core/offload/gptq_matmul.py), which the
GPTQ kernel check does not run (it checks the dequantisation kernel). Here the fused matmul multiplies rows
of random inputs by random 4-bit layers of an 8B Llama draft's shapes (q/o, k/v, gate/up, down), with and
without a split of K, in float16 and bfloat16, and each output must lie within the float32-sum bound of
the exact product (tests/test_gptq_matmul.py explains the bound): a wrong result is a FAIL, since the draft
would propose garbage (the answer stays right, verification samples from the target alone, but the app
would be slow for no visible reason). Then every draft kernel's read rate at a draft's row counts
(core.offload.matmul_rate.measured_rates: torch's int4 kernel, the fused matmul, dequantise + GEMM): the
engine runs the fastest, and the speed model prices it (`specexec hw --measure` records the same).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.doctor.report import CheckResult, Status
from core.planning.draft_kernel import choose_kernel

NAME = "draft"
# (K, N) of the 8B draft's linears; rows of x per product
SHAPES = ((4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096))
ROWS = (1, 32)
DTYPES = ("float16", "bfloat16")
GROUP_SIZE = 128
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}


@dataclass(frozen=True)
class DraftMeasurement:
    """cases: one per (shape, rows, dtype, split): worst |y - exact| / bound (<= 1 within the bound).
    bytes_per_second: the rate of the kernel the engine would run, the fastest at the search's width (None:
    not measured); kernel_rates: each kernel's, in core.planning.draft_kernel's unit (its names; empty in
    reports from before they were measured). error: why it
    could not run. triton: False when this build has no Triton (the draft then dequantises eagerly)."""

    device: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    bytes_per_second: float | None = None
    error: str | None = None
    triton: bool = True
    kernel_rates: dict[str, float] = field(default_factory=dict)


def _worst_ratio(linear, rows: int, dtype_name: str, split_k: int | None, generator) -> float:
    """max over outputs of |fused - exact| / (u * |exact| + K * 2^-24 * sum |x w|) for one product."""
    import dataclasses

    import torch

    from core.offload.gptq_matmul import fused_gptq_matmul, launch_config

    dtype = getattr(torch, dtype_name)
    k, n = linear.in_features, linear.out_features
    x = torch.randn(rows, k, generator=generator).to(device=linear.qweight.device, dtype=dtype)
    weight = linear.dequantize(dtype).double()  # exact in `dtype`: the reference's W
    config = launch_config(rows, n, k, GROUP_SIZE)
    if split_k is not None:
        config = dataclasses.replace(config, split_k=split_k)
    fused = fused_gptq_matmul(x, linear.packed, config).double()
    exact = x.double() @ weight
    bound = UNIT_ROUNDOFF[dtype_name] * exact.abs() + k * 2.0**-24 * (x.double().abs() @ weight.abs())
    return float(((fused - exact).abs() / bound.clamp_min(1e-30)).max())  # one host read per case


def measure(
    device, shapes=SHAPES, rows_list=ROWS, dtypes=DTYPES, bandwidth: bool = True, seed: int = 0
) -> DraftMeasurement:
    """Every product on `device` (a torch.device; the CPU runs under TRITON_INTERPRET=1, at small shapes)."""
    import torch

    from core.offload.matmul_rate import measured_rates
    from core.offload.synthetic_gptq import finalised_linear, random_gptq_tensors
    from core.offload.gptq_kernel import interpreted, triton_available

    if not triton_available():
        return DraftMeasurement(str(device), triton=False)
    if device.type != "cuda" and not interpreted():
        return DraftMeasurement(str(device), error="the kernel runs on CUDA devices (or in Triton's interpreter)")
    generator = torch.Generator().manual_seed(seed)
    cases = []
    try:
        for k, n in shapes:
            tensors = random_gptq_tensors(generator, k, n, 4, GROUP_SIZE, False)
            linear = finalised_linear(tensors, k, n, 4, GROUP_SIZE, False, device)
            for rows in rows_list:
                for dtype_name in dtypes:
                    for split_k in (None, 1):
                        cases.append(
                            {
                                "k": k,
                                "n": n,
                                "rows": rows,
                                "dtype": dtype_name,
                                "split_k": "default" if split_k is None else split_k,
                                "worst_ratio": _worst_ratio(linear, rows, dtype_name, split_k, generator),
                            }
                        )
        rates = measured_rates(device) if bandwidth and device.type == "cuda" else {}
    except Exception as error:  # noqa: BLE001 - a compile or launch error is this check's finding
        return DraftMeasurement(str(device), cases, error=f"{type(error).__name__}: {error}")
    return DraftMeasurement(str(device), cases, rates.get(_engine_kernel(rates)), kernel_rates=rates)


def _engine_kernel(rates: dict[str, float]) -> str | None:
    """The kernel the engine would run by these measured rates (None: none measured)."""
    return choose_kernel(tuple(rates), rates) if rates else None


def decide(m: DraftMeasurement) -> CheckResult:
    measured = asdict(m)
    if not m.triton:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            "This build has no Triton, so the draft model unpacks its 4-bit weights with slower code "
            "(answers come more slowly).",
            measured,
        )
    if m.error:
        return CheckResult(
            NAME,
            Status.FAIL,
            f"The GPU's 4-bit matrix product did not run ({m.error}): the app uses the processor.",
            measured,
        )
    wrong = [case for case in m.cases if not case["worst_ratio"] <= 1.0]  # NaN counts as wrong
    if wrong:
        first = wrong[0]
        return CheckResult(
            NAME,
            Status.FAIL,
            f"The GPU's 4-bit matrix product gave wrong results in {len(wrong)} of {len(m.cases)} tests "
            f"(first: {first['k']}x{first['n']}, {first['rows']} rows, {first['dtype']}): the app uses "
            "the processor.",
            measured,
        )
    if not m.cases:
        return CheckResult(NAME, Status.SKIPPED, "The GPU's 4-bit matrix product was not checked.", measured)
    kernel = _engine_kernel(m.kernel_rates)
    through = f" with {kernel}" if kernel else ""
    speed = f" It reads 4-bit weights at {m.bytes_per_second / 1e9:.0f} GB/s{through}." if m.bytes_per_second else ""
    return CheckResult(
        NAME, Status.PASS, "The draft model's 4-bit matrix product is right at its own sizes." + speed, measured
    )
