"""The fused Triton GPTQ dequantisation kernel, run on the CPU by Triton's interpreter, equals the reference
(`core.offload.gptq.dequantize_into`) bit for bit: 2/3/4/8 bits, group sizes, act-order, irregular g_idx,
every output dtype."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from core.offload.packed_gptq import PackedGPTQ
from core.offload.gptq import dequantize_into
from core.offload.gptq_kernel import fused_dequant_available, fused_dequantize_into
from test_gptq import gptq_linear, random_gptq

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def interpreter(monkeypatch):
    """Kernels built under this fixture run in Triton's NumPy interpreter on CPU tensors."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def _both(linear, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    k, n = linear.in_features, linear.out_features
    device = linear.qweight.device  # the CPU under the interpreter, a GPU for the compiled kernel
    reference = dequantize_into(torch.full((k, n), float("nan"), dtype=dtype, device=device), linear.packed)
    fused = fused_dequantize_into(torch.full((k, n), float("nan"), dtype=dtype, device=device), linear.packed)
    return reference, fused


def _bits_of(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[tensor.element_size()])


@pytest.mark.slow
@pytest.mark.parametrize(
    ("bits", "group_size", "act_order"),
    [
        (2, 32, False),
        (3, 32, True),
        (3, -1, False),
        (3, 64, False),
        (4, 32, True),
        (4, -1, False),
        (4, 128, False),
        (8, 64, True),
    ],
)
def test_fused_kernel_equals_reference_bit_for_bit(interpreter, bits, group_size, act_order):
    k, n = 128, 96 if bits == 3 else 72  # n is not a multiple of the tile width: the edge tile is masked
    tensors, weight = random_gptq(np.random.default_rng(bits * 31 + group_size % 7), k, n, bits, group_size, act_order)
    linear = gptq_linear(tensors, k, n, bits, group_size, act_order)
    assert linear.mode == ("perm" if act_order and group_size != -1 else "groups")
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        reference, fused = _both(linear, dtype)
        assert torch.equal(_bits_of(fused), _bits_of(reference)), (bits, group_size, act_order, dtype)
    rows = linear.perm.long() if linear.mode == "perm" else torch.arange(k)
    assert torch.equal(_both(linear, torch.float64)[1], weight[rows])  # exact in float64


@pytest.mark.slow
def test_fused_kernel_gather_mode(interpreter):
    rng = np.random.default_rng(11)
    k, n, bits = 64, 96, 3
    tensors, _ = random_gptq(rng, k, n, bits, 32, False)
    tensors["g_idx"] = torch.from_numpy(rng.integers(0, 2, k).astype(np.int32))  # groups of unequal size
    linear = gptq_linear(tensors, k, n, bits, 32, True)
    assert linear.mode == "gather"
    reference, fused = _both(linear, torch.float16)
    assert torch.equal(_bits_of(fused), _bits_of(reference))


def test_fused_kernel_only_on_cuda():
    assert not fused_dequant_available(torch.device("cpu"))
    with pytest.raises(ValueError, match="not torch.int32"):
        fused_dequantize_into(torch.empty(32, 8, dtype=torch.int32), PackedGPTQ(*(torch.empty(0),) * 3, None, 4, 32))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_compiled_kernel_on_cuda_equals_reference(bits):
    k, n = 1024, 768
    tensors, _ = random_gptq(np.random.default_rng(bits), k, n, bits, 128, True)
    linear = gptq_linear(tensors, k, n, bits, 128, True).cuda()
    assert fused_dequant_available(linear.qweight.device)
    for dtype in (torch.float16, torch.bfloat16):
        reference, fused = _both(linear, dtype)
        assert torch.equal(_bits_of(fused), _bits_of(reference)), dtype
