"""The GPU path run with the meta device standing in for the GPU (issue 31): shapes only, and the same rules
as CUDA for what a GPU would trip on. An op that mixes a meta tensor with a host tensor raises (a device
mismatch), and reading a value raises (a host sync). So a SpecExec pass on meta models must get through the
draft search, the target's tree pass and the verification walk, and stop exactly at a read the design
names: the pass's one read (`_read_pass`), or with a grammar the grammar's own reads of the tree. Resident
and offloaded targets, 16-bit and 4-bit drafts, grammar on and off, budgets 16 and 256; and the cost
model's timed forwards, which read nothing."""

from __future__ import annotations

import time
import traceback

import pytest
import torch

from conftest import make_tiny_llama, make_word_tokenizer
from core.decoding.autotune.cost_model import _measure_curve
from core.modeling.causal_lm import CausalLM
from core.decoding.constraints import GrammarConstraint, GrammarSpec
from core.decoding.draft_search import DraftSearch
from core.decoding.decode_state import DecodeState
from core.decoding.generation import stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
from core.decoding.methods.sequential import sequential_steps
from core.decoding.methods.step import OutputControls
from core.offload import load_offloaded
from core.offload.loader import load_on_device
from core.loading.rtn_quant import save_gptq_checkpoint

META = torch.device("meta")
# (file, function) of the reads the design names; anything else that reads on a GPU would stall it
DESIGNATED_READS = {
    ("core/decoding/methods/specexec.py", "_read_pass"),
    ("core/decoding/constraints.py", "tree_allowed"),
    ("core/decoding/constraints.py", "child_allowed"),
    ("core/decoding/sampling.py", "sample_token"),
}
PROMPT = [1, 17, 5, 33, 8, 2, 40]


def _on_meta(model: CausalLM) -> CausalLM:
    model.model.to(META)
    return model


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("meta-models")
    target = make_tiny_llama(0, dtype=torch.float32)
    target.model.config.tie_word_embeddings = True  # an offloaded target then keeps its embedding on the device
    target.model.tie_weights()
    target.model.save_pretrained(root / "target")
    draft = make_tiny_llama(1, dtype=torch.float32)
    save_gptq_checkpoint(draft.model, root / "draft-4bit", bits=4, group_size=16)
    make_word_tokenizer().save_pretrained(root / "draft-4bit")
    return root


def _target(kind: str, folders) -> CausalLM:
    if kind == "resident":
        return _on_meta(make_tiny_llama(0, dtype=torch.float32))
    return load_offloaded(
        str(folders / "target"),
        "meta",
        torch.float32,
        vram_budget_bytes=10**9,
        resident_layers=1,
        n_slots=1,
        stream_on_cpu=True,
    )


def _draft(kind: str, folders) -> CausalLM:
    if kind == "16-bit":
        return _on_meta(make_tiny_llama(1, dtype=torch.float32))
    return _on_meta(load_on_device(str(folders / "draft-4bit"), "cpu", torch.float32))


def _first_stop(run) -> tuple[str, str]:
    """(file, function) of the innermost project frame of the error `run` raises."""
    with pytest.raises((NotImplementedError, RuntimeError)) as caught:
        run()
    frames = [f for f in traceback.extract_tb(caught.value.__traceback__) if "/core/" in f.filename]
    frame = frames[-1]
    return frame.filename[frame.filename.index("core/") :], frame.name


