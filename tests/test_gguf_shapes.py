"""A GGUF file's metadata against its own tensors (core/modeling/gguf_shapes.py), from the header alone: the
sizes transformers builds the model from must be those of the tensors that fill it, else the file is damaged,
said in words before anything is built or copied (20,000 layers of a 2-layer file took 80 s to build before
the refusal; a width a thousand times too large asked for tens of gigabytes)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from core.errors import DamagedModelError
from core.loading.load import load_model
from core.modeling.model_format import check_gguf
from test_loading import write_tiny_gguf


def refusal(path: Path) -> str:
    with pytest.raises(DamagedModelError) as info:
        check_gguf(path)
    said = str(info.value)
    assert said.startswith(f"{path.name} is damaged: its metadata ")
    assert said.endswith(". Download the file again (from where it came, or another quantisation of the model)")
    return said.removeprefix(f"{path.name} is damaged: its metadata ").partition(". Download")[0]


@pytest.mark.parametrize(
    ("sizes", "said"),
    [
        ({"block_count": 20_000}, "says the model has 20,000 layers, where the file holds the tensors of 2"),
        ({"block_count": 1}, "says the model has 1 layer, where the file holds the tensors of 2"),
        ({"block_count": 0}, "says the model has 0 layers, where the file holds the tensors of 2"),
        (
            {"embedding_length": 100_000},
            "gives embedding_length as 100,000, where its tensor token_embd.weight is 32x64",
        ),
        ({"vocab_size": 100}, "gives vocab_size as 100, where its tensor token_embd.weight is 32x64"),
        (
            {"feed_forward_length": 10_000_000},
            "gives feed_forward_length as 10,000,000, where its tensor blk.0.ffn_up.weight is 32x64",
        ),
        ({"head_count": 0}, "gives its layers 0 attention heads and 2 key-value heads"),
        ({"head_count_kv": 0}, "gives its layers 4 attention heads and 0 key-value heads"),
        ({"head_count": 3}, "gives 3 heads of width 10 for blk.0.attn_q.weight, which holds 32x32"),
        ({"head_count_kv": 3}, "gives 3 heads of width 8 for blk.0.attn_k.weight, which holds 32x16"),
        ({"context_length": 0}, "gives the model a context of 0 tokens"),
    ],
)
def test_metadata_that_sizes_the_model_otherwise_than_its_tensors_is_damaged(tmp_path, sizes, said):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, sizes=sizes)
    assert refusal(path) == said


def test_the_refusal_comes_before_the_model_is_built_at_load_and_before_an_import_copies(tmp_path):
    """At load, `load_model` refuses from the header as `check_gguf` does (it built 20,000 layers first);
    `models import` copies nothing."""
    from core.models.importing import import_model

    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, sizes={"block_count": 20_000})
    for attempt in (lambda: load_model(str(path), device="cpu"), lambda: import_model(path, tmp_path / "models")):
        with pytest.raises(DamagedModelError, match="says the model has 20,000 layers"):
            attempt()
    assert not (tmp_path / "models").exists()


def test_sound_metadata_passes_and_loads(tmp_path):
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    check_gguf(path)
    assert len(load_model(str(path), device="cpu").lm.decoder_layers) == 2


def write_moe_header(path: Path, experts_said: int, layers: Sequence[int] = (0, 1)) -> Path:
    """A Qwen3-MoE-shaped GGUF tensor list (no tensor data: the checks read the header only): 8 experts of
    inner width 16 per layer in `layers`, metadata saying `experts_said` experts."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen3moe")
    writer.add_name("Qwen3 tiny MoE")
    writer.add_block_count(len(layers))
    writer.add_embedding_length(32)
    writer.add_head_count(4)
    writer.add_head_count_kv(2)
    writer.add_key_length(16)
    writer.add_expert_count(experts_said)
    writer.add_expert_feed_forward_length(16)
    tensors = {"token_embd.weight": (64, 32)}
    for layer in layers:
        tensors |= {
            f"blk.{layer}.attn_q.weight": (64, 32),
            f"blk.{layer}.attn_k.weight": (32, 32),
            f"blk.{layer}.ffn_up_exps.weight": (8, 16, 32),
        }
    for name, shape in tensors.items():  # numpy's order (the last dimension a row), as gguf's writer takes it
        writer.add_tensor_info(name, shape, np.dtype(np.float16), int(np.prod(shape)) * 2)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return path


def test_a_mixture_of_experts_counts_its_experts_in_its_tensors(tmp_path):
    """Qwen3-MoE's experts: their count and inner width are the third and second dimensions of the stacked
    expert tensors; a count 10,000 times too large is refused, as a layer numbered past 65,535 is."""
    check_gguf(write_moe_header(tmp_path / "moe.gguf", experts_said=8))
    damaged = write_moe_header(tmp_path / "many.gguf", experts_said=80_000)
    assert refusal(damaged) == "gives expert_count as 80,000, where its tensor blk.0.ffn_up_exps.weight is 32x16x8"
    far = write_moe_header(tmp_path / "far.gguf", experts_said=8, layers=[0, 70_000])
    assert refusal(far) == "names a layer numbered past 65,535, which no model has"
