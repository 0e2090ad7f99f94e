"""Offloading through the public entry points: a GPTQ folder loads through load_model and the CLI, and
`--offload on` over a 16-bit folder gives the same tokens as the in-memory model."""

from __future__ import annotations

import json

import pytest
import torch

from core.errors import InvalidSettingError
from core.loading.load import load_model
from core.offload.offloaded_lm import OffloadedLM
from core.loading.offload_settings import OffloadSettings
from core.modeling.tree_mask import additive_mask, causal_visibility
from conftest import make_word_tokenizer, run_cli
from test_cli import save_tiny_model
from test_gptq import write_gptq_checkpoint


def test_gptq_folder_loads_offloaded_through_load_model(tmp_path):
    reference = write_gptq_checkpoint(tmp_path, bits=4, group_size=16, act_order=True)
    make_word_tokenizer().save_pretrained(tmp_path)
    loaded = load_model(str(tmp_path), dtype="float64", device="cpu")
    assert isinstance(loaded.lm, OffloadedLM)
    assert loaded.lm.eos_token_ids == (0,)
    ids = torch.tensor([1, 5, 9, 2])

    def logits(model):
        mask = additive_mask(causal_visibility(0, 4, "cpu"), torch.float64)
        return model.forward(ids, torch.arange(4), mask, model.new_cache())

    assert torch.allclose(logits(loaded.lm), logits(reference), atol=1e-9)


@pytest.mark.parametrize("role", ["target", "draft"])
def test_a_4bit_folder_ends_answers_on_the_tokens_its_generation_config_names(tmp_path, role):
    write_gptq_checkpoint(tmp_path, bits=4, group_size=16, act_order=False)
    make_word_tokenizer().save_pretrained(tmp_path)
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 900000]}))
    loaded = load_model(str(tmp_path), dtype="float32", device="cpu", role=role)
    assert loaded.lm.eos_token_ids == (
        7,
        0,
    )  # the file's id in the vocabulary, then config.json's (and the tokenizer's)


def test_offload_setting_validation():
    bad_budgets = (dict(vram_budget_gb=0), dict(vram_budget_gb=float("inf")), dict(vram_budget_gb=float("nan")))
    for kwargs in (dict(mode="sometimes"), *bad_budgets, dict(resident_layers=-1)):
        with pytest.raises(InvalidSettingError):
            OffloadSettings(**kwargs)


def test_cli_offload_on_equals_off(tmp_path, capsys):
    target = save_tiny_model(tmp_path / "target", seed=0)
    draft = save_tiny_model(tmp_path / "draft", seed=1)
    outputs = {}
    for mode in ("on", "off"):
        result = run_cli(
            capsys,
            "generate",
            "--target",
            str(target),
            "--draft",
            str(draft),
            "--prompt",
            "w5 w6",
            "--offload",
            mode,
            "--temperature",
            "0.9",
            "--seed",
            "2",
            "--max-new-tokens",
            "10",
            "--budget",
            "8",
            "--json",
        )
        assert result.returncode == 0, result.stderr
        outputs[mode] = json.loads(result.stdout)
    assert outputs["on"]["token_ids"] == outputs["off"]["token_ids"]


def test_cli_bad_resident_layers(capsys):
    result = run_cli(capsys, "generate", "--prompt", "hi", "--resident-layers", "many")
    assert result.returncode == 2 and "resident-layers" in result.stderr and "Traceback" not in result.stderr
