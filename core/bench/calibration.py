"""`specexec bench calibration`: the speed model (core.models.speed) against every offloaded row the SpecExec
paper published, each at its own budget, tokens per pass and hardware. Pure arithmetic: no GPU is needed.

Each row is predicted for the paper's setup, not for this engine's choices: every layer streams (the paper
kept none resident), a ring of two layers with the next pass's first layers prefetched while drafting (its
Appendix: "We prefetch the first few layers of the main model during speculation"), the copy rate its own
1-token figure implies (sequential tok/s = speed / speedup: one token per pass, so its seconds are the copy
of every layer, the rate a `specexec hw --measure` on that machine would report), the card's datasheet
memory and matmul rates, and the draft in the form the paper ran it: 16-bit next to a 16-bit target, and
4-bit GPTQ next to a GPTQ target (its Appendix: "we also quantize the draft (7B) model using the same GPTQ
algorithm"; an 8 GB RTX 4060 could not hold a 13.5 GB 16-bit draft), multiplied the way GPTQ engines of 2024
did for batches of tens to hundreds of rows: dequantised into 16 bits, then a GEMM (DraftKernel.DEQUANTISE).
SpecInfer rows draft chains: as many forwards as a chain is long (core.decoding.methods.specinfer.chain_shape).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass

from core.models.gpu_specs import gpu_specs
from core.models.speed import (
    MAX_DRAFT_FORWARDS,
    DraftKernel,
    DraftLaunch,
    GpuRates,
    draft_seconds,
    layer_compute_seconds,
    target_pass_seconds,
)
from core.planning.sizes import ModelShape, WeightFormat, decoder_layer_bytes

RING_SLOTS = 2
TOLERANCE = 0.20  # a row further off than this needs its sentence in docs/benchmarks.md


def _llama(layers, hidden, intermediate, heads, kv_heads, vocab, experts=0, model_type="llama") -> ModelShape:
    return ModelShape(
        model_type,
        layers,
        hidden,
        intermediate,
        heads,
        kv_heads,
        vocab,
        hidden // heads,
        num_local_experts=experts,
        num_experts_per_tok=2 if experts else 0,
    )


MODELS = {
    "Llama 2-70B": _llama(80, 8192, 28672, 64, 8, 32000),
    "Llama 3-70B": _llama(80, 8192, 28672, 64, 8, 128256),
    "Mixtral-8x7B": _llama(32, 4096, 14336, 32, 8, 32000, experts=8, model_type="mixtral"),
    "Llama 2-7B": _llama(32, 4096, 11008, 32, 32, 32000),
    "Llama 3-8B": _llama(32, 4096, 14336, 32, 8, 128256),
    "Mistral-7B": _llama(32, 4096, 14336, 32, 8, 32000, model_type="mistral"),
    "ShearedLlama-1.3B": _llama(24, 2048, 5504, 16, 16, 32000),
}
FP16 = WeightFormat(dtype="float16")
GPTQ_TARGET = WeightFormat(bits=4, group_size=-1, desc_act=True)  # TheBloke's main branches, as the catalog's
GPTQ_DRAFT = WeightFormat(bits=4, group_size=128, desc_act=False)
GPU_NAMES = {
    "A100": "A100-SXM4-80GB",
    "RTX 4090": "RTX 4090",
    "RTX 4060": "RTX 4060",
    "RTX 3090": "RTX 3090",
    "RTX 2080 Ti": "RTX 2080 Ti",
}


@dataclass(frozen=True)
class PaperRow:
    """One published row: where (table), on what, and what it measured."""

    table: str
    gpu: str
    target: str
    gptq: bool
    draft: str
    dataset: str
    temperature: float
    method: str  # "SX" SpecExec, "SI" SpecInfer
    budget: int
    tokens_per_pass: float
    tokens_per_second: float
    speedup: float

    @property
    def sequential_seconds(self) -> float:
        """The 1-token pass the row's speed-up is relative to."""
        return self.speedup / self.tokens_per_second


