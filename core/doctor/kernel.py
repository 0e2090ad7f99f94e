"""Check: the fused Triton GPTQ kernel compiles on this GPU and writes the same bits as the eager reference.

Random layers cover what real checkpoints hold: 2/3/4/8-bit, act-order (rows re-packed by group, the
"perm" mode), group sizes 32, 128 and none, an irregular g_idx ("gather" mode), and float16-subnormal scales;
each in float16 and bfloat16. Bit-for-bit equality is the contract (core.offload.gptq_kernel explains why
it holds), so any differing element is a FAIL, and so is a kernel that does not compile (the engine would
call it). A build without Triton (Windows: PyTorch ships none) never calls it: GPTQ weights are unpacked by
the slower eager code on the GPU, which is DEGRADED. On the CPU the kernel runs in Triton's interpreter when
TRITON_INTERPRET=1 (the tests do that); it is never compiled there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from core.doctor.report import CheckResult, Status

NAME = "kernel"
# (bits, group size, act-order, variant): "tiny" = float16-subnormal scales; "irregular" = groups of unequal
# size (a g_idx no sort makes contiguous: the "gather" mode)
CASES: tuple[tuple[int, int, bool, str], ...] = tuple(
    (bits, group, act_order, "normal")
    for bits in (2, 3, 4, 8)
    for group, act_order in ((128, True), (32, True), (32, False), (-1, False))
) + ((4, 128, True, "tiny"), (2, 128, True, "tiny"), (3, 32, True, "irregular"), (4, 128, True, "irregular"))
DTYPES = ("float16", "bfloat16")
GPU_SHAPE = (1024, 768)  # K, N of each random layer on a GPU (the interpreter gets smaller ones)


@dataclass(frozen=True)
class KernelMeasurement:
    """cases: one entry per (layer, dtype): bits, group_size, act_order, variant, mode, dtype, k, n, differing
    (elements whose bits differ), max_abs_diff. error: why the kernel could not run at all."""

    device: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    triton: bool = True  # False: this build has no Triton, so the engine never uses the fused kernel


def _bits_of(tensor):  # -> torch.Tensor: the raw bits, so -0.0 vs 0.0 and NaN payloads count as different
    import torch

    return tensor.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()])


def measure(device, shape: tuple[int, int] = GPU_SHAPE, seed: int = 0, cases=CASES, dtypes=DTYPES) -> KernelMeasurement:
    """Run every case through the fused kernel and the reference on `device` (a torch.device)."""
    import torch

    from core.offload.synthetic_gptq import SCALES, TINY_SCALES, finalised_linear, random_gptq_tensors
    from core.offload.gptq import dequantize_into
    from core.offload.gptq_kernel import fused_dequantize_into, interpreted, triton_available

    if not triton_available():
        return KernelMeasurement(str(device), triton=False)
    if device.type != "cuda" and not interpreted():
        return KernelMeasurement(str(device), error="the kernel runs on CUDA devices (or in Triton's interpreter)")
    generator = torch.Generator().manual_seed(seed)
    k, n = shape
    results = []
    try:
        for bits, group, act_order, variant in cases:
            tensors = random_gptq_tensors(
                generator, k, n, bits, group, act_order, TINY_SCALES if variant == "tiny" else SCALES
            )
            if variant == "irregular":
                groups = tensors["scales"].shape[0]
                tensors["g_idx"] = torch.randint(0, groups, (k,), generator=generator, dtype=torch.int32)
            linear = finalised_linear(tensors, k, n, bits, group, act_order, device)
            for dtype_name in dtypes:
                dtype = getattr(torch, dtype_name)
                reference = dequantize_into(torch.full((k, n), float("nan"), dtype=dtype, device=device), linear.packed)
                fused = fused_dequantize_into(
                    torch.full((k, n), float("nan"), dtype=dtype, device=device), linear.packed
                )
                differing = int((_bits_of(fused) != _bits_of(reference)).sum())  # one host read per case
                max_diff = float((fused.double() - reference.double()).abs().nan_to_num(float("inf")).max())
                results.append(
                    {
                        "bits": bits,
                        "group_size": group,
                        "act_order": act_order,
                        "variant": variant,
                        "mode": linear.mode,
                        "dtype": dtype_name,
                        "k": k,
                        "n": n,
                        "differing": differing,
                        "max_abs_diff": max_diff,
                    }
                )
    except Exception as error:  # noqa: BLE001 - a compile or launch error is this check's finding
        return KernelMeasurement(str(device), results, error=f"{type(error).__name__}: {error}")
    return KernelMeasurement(str(device), results)


def _case_label(case: dict[str, Any]) -> str:
    group = "no groups" if case["group_size"] == -1 else f"group {case['group_size']}"
    order = ", act-order" if case["act_order"] else ""
    variant = {"tiny": ", tiny scales", "irregular": ", irregular groups"}.get(case["variant"], "")
    return f"{case['bits']}-bit, {group}{order}{variant}, {case['dtype']}"


def decide(m: KernelMeasurement) -> CheckResult:
    measured = asdict(m)
    if not m.triton:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            "This build has no Triton, so GPTQ weights are unpacked by slower code on the GPU.",
            measured,
        )
    if m.error:
        return CheckResult(
            NAME, Status.FAIL, f"The GPU's GPTQ kernel did not run ({m.error}): the app uses the processor.", measured
        )
    wrong = [case for case in m.cases if case["differing"]]
    if wrong:
        return CheckResult(
            NAME,
            Status.FAIL,
            f"The GPU's GPTQ kernel gave different weights from the reference in {len(wrong)} of "
            f"{len(m.cases)} random layer tests (first: {_case_label(wrong[0])}): the app uses the processor.",
            measured,
        )
    if not m.cases:
        return CheckResult(NAME, Status.SKIPPED, "The GPU's GPTQ kernel was not checked.", measured)
    layers = len({(c["bits"], c["group_size"], c["act_order"], c["variant"]) for c in m.cases})
    dtypes = " and ".join(dict.fromkeys(c["dtype"] for c in m.cases))
    return CheckResult(
        NAME,
        Status.PASS,
        f"The fused GPTQ kernel equals the reference bit for bit on {layers} random layers in {dtypes} "
        "(2/3/4/8-bit, act-order, groups 32/128/none, irregular groups, tiny scales).",
        measured,
    )
