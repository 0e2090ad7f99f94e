"""The fused small-batch GPTQ matmul (core/offload/gptq_matmul.py) against eager dequantise-then-multiply,
run on the CPU by Triton's interpreter, and compiled to PTX for the GPUs the torch build supports (no GPU is
needed to compile).

Tolerance, and why: the kernel's W is bit for bit the reference's (the shared `_dequant_tile`), and products
of 16-bit values are exact in float32, so the only differences from the exact product are the float32
additions and the final rounding to the output dtype. For each output,

    |y - y_exact| <= u_out * |y_exact| + K * 2^-24 * sum_k |x_k * W_kn|

(u_out: unit roundoff of the output dtype; K * 2^-24 bounds recursive float32 summation of K terms). The
eager route (float32 here) is checked against the same bound, and the kernel must differ from the eager
result by no more than twice it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from core.offload.packed_gptq import PackedGPTQ
from core.offload.gptq import dequantize_into
from core.offload.gptq_matmul import (
    FUSED_MATMUL_MAX_ROWS,
    TARGET_PROGRAMS,
    LaunchConfig,
    fused_gptq_matmul,
    fused_matmul_available,
    launch_config,
)
from test_gptq import gptq_linear, random_gptq
from test_gptq_kernel import interpreter  # noqa: F401 - the fixture: kernels run in Triton's interpreter

pytestmark = pytest.mark.usefixtures("one_torch_thread")

UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8, torch.float32: 2.0**-24}


def _weight(linear, dtype: torch.dtype) -> torch.Tensor:
    """The reference W [K, N] in `dtype` (eager dequantisation; exact for these scales)."""
    return dequantize_into(torch.empty(linear.in_features, linear.out_features, dtype=dtype), linear.packed)


def _fused(linear, x: torch.Tensor, config: LaunchConfig | None = None) -> torch.Tensor:
    return fused_gptq_matmul(x, linear.packed, config=config)


def _bound(x: torch.Tensor, weight: torch.Tensor, exact: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    k = x.shape[1]
    return UNIT_ROUNDOFF[dtype] * exact.abs() + k * 2.0**-24 * (x.double().abs() @ weight.double().abs())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bits", "group_size", "act_order", "rows"),
    [
        (4, 128, True, 1),
        (4, 128, False, 16),
        (4, 32, True, 33),
        (4, -1, False, 256),
        (4, 64, True, 100),
        (3, 32, True, 7),
        (3, -1, False, 64),
        (2, 64, False, 17),
        (8, 32, True, 48),
        (8, -1, False, 2),
    ],
)
def test_fused_matmul_within_the_float32_sum_bound(interpreter, bits, group_size, act_order, rows):
    k, n = (256 if group_size == 128 else 128), (96 if bits == 3 else 80)  # n not a multiple of the tile width
    rng = np.random.default_rng(bits * 97 + rows)
    tensors, _ = random_gptq(rng, k, n, bits, group_size, act_order)
    linear = gptq_linear(tensors, k, n, bits, group_size, act_order)
    x64 = torch.from_numpy(rng.standard_normal((rows, k)))
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        x, weight = x64.to(dtype), _weight(linear, dtype)
        exact = x.double() @ weight.double()
        fused = _fused(linear, x)
        assert fused.dtype == dtype and fused.shape == (rows, n)
        bound = _bound(x, weight, exact, dtype)
        assert ((fused.double() - exact).abs() <= bound).all(), (bits, group_size, act_order, rows, dtype)
        eager = (x.float() @ weight.float()).to(dtype)  # the CPU's eager route: float32 sums, one rounding
        assert ((eager.double() - exact).abs() <= bound).all()
        assert ((fused.double() - eager.double()).abs() <= 2 * bound).all()


@pytest.mark.slow
def test_fused_matmul_gather_mode_irregular_groups(interpreter):
    rng = np.random.default_rng(5)
    k, n, bits = 128, 64, 4
    tensors, _ = random_gptq(rng, k, n, bits, 32, False)
    tensors["g_idx"] = torch.from_numpy(rng.integers(0, 4, k).astype(np.int32))  # groups of unequal size
    linear = gptq_linear(tensors, k, n, bits, 32, True)
    assert linear.mode == "gather"
    x = torch.from_numpy(rng.standard_normal((20, k))).float()
    weight = _weight(linear, torch.float32)
    exact = x.double() @ weight.double()
    assert ((_fused(linear, x).double() - exact).abs() <= _bound(x, weight, exact, torch.float32)).all()


@pytest.mark.slow
def test_gptq_linear_takes_the_fused_route_for_small_batches_only(interpreter):
    """Through GPTQLinear.forward (act-order: x permuted first): up to FUSED_MATMUL_MAX_ROWS rows use the
    kernel, more use dequantise-then-multiply; both give the exact product within the bound."""
    rng = np.random.default_rng(9)
    k, n = 128, 64
    tensors, _ = random_gptq(rng, k, n, 4, 32, True)
    linear = gptq_linear(tensors, k, n, 4, 32, True)
    assert linear.mode == "perm"
    weight_rows = _weight(linear, torch.float32)  # rows in the sorted (re-packed) order
    original = torch.empty_like(weight_rows)
    original[linear.perm.long()] = weight_rows  # W in the checkpoint's row order
    for rows in (3, FUSED_MATMUL_MAX_ROWS, FUSED_MATMUL_MAX_ROWS + 1):
        x = torch.from_numpy(rng.standard_normal((1, rows, k))).float()
        assert fused_matmul_available(x) == (rows <= FUSED_MATMUL_MAX_ROWS)
        y = linear(x)
        exact = x[0].double() @ original.double()
        assert y.shape == (1, rows, n)
        assert ((y[0].double() - exact).abs() <= _bound(x[0], original, exact, torch.float32)).all()


def test_not_available_on_the_cpu_without_the_interpreter(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert not fused_matmul_available(torch.zeros(4, 32))
    with pytest.raises(ValueError, match="not torch.float64"):
        fused_gptq_matmul(torch.zeros(2, 32, dtype=torch.float64), PackedGPTQ(*(torch.empty(0),) * 3, None, 4, 32))
    with pytest.raises(ValueError, match="rows, K"):
        fused_gptq_matmul(
            torch.zeros(2, 24), PackedGPTQ(torch.zeros(4, 8, dtype=torch.int32), *(torch.empty(0),) * 2, None, 4, 32)
        )


def test_launch_configs_split_k_until_the_gpu_has_enough_programs():
    # a one-row key projection of an 8B draft: 16 tiles, so K is split 16 ways (each split 256 inputs)
    assert launch_config(1, 1024, 4096, 128) == LaunchConfig(16, 64, 64, 16)
    # at 32 rows the partial sums would outweigh the packed weights: 2 splits at most (a quarter of their bytes)
    assert launch_config(32, 1024, 4096, 128) == LaunchConfig(32, 64, 64, 2)
    # an MLP projection has 224 tiles at one row: split in 3
    assert launch_config(1, 14336, 4096, 128) == LaunchConfig(16, 64, 64, 3)
    assert launch_config(200, 28672, 8192, 32) == LaunchConfig(64, 64, 32, 1)  # 1,792 tiles: enough already
    # never a split of fewer than MIN_SPLIT_STEPS steps
    assert launch_config(1, 64, 256, 64).split_k == 1
    for rows, n, k in ((1, 4096, 4096), (16, 1024, 14336), (64, 4096, 4096), (1, 8192, 8192), (32, 14336, 4096)):
        config = launch_config(rows, n, k, 128)
        tiles = -(-rows // config.block_m) * -(-n // config.block_n)
        assert config.split_k == 1 or tiles * (config.split_k - 1) < TARGET_PROGRAMS
        assert config.split_k * rows * n * 4 * 2 <= k * n / 2 / 4 or config.split_k == 1


@pytest.mark.slow
@pytest.mark.parametrize("split_k", [2, 3, 4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_split_k_sums_within_the_bound(interpreter, split_k, dtype):
    """Partial float32 sums per split, added in a fixed order: the same bound as one pass over K, and the
    same result on every call (no atomics)."""
    rng = np.random.default_rng(split_k)
    k, n, rows = 256, 80, 5
    tensors, _ = random_gptq(rng, k, n, 4, 32, True)
    linear = gptq_linear(tensors, k, n, 4, 32, True)
    x = torch.from_numpy(rng.standard_normal((rows, k))).to(dtype)
    weight = _weight(linear, dtype)
    exact = x.double() @ weight.double()
    config = LaunchConfig(16, 32, 32, split_k)
    fused = _fused(linear, x, config)
    assert fused.dtype == dtype and fused.shape == (rows, n)
    assert ((fused.double() - exact).abs() <= _bound(x, weight, exact, dtype)).all()
    assert torch.equal(fused, _fused(linear, x, config))


@pytest.mark.parametrize("split_k", [1, 4])
@pytest.mark.parametrize(("capability", "dtype"), [(75, "fp16"), (80, "bf16"), (89, "fp16"), (90, "fp32")])
def test_kernel_compiles_for_the_gpus_the_torch_build_targets(capability, dtype, split_k):
    """Compiled to PTX and machine code with Triton's own ptxas, without a GPU: the compiled path builds, and
    from Ampere on 16-bit products use the tensor cores (mma instructions; before it Triton has only FMAs,
    which is why PRE_AMPERE_MAX_ROWS is small)."""
    triton = pytest.importorskip("triton")
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from core.offload import gptq_matmul
    from core.offload.gptq_kernel import dequant_tile

    signature = {
        name: kind
        for name, kind in zip(
            [
                "x_ptr",
                "qweight_ptr",
                "qzeros_ptr",
                "scales_ptr",
                "g_idx_ptr",
                "out_ptr",
                "M",
                "N",
                "K",
                "zero_words",
                "group_size",
                "zero_offset",
                "k_per_split",
            ],
            [f"*{dtype}", "*i32", "*i32", "*fp16", "*i32", f"*{dtype}"] + ["i32"] * 7,
        )
    }
    value = {"fp16": tl.float16, "bf16": tl.bfloat16, "fp32": tl.float32}[dtype]
    constants = dict(
        BITS=4,
        USE_G_IDX=False,
        SAME_GROUP=True,
        DOT_DTYPE=value,
        OUT_DTYPE=value,
        BF16=dtype == "bf16",
        IEEE=dtype == "fp32",
        DEQUANT_TILE=dequant_tile(False),
        BLOCK_M=16,
        BLOCK_N=64,
        BLOCK_K=64,
        SPLIT_K=split_k,
    )
    signature.update({name: "constexpr" for name in constants})
    compiled = triton.compile(
        ASTSource(triton.jit(gptq_matmul._matmul_kernel), signature, constants),
        target=GPUTarget("cuda", capability, 32),
    )
    ptx = compiled.asm["ptx"]
    assert compiled.asm["cubin"] and ".entry _matmul_kernel" in ptx
    assert ("mma" in ptx) == (dtype != "fp32" and capability >= 80)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("rows", [1, 16, 64, 256])
@pytest.mark.parametrize("split_k", [None, 1, 4])
def test_compiled_matmul_on_cuda_within_the_bound(rows, split_k):
    rng = np.random.default_rng(rows)
    k, n = 1024, 768
    tensors, _ = random_gptq(rng, k, n, 4, 128, True)
    weight = _weight(gptq_linear(tensors, k, n, 4, 128, True), torch.float16)
    linear = gptq_linear(tensors, k, n, 4, 128, True).cuda()
    x = torch.from_numpy(rng.standard_normal((rows, k))).half()
    assert fused_matmul_available(x.cuda()) == (rows <= 16 or torch.cuda.get_device_capability()[0] >= 8)
    exact = x.double() @ weight.double()
    config = None if split_k is None else dataclasses.replace(launch_config(rows, n, k, 128), split_k=split_k)
    fused = _fused(linear, x.cuda(), config).cpu()
    assert ((fused.double() - exact).abs() <= _bound(x, weight, exact, torch.float16)).all()