def _rows(table, gpu, target, gptq, draft, dataset, entries) -> list[PaperRow]:
    return [PaperRow(table, gpu, target, gptq, draft, dataset, *entry) for entry in entries]


# Tables 2 (A100, chat models), 3 (A100, base models) and 4 (consumer GPUs) of Svirschevski et al. 2024:
# (temperature, method, budget, generation rate, tok/s, speed-up).
PAPER_ROWS: tuple[PaperRow, ...] = tuple(
    _rows(
        "2",
        "A100",
        "Llama 2-70B",
        False,
        "Llama 2-7B",
        "OAsst",
        [
            (0.6, "SX", 2048, 20.60, 3.12, 18.7),
            (0.6, "SI", 1024, 8.41, 1.34, 8.0),
            (0, "SX", 1024, 18.8, 2.74, 16.4),
            (0, "SI", 1024, 7.86, 1.18, 7.1),
        ],
    )
    + _rows(
        "2",
        "A100",
        "Llama 2-70B",
        True,
        "Llama 2-7B",
        "OAsst",
        [(0.6, "SX", 128, 12.10, 6.02, 8.9), (0, "SX", 256, 13.43, 6.17, 9.1)],
    )
    + _rows("2", "A100", "Mixtral-8x7B", True, "Mistral-7B", "OAsst", [(0.6, "SX", 256, 12.38, 3.58, 3.5)])
    + _rows("2", "A100", "Llama 3-70B", False, "Llama 3-8B", "OAsst", [(0.6, "SX", 1024, 18.88, 2.62, 15.6)])
    + _rows(
        "2",
        "A100",
        "Llama 3-70B",
        False,
        "Llama 3-8B",
        "MTBench",
        [(0.6, "SX", 1024, 18.16, 2.79, 16.6), (0, "SX", 2048, 21.58, 2.94, 17.5)],
    )
    + _rows(
        "3",
        "A100",
        "Llama 2-70B",
        False,
        "Llama 2-7B",
        "C4",
        [
            (0.6, "SX", 2048, 12.9, 1.97, 11.8),
            (0.6, "SI", 1024, 6.48, 1.03, 6.2),
            (0, "SX", 2048, 16.1, 2.38, 14.3),
            (0, "SI", 1024, 4.78, 0.75, 4.5),
        ],
    )
    + _rows(
        "3",
        "A100",
        "Llama 2-70B",
        False,
        "Llama 2-7B",
        "WikiText-2",
        [
            (0.6, "SX", 2048, 9.57, 1.54, 9.2),
            (0.6, "SI", 1024, 4.69, 0.77, 4.6),
            (0, "SX", 2048, 11.74, 1.88, 11.3),
            (0, "SI", 1024, 3.71, 0.62, 3.6),
        ],
    )
    + _rows(
        "3",
        "A100",
        "Llama 2-70B",
        True,
        "Llama 2-7B",
        "WikiText-2",
        [(0.6, "SX", 256, 6.99, 3.72, 5.5), (0, "SX", 256, 8.81, 4.54, 6.7)],
    )
    + _rows("3", "A100", "Mixtral-8x7B", True, "Mistral-7B", "WikiText-2", [(0.6, "SX", 128, 6.56, 3.23, 3.2)])
    + _rows("4", "RTX 4090", "Llama 2-70B", True, "Llama 2-7B", "OAsst", [(0.6, "SX", 256, 13.46, 5.66, 8.3)])
    + _rows("4", "RTX 4060", "Llama 2-70B", True, "Llama 2-7B", "OAsst", [(0.6, "SX", 128, 9.70, 3.28, 4.6)])
    + _rows("4", "RTX 3090", "Llama 2-70B", True, "Llama 2-7B", "OAsst", [(0.6, "SX", 256, 14.3, 3.68, 10.6)])
    + _rows("4", "RTX 2080 Ti", "Llama 2-70B", True, "ShearedLlama-1.3B", "OAsst", [(0.6, "SX", 128, 7.34, 1.86, 6.1)])
)


