"""Check: a draft forward captured in a CUDA graph gives the same logits as the eager forward.

CUDA graphs remove the host's kernel-launch time from every draft forward (~14 ms of an eager 7B draft's
forward on an RTX 4090: engineering facts); they are only safe if replaying the capture computes what the
eager code computes. A difference or an error is DEGRADED: graphs stay off, the draft runs eagerly.

`forward_pair` is the seam for the decoding loop's own capture (issue 20 exposes a function that runs a
captured and an eager draft forward on the same inputs): until the lead wires it in, `tiny_draft_forward_pair`
captures a small random Llama's forward, which checks that capture and replay work on this GPU and driver
but not the engine's own static-shape draft step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status

NAME = "graphs"
# Replaying a capture launches the same kernels on the same inputs, so the logits are normally identical;
# the tolerance only forgives a library that picks another algorithm inside a capture (float16 logits).
TOLERANCE = 1e-2


@dataclass(frozen=True)
class GraphMeasurement:
    """source: which forward was captured; max_abs_diff between captured and eager logits."""

    device: str
    source: str
    max_abs_diff: float | None = None
    error: str | None = None


def tiny_draft_forward_pair(device):  # -> tuple[torch.Tensor, torch.Tensor]: (captured logits, eager logits)
    """A 2-layer random Llama in float16: eager logits, then the same forward captured and replayed."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.float16).eval()
    ids = torch.randint(0, config.vocab_size, (1, 16), device=device)
    with torch.no_grad():
        eager = model(ids, use_cache=False).logits.clone()
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):  # warm-up outside the capture, as torch's documentation asks
            for _ in range(3):
                model(ids, use_cache=False)
        torch.cuda.current_stream(device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = model(ids, use_cache=False).logits
        graph.replay()
        torch.cuda.current_stream(device).synchronize()
    return captured.clone(), eager


def measure(device, forward_pair: Callable | None = None, source: str | None = None) -> GraphMeasurement:
    """Run `forward_pair(device)` (default: tiny_draft_forward_pair) and compare its two logits."""
    source = source or ("tiny random Llama (2 layers)" if forward_pair is None else getattr(forward_pair, "__qualname__", "engine"))
    try:
        captured, eager = (forward_pair or tiny_draft_forward_pair)(device)
        diff = float((captured.double() - eager.double()).abs().nan_to_num(float("inf")).max())
    except Exception as error:  # noqa: BLE001 - a capture error is this check's finding
        return GraphMeasurement(str(device), source, error=f"{type(error).__name__}: {error}")
    return GraphMeasurement(str(device), source, diff)


def decide(m: GraphMeasurement) -> CheckResult:
    measured = asdict(m)
    if m.error:
        return CheckResult(NAME, Status.DEGRADED,
                           f"CUDA graphs could not be used ({m.error}): they stay off and the draft model runs a little slower.",
                           measured)
    if m.max_abs_diff is None:
        return CheckResult(NAME, Status.SKIPPED, "CUDA graphs were not checked.", measured)
    if m.max_abs_diff > TOLERANCE:
        return CheckResult(NAME, Status.DEGRADED,
                           f"A draft forward replayed from a CUDA graph differs from the eager one (by up to "
                           f"{m.max_abs_diff:.3g}): graphs stay off and the draft model runs a little slower.", measured)
    return CheckResult(NAME, Status.PASS, "A draft forward replayed from a CUDA graph equals the eager one.", measured)