@pytest.mark.parametrize("budget", [16, 256])
@pytest.mark.parametrize("grammar", [False, True], ids=["no-grammar", "grammar"])
@pytest.mark.parametrize("draft_kind", ["16-bit", "4-bit"])
@pytest.mark.parametrize("target_kind", ["resident", "offloaded"])
def test_a_pass_on_meta_mixes_no_devices_and_reads_only_where_designed(
    folders, target_kind, draft_kind, grammar, budget
):
    target, draft = _target(target_kind, folders), _draft(draft_kind, folders)
    assert target.device == draft.device == META
    tokenizer = make_word_tokenizer()
    controls = None
    if grammar:
        from tokenizers import decoders

        tokenizer.backend_tokenizer.decoder = decoders.ByteLevel()  # llguidance reads tokens' bytes through it
        spec = GrammarSpec("lark", 'start: ("w5" | "w7" | "w9")+')  # words of the tiny models' vocabulary
        controls = OutputControls(grammar=GrammarConstraint(spec, tokenizer, target.vocab_size, target.eos_token_ids))
    settings = DecodingSettings(
        method="specexec", tree=TreeSettings(budget, 8, 8, adaptive_depth=False), max_new_tokens=16
    )
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=3)
    stop = _first_stop(
        lambda: list(stream_generate(target, draft, tokenizer, PROMPT, params, settings, controls=controls))
    )
    expected = (
        ("core/decoding/constraints.py", "child_allowed")
        if grammar
        else ("core/decoding/methods/specexec.py", "_read_pass")
    )
    assert stop == expected and stop in DESIGNATED_READS


@pytest.mark.parametrize("budget", [16, 256])
@pytest.mark.parametrize("target_kind", ["resident", "offloaded"])
def test_an_overlapped_pass_on_meta_mixes_no_devices_and_reads_only_at_the_pass_read(
    folders, target_kind, budget, monkeypatch
):
    """The overlapped pass (issue 39): the search, the target's pass, the walk and then the shadow search growing
    the same search past its budget, all without a read or a device mix, up to the pass's one read."""
    target, draft = _target(target_kind, folders), _draft("4-bit", folders)
    tree = TreeSettings(budget, 8, 8, adaptive_depth=False, overlap=True, shadow_forwards=3)
    settings = DecodingSettings(method="specexec", tree=tree, max_new_tokens=16)
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=3)
    grown = []
    real_grow = DraftSearch.grow

    def grow(search, budget, forwards):  # count the shadow's forwards (the search's own grow comes first)
        made = real_grow(search, budget, forwards)
        grown.append(made)
        return made

    monkeypatch.setattr(DraftSearch, "grow", grow)
    stop = _first_stop(lambda: list(stream_generate(target, draft, make_word_tokenizer(), PROMPT, params, settings)))
    assert stop == ("core/decoding/methods/specexec.py", "_read_pass")
    assert grown[-1] == 3  # the shadow's forwards ran before the read


@pytest.mark.parametrize("target_kind", ["resident", "offloaded"])
def test_the_cost_models_forwards_read_nothing_on_meta(folders, target_kind):
    target, draft = _target(target_kind, folders), _draft("4-bit", folders)
    far = time.perf_counter() + 3600
    assert [size for size, _ in _measure_curve(target, (1, 16, 64), far, draft=False).points] == [1, 16, 64]
    assert [width for width, _ in _measure_curve(draft, (1, 8, 32), far, draft=True).points] == [1, 8, 32]


@pytest.mark.parametrize("target_kind", ["resident", "offloaded"])
def test_a_plain_step_on_meta_mixes_no_devices_and_reads_only_its_token(folders, target_kind, monkeypatch):
    """Issue 37: plain decoding's one-token step, windowed for a resident target (the forward a CUDA graph
    captures: core.decoding.captured_forward.run_step_forward) and as before for a streaming one, gets to the
    step's one read, the sampled token, with nothing read or mixed on the way."""
    import core.decoding.methods.sequential as sequential

    target = _target(target_kind, folders)
    steps = []
    real_step = sequential.run_step_forward
    monkeypatch.setattr(sequential, "run_step_forward", lambda *args: steps.append(args) or real_step(*args))
    state = DecodeState.fresh(PROMPT, target, None)
    target.extend(torch.tensor(PROMPT[:-1], device=META), state.target_cache)  # the prompt but its last token
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=3)
    stop = _first_stop(lambda: next(sequential_steps(state, target, params, 4)))
    assert stop == ("core/decoding/sampling.py", "sample_token") and stop in DESIGNATED_READS
    assert len(steps) == (1 if target_kind == "resident" else 0)  # the offloaded target streams a layer
    assert state.target_cache.length == len(PROMPT)