@dataclass(frozen=True)
class Prediction:
    row: PaperRow
    copy_rate: float  # bytes/s the row's own 1-token pass implies
    draft_seconds: float
    pass_seconds: float
    tokens_per_second: float

    @property
    def ratio(self) -> float:
        """Predicted over published tokens per second."""
        return self.tokens_per_second / self.row.tokens_per_second

    def to_dict(self) -> dict:
        return {
            **asdict(self.row),
            "copy_gb_per_s": round(self.copy_rate / 1e9, 2),
            "draft_seconds": round(self.draft_seconds, 3),
            "pass_seconds": round(self.pass_seconds, 3),
            "predicted_tokens_per_second": round(self.tokens_per_second, 2),
            "ratio": round(self.ratio, 2),
        }


def predict_row(row: PaperRow) -> Prediction:
    """The speed model's tokens per second for the paper's setup of `row` (see the module's docstring)."""
    from core.decoding.methods.specinfer import chain_shape  # torch: not for `--help`

    target, draft = MODELS[row.target], MODELS[row.draft]
    target_format, draft_format = (GPTQ_TARGET, GPTQ_DRAFT) if row.gptq else (FP16, FP16)
    layers, layer_bytes = target.num_hidden_layers, decoder_layer_bytes(target, target_format)
    specs = gpu_specs(GPU_NAMES[row.gpu])
    probe = GpuRates.from_specs(1.0, specs)
    # the 1-token pass = every copy, then the last layer's compute: solve it for the copy rate
    one_token = layer_compute_seconds(target, target_format, 1, probe)
    rate = layers * layer_bytes / (row.sequential_seconds - one_token)
    gpu = GpuRates.from_specs(rate, specs)
    forwards = chain_shape(row.budget, MAX_DRAFT_FORWARDS)[1] if row.method == "SI" else None
    drafting = draft_seconds(
        draft, draft_format, row.budget, row.tokens_per_pass, gpu, DraftKernel.DEQUANTISE, forwards, DraftLaunch.EAGER
    )  # the paper's code: eager, a host read per forward
    compute = layer_compute_seconds(target, target_format, row.budget + 1, gpu)
    scoring = target_pass_seconds(layers, (), layer_bytes / rate, compute, RING_SLOTS, prefetch_seconds=drafting)
    return Prediction(row, rate, drafting, scoring, row.tokens_per_pass / (drafting + scoring))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON object per row")


def run(args: argparse.Namespace) -> int:
    predictions = [predict_row(row) for row in PAPER_ROWS]
    if args.json:
        print(json.dumps([p.to_dict() for p in predictions], indent=1))
        return 0
    print(
        f"{'table':>5} {'GPU':<12} {'target':<13} {'fmt':<5} {'draft':<18} {'data':<10} {'t':>3} {'m':<2} "
        f"{'budget':>6} {'tok/pass':>8} {'GB/s':>5} {'draft s':>7} {'pass s':>6} {'paper':>6} {'pred.':>6} {'ratio':>5}"
    )
    for p in predictions:
        r = p.row
        flag = "" if abs(p.ratio - 1) <= TOLERANCE else "  *"
        print(
            f"{r.table:>5} {r.gpu:<12} {r.target:<13} {'GPTQ' if r.gptq else '16bit':<5} {r.draft:<18} "
            f"{r.dataset:<10} {r.temperature:>3} {r.method:<2} {r.budget:>6} {r.tokens_per_pass:>8.2f} "
            f"{p.copy_rate / 1e9:>5.1f} {p.draft_seconds:>7.2f} {p.pass_seconds:>6.2f} {r.tokens_per_second:>6.2f} "
            f"{p.tokens_per_second:>6.2f} {p.ratio:>5.2f}{flag}"
        )
    print(f"* more than {TOLERANCE:.0%} off (docs/benchmarks.md, issue 21, says why)")
    return 0
