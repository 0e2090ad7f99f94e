"""A 4-bit draft repacked for torch's int4 kernel (tinygemm), checked on the CPU against torch's CPU twin of that
kernel: the repacked weights are the checkpoint's, bit for bit in bfloat16 for symmetric checkpoints and
within one rounding of the zero term for asymmetric ones, for plain groups, act-order and other group sizes;
what the kernel cannot take keeps its kernel; a whole draft model runs through it and SpecExec still emits
exactly the target's tokens."""

from __future__ import annotations

import torch

from core.offload.gptq import dequantize_reference
from core.offload.int4pack import int4_matmul, tinygemm_layout
from core.offload.synthetic_gptq import finalised_linear, random_gptq_tensors


def _symmetric(tensors: dict[str, torch.Tensor], bits: int = 4) -> dict[str, torch.Tensor]:
    """The same linear with every zero point at the middle (v1 stores 7 for 8), as symmetric GPTQ writes it."""
    from core.offload.gptq import pack_rows

    groups, words = tensors["qzeros"].shape
    zeros = torch.full((groups, words * 32 // bits), 7, dtype=torch.int64)
    return {**tensors, "qzeros": pack_rows(zeros.T, bits).T.contiguous()}


def _reference_bf16(tensors: dict[str, torch.Tensor], bits: int = 4) -> torch.Tensor:
    """W [K, N] in checkpoint row order, computed in float32 from bfloat16-rounded scales, then rounded once."""
    scales = tensors["scales"].to(torch.bfloat16)
    return dequantize_reference(tensors["qweight"], tensors["qzeros"], scales, tensors["g_idx"], bits).to(
        torch.bfloat16
    )


def _weights_through_kernel(linear) -> torch.Tensor:
    """W as the kernel multiplies it: the identity times W (one exact product per output, so no rounding of
    sums), rows in the order the linear expects its input (sorted by group for act-order)."""
    eye = torch.eye(linear.in_features, dtype=torch.bfloat16)
    return int4_matmul(eye, linear.int4)


def test_symmetric_checkpoint_is_bit_equal_in_bfloat16() -> None:
    generator = torch.Generator().manual_seed(0)
    for group in (32, 64, 128, 256):
        tensors = _symmetric(random_gptq_tensors(generator, 512, 64, 4, group, act_order=False))
        linear = finalised_linear(tensors, 512, 64, 4, group, act_order=False)
        assert linear.use_int4_kernel() and linear.qweight is None
        assert torch.equal(_weights_through_kernel(linear), _reference_bf16(tensors)), group


def test_act_order_through_the_input_permutation() -> None:
    generator = torch.Generator().manual_seed(1)
    tensors = _symmetric(random_gptq_tensors(generator, 256, 32, 4, 64, act_order=True))
    linear = finalised_linear(tensors, 256, 32, 4, 64, act_order=True)
    assert linear.mode == "perm" and linear.use_int4_kernel()
    perm = linear.perm.to(torch.int64)
    assert torch.equal(_weights_through_kernel(linear), _reference_bf16(tensors)[perm])
    x = torch.randn(5, 256, generator=generator)
    expected = x.to(torch.bfloat16).float() @ _reference_bf16(tensors).float()
    assert torch.allclose(linear(x), expected, rtol=2e-2, atol=2e-2)


def _within_zero_term_rounding(got: torch.Tensor, want: torch.Tensor, scales: torch.Tensor, group: int) -> bool:
    """Each weight is (q - 8) * s + round((8 - z) * s), rounded: a bfloat16 half-ulp of the zero term (|8 - z| <=
    8 scales), of the sum and of the reference's own rounding (each <= 15 scales) apart: 38 * s * 2^-8 at most."""
    bound = 38 * scales.float().repeat_interleave(group, dim=0) * 2**-8
    return bool(((got.float() - want.float()).abs() <= bound + 1e-12).all())


def test_asymmetric_zero_term_rounds_once() -> None:
    generator = torch.Generator().manual_seed(2)
    tensors = random_gptq_tensors(generator, 256, 64, 4, 128, act_order=False)
    linear = finalised_linear(tensors, 256, 64, 4, 128, act_order=False)
    assert linear.use_int4_kernel()
    got, want = _weights_through_kernel(linear), _reference_bf16(tensors)
    assert _within_zero_term_rounding(got, want, tensors["scales"], 128)
    assert (got != want).float().mean() < 0.25  # most weights are equal


def test_zero_offset_zero_formats_read_their_own_zeros() -> None:
    """AWQ, compressed-tensors and GPTQ v2 arrive with zero offset 0: the repacking adds the offset it is given
    (read with v1's offset of 1, every weight would be one scale off, far outside the bound)."""
    generator = torch.Generator().manual_seed(3)
    tensors = random_gptq_tensors(generator, 128, 32, 4, 32, act_order=False)
    linear = finalised_linear(tensors, 128, 32, 4, 32, act_order=False)
    linear.zero_offset = 0
    assert linear.use_int4_kernel()
    want = dequantize_reference(
        tensors["qweight"], tensors["qzeros"], tensors["scales"].to(torch.bfloat16), tensors["g_idx"], 4, zero_offset=0
    ).to(torch.bfloat16)
    assert _within_zero_term_rounding(_weights_through_kernel(linear), want, tensors["scales"], 32)


def test_large_groups_and_one_group_are_split_into_256() -> None:
    generator = torch.Generator().manual_seed(4)
    for group in (512, -1):
        tensors = _symmetric(random_gptq_tensors(generator, 1024, 16, 4, group, act_order=False))
        linear = finalised_linear(tensors, 1024, 16, 4, group, act_order=False)
        assert tinygemm_layout(4, group, linear.mode, 1024, 16) == (256, 8)
        assert linear.use_int4_kernel() and linear.int4.group_size == 256
        assert torch.equal(_weights_through_kernel(linear), _reference_bf16(tensors)), group


def test_what_the_kernel_cannot_take_keeps_its_kernel() -> None:
    assert "3-bit" in tinygemm_layout(3, 128, "groups", 256, 64)
    assert "g_idx" in tinygemm_layout(4, 128, "gather", 256, 64)
    assert "outputs" in tinygemm_layout(4, 128, "groups", 256, 60)
    assert "group size" in tinygemm_layout(4, 96, "groups", 384, 64)
    generator = torch.Generator().manual_seed(5)
    tensors = random_gptq_tensors(generator, 96, 64, 3, 32, act_order=False)
    linear = finalised_linear(tensors, 96, 64, 3, 32, act_order=False)
    x = torch.randn(2, 96, generator=generator)
    before = linear(x)
    assert not linear.use_int4_kernel() and linear.int4 is None
    assert torch.equal(linear(x), before)
