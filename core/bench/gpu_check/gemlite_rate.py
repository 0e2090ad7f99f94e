"""gemlite's 4-bit matmul against torch's int4 kernel at an 8B draft's shapes (issue 37: "gemlite where it pays").

gemlite (mobiusml/dropbox, Apache-2.0) is a set of Triton low-bit matmuls tuned per GPU, the well-kept kernel
besides tinygemm that might read a draft's 4-bit weights faster at the search's 16-64 rows, where tinygemm
passes over them once per 16 rows. The engine does not run it: this part only measures whether it would pay,
in the unit the engine chooses kernels by (core.planning.draft_kernel: bytes of packed weights per second,
counting each pass), beside tinygemm timed on the same copies in the same process, and checks its answer
against the weights dequantised here. It runs only on a CUDA GPU, with gemlite's wheel carried in `.whl/`
(docs/gpu-check.md): gemlite asks the GPU for its properties on import, so on a CPU only the conversion of the
engine's GPTQ layout into gemlite's inputs is checked (the smoke run).
"""

from __future__ import annotations

import time

import torch

from core.bench.gpu_check import partial
from core.offload.gptq import GPTQLinear, unpack_cols, unpack_rows
from core.offload.matmul_rate import (
    DRAFT_ROWS,
    DRAFT_SHAPES,
    GROUP_SIZE,
    SMOKE_SHAPES,
    kernel_call,
    random_linear_copies,
    time_calls,
)
from core.planning.draft_kernel import TINYGEMM, weight_passes

REPEATS = 20


def gemlite_inputs(linear: GPTQLinear, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(W_q [N, K] uint8, scales [N, G], zeros [N, G]) for gemlite's `pack`, which computes
    W[n, k] = (W_q[n, k] - zeros[n, g]) * scales[n, g]: a GPTQ linear without act-order, transposed and unpacked
    (its v1 zeros with their offset added)."""
    if linear.mode != "groups":
        raise ValueError("an act-order linear's rows are permuted: gemlite would need them sorted first")
    values = unpack_rows(linear.qweight, linear.bits)[: linear.in_features]
    zeros = unpack_cols(linear.qzeros, linear.bits)[:, : linear.out_features] + linear.zero_offset
    return (
        values.t().contiguous().to(torch.uint8),
        linear.scales.t().contiguous().to(dtype),
        zeros.t().contiguous().to(dtype),
    )


def _dequantised(w_q: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> torch.Tensor:
    """W [K, N] in float32 by gemlite's formula, from its inputs."""
    groups = w_q.shape[1] // scales.shape[1]
    return (
        (w_q.float() - zeros.float().repeat_interleave(groups, 1)) * scales.float().repeat_interleave(groups, 1)
    ).t()


def _gemlite_linear(linear: GPTQLinear, dtype: torch.dtype):
    from gemlite import DType, GemLiteLinear

    wanted = DType.BF16 if dtype == torch.bfloat16 else DType.FP16
    module = GemLiteLinear(
        4, group_size=GROUP_SIZE, in_features=linear.in_features, out_features=linear.out_features,
        input_dtype=wanted, output_dtype=wanted,
    )  # fmt: skip
    module.pack(*gemlite_inputs(linear, dtype), bias=None)
    return module


def _conversion_error() -> float:
    """Largest difference between the engine's dequantisation of a random linear and gemlite's formula on
    the inputs made for it (0 when the conversion is right; on the processor: it does not depend on the card)."""
    from core.offload.synthetic_gptq import finalised_linear, random_gptq_tensors

    _, k, n = SMOKE_SHAPES[0]
    tensors = random_gptq_tensors(torch.Generator().manual_seed(1), k, n, 4, GROUP_SIZE, False)
    linear = finalised_linear(tensors, k, n, 4, GROUP_SIZE, False)
    return float((_dequantised(*gemlite_inputs(linear, torch.float32)) - linear.dequantize(torch.float32)).abs().max())


def measure(device: torch.device, small: bool) -> dict:
    conversion = _conversion_error()
    partial.note(conversion_max_error=conversion)
    if device.type != "cuda":
        return {"conversion_max_error": conversion, "skipped": "gemlite runs only on a CUDA GPU"}
    try:
        import gemlite
    except ImportError as error:
        return {
            "conversion_max_error": conversion,
            "skipped": f"gemlite is not installed ({error}): carry its wheel in .whl/ (docs/gpu-check.md)",
        }
    dtype = torch.bfloat16
    rows_found: list[dict] = []
    partial.note(version=getattr(gemlite, "__version__", "?"), rows=rows_found)
    generator = torch.Generator().manual_seed(0)
    for name, k, n in SMOKE_SHAPES if small else DRAFT_SHAPES:
        weights = random_linear_copies(k, n, device, generator)
        modules = [_gemlite_linear(linear, dtype) for linear in weights.copies]
        tinygemm = [kernel_call(linear, TINYGEMM) for linear in weights.copies]
        reference = weights.copies[0].dequantize(dtype)
        for rows in DRAFT_ROWS:
            x = torch.randn(rows, k, generator=generator).to(device=device, dtype=dtype)
            started = time.perf_counter()
            out = modules[0](x)  # the first call of a shape and row count tunes gemlite's launch
            torch.cuda.synchronize(device)
            row = {"shape": name, "k": k, "n": n, "rows": rows, "bytes": weights.bytes_read}
            row["gemlite_first_call_s"] = time.perf_counter() - started
            expected = x @ reference
            row["gemlite_relative_error"] = float((out.float() - expected.float()).abs().max() / expected.abs().max())
            row["gemlite_s"] = time_calls(lambda module, x=x: module(x), modules, REPEATS, device)
            if all(call is not None for call in tinygemm):
                row["tinygemm_s"] = time_calls(lambda call, x=x: call(x), tinygemm, REPEATS, device)
            rows_found.append(row)
            partial.say(f"{name} rows {rows}: gemlite {row['gemlite_s'] * 1e6:.0f} us")
        del weights, modules, tinygemm, reference
    return {
        "conversion_max_error": conversion,
        "version": getattr(gemlite, "__version__", "?"),
        "rows": rows_found,
        "rates": rates_by_rows(rows_found),
    }


def rates_by_rows(rows: list[dict]) -> dict[str, dict[str, float]]:
    """Per row count, each kernel's rate over the draft's linears in core.planning.draft_kernel's unit (its
    passes' bytes over its total time, so the MLP projections weigh as they do in a forward)."""
    rates: dict[str, dict[str, float]] = {}
    for count in sorted({row["rows"] for row in rows}):
        at = [row for row in rows if row["rows"] == count]
        for kernel in ("gemlite", TINYGEMM):
            if all(f"{kernel}_s" in row for row in at):
                passes = weight_passes(kernel, count)
                read = sum(row["bytes"] * passes for row in at)
                rates.setdefault(str(count), {})[kernel] = read / sum(row[f"{kernel}_s"] for row in at)
    return rates
