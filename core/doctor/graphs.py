"""Check: a draft forward captured in a CUDA graph gives the same logits as the eager forward.

CUDA graphs remove the host's kernel-launch time from every draft forward (~14 ms of an eager 7B draft's
forward on an RTX 4090: engineering facts); they are only safe if replaying the capture computes what the
eager code computes. A difference or an error is DEGRADED: graphs stay off (the app starts its engine with
CUDA_GRAPHS_ENV=0), the draft runs eagerly.

The check runs the engine's own capture (`core.decoding.captured_forward.compare_captured_with_eager`: the static-shape
search forward, windowed KV writes, bucketed columns) on a small random 4-bit draft, written as a GPTQ
checkpoint and loaded by the engine's draft loader (so its linears multiply with the fused 4-bit kernel, as a
real draft's do), in float16, over several column buckets of one cache (several graphs sharing its pool).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status

NAME = "graphs"
# Replaying a capture launches the same kernels on the same inputs, so the logits are normally identical;
# the tolerance only forgives a library that picks another algorithm inside a capture (float16 logits).
TOLERANCE = 1e-2
SOURCE = "the engine's draft search forward (random 4-bit Llama, 4 layers, float16, 4 column buckets)"


@dataclass(frozen=True)
class GraphMeasurement:
    """source: which forward was captured; max_abs_diff between captured and eager logits."""

    device: str
    source: str
    max_abs_diff: float | None = None
    error: str | None = None


def engine_capture_difference(device) -> float:
    """The largest logit difference between the engine's captured and eager draft search forwards, on a
    random 4-bit draft loaded onto `device` in float16 by the engine's draft loader, at contexts in four
    column buckets (core.decoding.captured_forward.compare_captured_with_eager)."""
    import tempfile

    import torch

    from core.offload.synthetic_gptq import write_tiny_gptq_model
    from core.decoding.captured_forward import compare_captured_with_eager
    from core.offload.loader import load_on_device

    with tempfile.TemporaryDirectory(prefix="specexec-doctor-draft-") as folder:
        write_tiny_gptq_model(folder)
        draft = load_on_device(folder, str(device), torch.float16, context_length=512)
    with torch.no_grad():
        return compare_captured_with_eager(draft, width=32, contexts=(64, 300, 700, 1100))


def measure(device, capture_difference: Callable[[object], float] | None = None) -> GraphMeasurement:
    """Run `capture_difference(device)` (default: engine_capture_difference); an exception is the finding."""
    try:
        diff = (capture_difference or engine_capture_difference)(device)
        diff = float("inf") if diff != diff else float(diff)  # NaN logits are a difference too
    except Exception as error:  # noqa: BLE001 - a capture error is this check's finding
        return GraphMeasurement(str(device), SOURCE, error=f"{type(error).__name__}: {error}")
    return GraphMeasurement(str(device), SOURCE, diff)


def decide(m: GraphMeasurement) -> CheckResult:
    measured = asdict(m)
    if m.error:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"CUDA graphs could not be used ({m.error}): they stay off and the draft model runs a little slower.",
            measured,
        )
    if m.max_abs_diff is None:
        return CheckResult(NAME, Status.SKIPPED, "CUDA graphs were not checked.", measured)
    if m.max_abs_diff > TOLERANCE:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"A draft forward replayed from a CUDA graph differs from the eager one (by up to "
            f"{m.max_abs_diff:.3g}): graphs stay off and the draft model runs a little slower.",
            measured,
        )
    return CheckResult(NAME, Status.PASS, "A draft forward replayed from a CUDA graph equals the eager one.", measured)
