"""Check: a tiny GPTQ model through the real offload path gives the same greedy tokens as the CPU.

The model (core.offload.synthetic_gptq, made in a temporary folder) is loaded twice: once on the CPU in
float32 with every layer in RAM (the reference), once on the device the app would use, with the GPU's
placement: one resident layer, the others in a pinned host store streamed through a ring of two slots on the
copy stream with events, and the embedding table in host RAM. Both compute in float32, so the tokens must be
equal; a difference means the streaming machinery (a slot reused too early, a missed event, a wrong copy)
is broken on this machine: FAIL. On the CPU the same placement runs with synchronous copies
(`stream_on_cpu`), which is how the test suite runs this check.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict, dataclass, field

from core.doctor.report import CheckResult, Status
from core.decoding.agreement import first_difference

NAME = "offload"
PROMPT = (1, 17, 42, 99, 7, 256, 3, 128)
NEW_TOKENS = 24
# The random model whose greedy choices are clearest for PROMPT (of seeds 0-11): its smallest gap between
# the best and second-best logit over the 24 tokens is 1.2 (logits up to ~50), far above float32 rounding
# differences between a GPU and the CPU, so a different token means a broken path, not a near tie.
MODEL_SEED = 4


@dataclass(frozen=True)
class OffloadMeasurement:
    """tokens_*: greedy continuations of PROMPT; max_abs_logit_diff: of the prompt's last logits, offloaded vs
    reference; reference_min_margin: the smallest best-minus-second logit gap of the reference's greedy steps;
    placement: what the offloaded load did (resident layers, slots, pinned, embedding on host)."""

    device: str
    tokens_reference: list[int] = field(default_factory=list)
    tokens_offloaded: list[int] = field(default_factory=list)
    max_abs_logit_diff: float | None = None
    reference_min_margin: float | None = None
    placement: dict = field(default_factory=dict)
    error: str | None = None


def _greedy(model, prompt: tuple[int, ...], count: int) -> list[int]:
    from core.decoding.decode_state import DecodeState
    from core.decoding.methods.sequential import sequential_steps
    from core.decoding.settings import SamplingParams

    state = DecodeState.fresh(list(prompt), model, None)
    return [
        token
        for step in sequential_steps(state, model, SamplingParams(temperature=0.0), count)
        for token in step.token_ids
    ]


def _logits(model, ids: list[int], rows: slice):  # -> torch.Tensor [rows, V] float64 on the CPU
    import torch

    from core.modeling.tree_mask import additive_mask, causal_visibility

    n = len(ids)
    mask = additive_mask(causal_visibility(0, n, model.device), model.dtype)
    return model.forward(torch.tensor(ids), torch.arange(n), mask, model.new_cache(), logit_rows=rows).double().cpu()


def min_margin(model, prompt: tuple[int, ...], tokens: list[int]) -> float:
    """The smallest gap between the best and the second-best logit where `tokens` were chosen greedily."""
    steps = _logits(model, list(prompt) + tokens[:-1], slice(len(prompt) - 1, None))
    best = steps.topk(2, dim=-1).values
    return float((best[:, 0] - best[:, 1]).min())


def measure(device) -> OffloadMeasurement:
    """Build the tiny model, run both paths, return the tokens (a torch.device; cuda or cpu)."""
    import torch

    from core.offload.synthetic_gptq import write_tiny_gptq_model
    from core.offload import load_offloaded

    try:
        with tempfile.TemporaryDirectory(prefix="specexec-doctor-") as folder:
            write_tiny_gptq_model(folder, seed=MODEL_SEED)
            reference = load_offloaded(folder, "cpu", torch.float32)
            offloaded = load_offloaded(
                folder, str(device), torch.float32, resident_layers=1, n_slots=2, stream_on_cpu=device.type == "cpu"
            )
            report = offloaded.report
            placement = {
                "summary": report.summary(),
                "resident_layers": len(report.resident_layers),
                "streamed_layers": report.n_layers - len(report.resident_layers),
                "slots": report.n_slots,
                "pinned": report.pinned,
                "embedding_on_host": report.host_table_bytes > 0,
            }
            last = slice(-1, None)
            diff = float((_logits(offloaded, list(PROMPT), last) - _logits(reference, list(PROMPT), last)).abs().max())
            expected = _greedy(reference, PROMPT, NEW_TOKENS)
            return OffloadMeasurement(
                str(device),
                expected,
                _greedy(offloaded, PROMPT, NEW_TOKENS),
                diff,
                min_margin(reference, PROMPT, expected),
                placement,
            )
    except Exception as error:  # noqa: BLE001 - a crash of the offload path is this check's finding
        return OffloadMeasurement(str(device), error=f"{type(error).__name__}: {error}")


def decide(m: OffloadMeasurement) -> CheckResult:
    measured = asdict(m)
    if m.error:
        return CheckResult(
            NAME, Status.FAIL, f"Streaming a model to the GPU failed ({m.error}): the app uses the processor.", measured
        )
    if not m.tokens_reference:
        return CheckResult(NAME, Status.SKIPPED, "Streaming a model to the GPU was not checked.", measured)
    index = first_difference(m.tokens_reference, m.tokens_offloaded)
    if index is not None:
        return CheckResult(
            NAME,
            Status.FAIL,
            f"A test model streamed to the GPU gave different words from the processor (from token "
            f"{index + 1} of {len(m.tokens_reference)} on): the app uses the processor.",
            measured,
        )
    where = "to the GPU" if m.device.startswith("cuda") else "through the offload path"
    return CheckResult(
        NAME,
        Status.PASS,
        f"A test model streamed {where} gives the processor's {len(m.tokens_reference)} tokens "
        f"({m.placement.get('streamed_layers', '?')} layers streamed, "
        f"{'pinned' if m.placement.get('pinned') else 'not pinned'} host memory).",
        measured,
    )
