"""A 4-bit GPTQ draft: written from a float model by core/loading/rtn_quant.py's round-to-nearest packer, loaded whole
onto the device (no streaming) by `load_model(..., role="draft")`, and SpecExec with it stays exact: the same
tokens as plain sequential sampling of the target with the same seed, in float32 - through the eager route
and through the fused small-batch kernel (run by Triton's interpreter on the CPU)."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from core.modeling.causal_lm import CausalLM
from core.errors import InsufficientHostMemoryError, InvalidSettingError
from core.loading.load import load_model
from core.decoding.settings import SamplingParams, TreeSettings
from core.offload.gptq import GPTQLinear, dequantize_reference
from core.offload.loader import load_on_device
from core.offload.offloaded_lm import OffloadedLM
from core.loading.rtn_quant import gptq_rtn_tensors, save_gptq_checkpoint
from core.offload.gptq_matmul import fused_matmul_available
from core.planning.draft_kernel import TINYGEMM
from core.system.env import DRAFT_KERNEL_ENV
from core.modeling.tree_mask import additive_mask, causal_visibility
from conftest import make_tiny_llama, make_word_tokenizer, noisy_copy, sharpen, torch_threads
from test_exactness import run_sequential, run_specexec


@pytest.mark.parametrize(("bits", "group_size"), [(4, 32), (4, -1), (8, 16), (2, 64)])
def test_rtn_gptq_tensors_round_to_nearest(bits, group_size):
    torch.manual_seed(bits)
    weight = torch.randn(48, 64, dtype=torch.float64)
    tensors = gptq_rtn_tensors(weight, bits, group_size)
    restored = dequantize_reference(
        tensors["qweight"], tensors["qzeros"], tensors["scales"], tensors["g_idx"], bits, dtype=torch.float64
    ).T  # [out, in]
    size = 64 if group_size == -1 else group_size
    scale = tensors["scales"].double().T.repeat_interleave(size, dim=1)  # [out, in]
    levels = 2**bits - 1
    # symmetric: the grid is scale * [-2^(bits-1), 2^(bits-1) - 1], so the largest positive value may clip
    top = scale * (2 ** (bits - 1) - 1)
    expected_error = torch.where(weight > top + scale / 2, weight - top, scale / 2)
    assert ((restored - weight).abs() <= expected_error * (1 + 1e-9)).all()
    assert tensors["scales"].dtype == torch.float16 and torch.equal(
        tensors["scales"].double(), (2 * weight.abs().T.reshape(-1, size, 48).amax(1) / levels).half().double()
    )


def test_rtn_gptq_tensors_refuse_shapes_that_do_not_pack():
    with pytest.raises(ValueError, match="groups of 32"):
        gptq_rtn_tensors(torch.zeros(16, 48), 4, 32)


def _gptq_draft_folder(folder, draft: CausalLM, group_size: int = 16):
    assert save_gptq_checkpoint(draft.model, folder, bits=4, group_size=group_size) == 2 * 7
    make_word_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def float32_pair() -> tuple[CausalLM, CausalLM]:
    target = sharpen(make_tiny_llama(0, dtype=torch.float32), 8.0)
    return target, noisy_copy(target)


def test_gptq_draft_loads_whole_on_the_device_and_computes_its_dequantised_weights(tmp_path, float32_pair):
    _, draft = float32_pair
    folder = _gptq_draft_folder(tmp_path, draft)
    loaded = load_model(str(folder), dtype="float64", device="cpu", role="draft")
    lm = loaded.lm
    assert type(lm) is CausalLM and not isinstance(lm, OffloadedLM)
    linears = [m for m in lm.decoder_layers.modules() if isinstance(m, (GPTQLinear, nn.Linear))]
    assert len(linears) == 14 and all(isinstance(m, GPTQLinear) for m in linears)
    assert all(t.device.type == "cpu" and not t.is_meta for t in list(lm.model.parameters()) + list(lm.model.buffers()))
    # the same model as a float64 transformers model holding the dequantised weights gives the same logits
    reference = make_tiny_llama(0)
    assert json.loads((folder / "config.json").read_text())["quantization_config"]["bits"] == 4
    with torch.no_grad():
        for name, module in reference.model.named_modules():
            if name.startswith("model.layers.") and isinstance(module, nn.Linear):
                gptq = lm.model.get_submodule(name)
                module.weight.copy_(
                    dequantize_reference(gptq.qweight, gptq.qzeros, gptq.scales, gptq.g_idx, 4, dtype=torch.float64).T
                )
        for name, parameter in reference.model.named_parameters():
            if not name.endswith("proj.weight"):
                parameter.copy_(draft.model.get_parameter(name).half().double())
    ids = torch.tensor([1, 5, 9, 33, 2])
    mask = additive_mask(causal_visibility(0, 5, "cpu"), torch.float64)
    torch.testing.assert_close(
        lm.forward(ids, torch.arange(5), mask, lm.new_cache()),
        reference.forward(ids, torch.arange(5), mask, reference.new_cache()),
        rtol=1e-12,
        atol=1e-12,
    )


def test_a_draft_role_never_offloads_and_a_target_still_does(tmp_path, float32_pair):
    folder = _gptq_draft_folder(tmp_path, float32_pair[1])
    assert isinstance(load_model(str(folder), dtype="float32", device="cpu").lm, OffloadedLM)
    with pytest.raises(InvalidSettingError, match="role"):
        load_model(str(folder), device="cpu", role="helper")


def test_gptq_draft_that_does_not_fit_is_refused_before_loading(tmp_path, float32_pair):
    folder = _gptq_draft_folder(tmp_path, float32_pair[1])
    with pytest.raises(InsufficientHostMemoryError, match="weights of"):
        load_on_device(str(folder), "cpu", torch.float32, available_bytes=1024)


@pytest.mark.parametrize("kernel", ["eager", "interpreted fused kernel", "torch's int4 kernel (CPU twin)"])
def test_specexec_with_a_4bit_draft_equals_sequential(tmp_path, monkeypatch, float32_pair, kernel):
    """float32: the 4-bit draft changes which tokens the tree holds, never which tokens are emitted (torch's int4
    kernel even multiplies in bfloat16)."""
    if kernel == "interpreted fused kernel":
        pytest.importorskip("triton")
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    if kernel.startswith("torch's int4"):
        monkeypatch.setenv(DRAFT_KERNEL_ENV, TINYGEMM)
    assert fused_matmul_available(torch.zeros(1, 32)) == (kernel == "interpreted fused kernel")
    target, draft = float32_pair
    folder = _gptq_draft_folder(tmp_path, draft, group_size=32)
    gptq_draft = load_model(str(folder), dtype="float32", device="cpu", role="draft").lm
    repacked = [m.int4 is not None for m in gptq_draft.model.modules() if isinstance(m, GPTQLinear)]
    assert repacked == [kernel.startswith("torch's int4")] * 14
    with torch_threads(1):
        for seed, temperature in ((0, 0.6), (1, 1.0), (2, 0.0)):
            params = SamplingParams(temperature=temperature, top_p=0.9, seed=seed)
            expected = run_sequential(target, params, 24)
            got, steps, _ = run_specexec(target, gptq_draft, params, TreeSettings(32, 8, 8), 24)
            assert got == expected, (kernel, seed)
            assert len(got) / len(steps) > 1.5  # the 4-bit draft is still a useful draft


def test_a_forced_kernel_the_device_cannot_run_is_refused(tmp_path, monkeypatch, float32_pair):
    monkeypatch.setenv(DRAFT_KERNEL_ENV, "fused")
    folder = _gptq_draft_folder(tmp_path, float32_pair[1], group_size=32)
    with pytest.raises(InvalidSettingError, match=DRAFT_KERNEL_ENV):
        load_model(str(folder), dtype="float32", device="cpu", role="draft")
