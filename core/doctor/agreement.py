"""Check: on this GPU, how often SpecExec's answer parts from plain sequential decoding with the same seed.

Every token SpecExec emits is sampled from the target's own distribution, so an answer is always an exact
sample of the model. With the same seed it is also the same text as sequential decoding, except where two
tokens are within rounding of each other: on a GPU the tree pass and the one-token pass use different
kernels (a GEMM for the tree, a fused kernel for one row) and add in different orders, so their logits
differ in the last bits, and a near-tie can go the other way (core/decoding/sampling.py: the keyed Gumbel-max draw
flips only at such near-ties). This runs a short comparison with the built-in pair on the GPU in the dtype
the app uses there (float16 or bfloat16): PROMPTS x SEEDS answers of NEW_TOKENS tokens at temperature 1.0,
top-p 1.0 (the widest distributions, the most near-ties), and reports the rate, per 10,000 tokens compared.

It never fails the GPU: a flip is not an error. The rate is what the README's "Same seed, same words"
promises in plain numbers for this card; a short run's rate is rough (a few hundred tokens).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from core.doctor.report import CheckResult, Status

NAME = "agreement"
PROMPTS = (
    "Tell me about the ocean.",
    "Write a short poem about autumn.",
    "How do plants make food?",
    "Give me three tips for learning to cook.",
)
SEEDS = 2
NEW_TOKENS = 48
BUDGET = 48


@dataclass(frozen=True)
class AgreementMeasurement:
    """runs, specexec_differs (runs whose tokens part from sequential), tokens_compared (tokens before and at
    the first difference, or all), flips_per_10k_tokens; dtype the pair ran in. error: why it could not run."""

    device: str
    dtype: str | None = None
    runs: int = 0
    specexec_differs: int = 0
    tokens_compared: int = 0
    flips_per_10k_tokens: float | None = None
    error: str | None = None


def measure(
    device, prompts=PROMPTS, seeds: int = SEEDS, new_tokens: int = NEW_TOKENS, dtype: str = "auto"
) -> AgreementMeasurement:
    """The built-in pair on `device` (a torch.device) in `dtype` ("auto": the app's choice for the device)."""
    from core.decoding.agreement import compare_runs, flip_summary
    from core.loading.load import load_model
    from core.decoding.settings import SamplingParams, TreeSettings
    from core.text.prompts import Prompt, encode_prompt

    try:
        target = load_model("builtin", dtype=dtype, device=str(device))
        draft = load_model("builtin-draft", dtype=dtype, device=str(device), role="draft")
        ids = [
            encode_prompt(target.tokenizer, Prompt(messages=({"role": "user", "content": text},))) for text in prompts
        ]
        rows = compare_runs(
            target,
            draft,
            ids,
            seeds,
            lambda seed: SamplingParams(temperature=1.0, top_p=1.0, seed=seed),
            TreeSettings(budget=BUDGET, max_depth=8, expand=8),
            new_tokens,
        )
    except Exception as error:  # noqa: BLE001 - what stopped it is this check's finding
        return AgreementMeasurement(str(device), error=f"{type(error).__name__}: {error}")
    summary = flip_summary(rows)
    return AgreementMeasurement(
        str(device),
        str(target.lm.dtype).replace("torch.", ""),
        summary["runs"],
        summary["specexec_differs"],
        summary["tokens_compared"],
        summary["flips_per_10k_tokens"],
    )


def decide(m: AgreementMeasurement) -> CheckResult:
    measured = asdict(m)
    if m.error:
        return CheckResult(
            NAME,
            Status.DEGRADED,
            f"Could not compare fast and plain answers on this GPU ({m.error}); answers are still exact "
            "samples of the model.",
            measured,
        )
    if not m.runs:
        return CheckResult(NAME, Status.SKIPPED, "Fast and plain answers were not compared.", measured)
    same = m.runs - m.specexec_differs
    rate = (
        f"about {m.flips_per_10k_tokens:.0f} word choices in 10,000 went the other way"
        if m.specexec_differs
        else "no word choice went the other way"
    )
    return CheckResult(
        NAME,
        Status.PASS,
        f"With the same seed, {same} of {m.runs} short answers were word for word those of plain "
        f"decoding ({rate}, in {m.dtype}); where two words are equally likely to within rounding, this "
        "GPU may pick the other one. Every answer is still an exact sample of the model.",
        measured,
    )
