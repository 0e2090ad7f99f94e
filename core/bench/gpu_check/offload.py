"""A synthetic 70B-shaped offloaded pass beside the speed model's prediction for the same card.

Random 4-bit (GPTQ, group 128, act-order) decoder layers of Llama-70B's shape sit in pinned host RAM and
stream through the engine's own LayerStreamer at tree sizes of budgets 64, 256 and 1024
(core.offload.pass_timing.measure_format): the measured pass is projected to 80 layers. Beside it, for each
budget: the speed model's target pass from the measured per-layer copy and compute (core.models.speed:
`target_pass_seconds`, with and without the first layers' copies hidden under the draft's time: the
difference is the overlap), and its prediction for the catalog's 70B pair on this machine with the measured
copy rate (core.models.fit.predict_pair): draft, target and tokens per second.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch

from core.bench.gpu_check import partial
from core.offload.pass_timing import FULL_MODEL_LAYERS, layer_config, measure_format

BUDGETS = (64, 256, 1024)
PAIR_ID = "llama3.3-70b-instruct-awq"
LAYERS = 8
SMALL_BUDGETS = (4, 16)
# Without a GPU the prediction is for the card of this description (the 24 GB example).
CPU_HARDWARE = Path(__file__).resolve().parents[3] / "tests" / "fixtures" / "hw" / "gpu24-ram64-pcie4.json"


def _prediction(budget: int, copy_rate: float, device: torch.device) -> dict:
    from core.hardware.probe import describe_hardware
    from core.models.catalog import load_catalog
    from core.models.fit import predict_pair

    hw = describe_hardware(None if device.type == "cuda" else str(CPU_HARDWARE))
    if device.type == "cuda" and hw.gpus:  # the measured copy rate of this machine, as `hw --measure` records it
        hw = dataclasses.replace(
            hw, gpus=(dataclasses.replace(hw.gpus[0], h2d_bytes_per_second=copy_rate),) + hw.gpus[1:]
        )
    pair = next(p for p in load_catalog().pairs if p.id == PAIR_ID)
    fit = predict_pair(pair, hw, budget)
    return {
        "card": hw.best_gpu.name if hw.best_gpu else None,
        "pair": PAIR_ID,
        "budget": fit.budget,
        "resident_layers": fit.resident_layers,
        "draft_s": fit.draft_seconds,
        "pass_s": fit.pass_seconds,
        "tokens_per_pass": fit.tokens_per_pass,
        "tokens_per_second": fit.tokens_per_second,
        "rate_source": fit.rate_source,
    }


def measure(device: torch.device, small: bool) -> dict:
    from core.models.speed import target_pass_seconds

    budgets = SMALL_BUDGETS if small else BUDGETS
    dtype = torch.float16 if device.type == "cuda" else torch.float32
    config = layer_config(16 if small else 1)
    measured = measure_format(
        "gptq",
        config,
        device,
        dtype,
        [b + 1 for b in budgets],
        layers=2 if small else LAYERS,
        repeats=1 if small else 3,
        context=32 if small else 512,
    )
    layers = 2 if small else LAYERS
    partial.say(f"{layers} layers streamed at {measured['copy_rate_gbps']:.1f} GB/s")
    rows = []
    partial.note(copy_rate_gbps=measured["copy_rate_gbps"], pinned=measured["pinned"], rows=rows)
    for budget, row in zip(budgets, measured["passes"]):
        copy_layer, compute_layer = row["copy_s"] / layers, row["compute_s"] / layers
        prediction = _prediction(budget, measured["copy_rate_gbps"] * 1e9, device)
        draft = prediction["draft_s"] or 0.0
        alone = target_pass_seconds(FULL_MODEL_LAYERS, (), copy_layer, compute_layer, 2)
        under_draft = target_pass_seconds(FULL_MODEL_LAYERS, (), copy_layer, compute_layer, 2, prefetch_seconds=draft)
        rows.append(
            {
                "budget": budget,
                "tree_tokens": row["tree_size"],
                "measured_target_s_80_layers": row["projected_80_layer_s"],
                "measured_copy_s_per_layer": copy_layer,
                "measured_compute_s_per_layer": compute_layer,
                "compute_hidden_under_copies": row["hidden_fraction"],
                "model_target_s_80_layers": alone,
                "overlap_s_with_draft": alone - under_draft,
                "prediction": prediction,
            }
        )
    return {
        "layers_streamed": layers,
        "format": measured["format"],
        "pinned": measured["pinned"],
        "copy_rate_gbps": measured["copy_rate_gbps"],
        "dequant_path": measured["dequant_path"],
        "draft_matmuls_70b_layer": measured["draft_matmuls"],
        "rows": rows,
    }
