"""The GPU proxies (core/bench/device_trace.py) and the ceilings they hold the decoding loop to: at most 6 host syncs
per SpecExec pass whatever the tree, none inside a draft forward, on a resident and on an offloaded target."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
import torch

from core.bench.pass_trace import PassTrace, traced_stream
from core.bench.device_trace import DeviceTrace
from core.decoding.generation import generate
from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
from core.offload import load_offloaded
from core.decoding.timing import synchronize
from conftest import make_word_tokenizer, run_cli
from test_cli import save_tiny_model

MAX_SYNCS_PER_PASS = 6
PROMPT = [1, 17, 5, 33, 8, 2, 40]


def test_tracer_counts_what_would_block_a_gpu_and_nothing_on_the_host():
    device_tensor, host = torch.arange(6.0), torch.arange(6.0)
    trace = DeviceTrace()
    trace.mark_device(device_tensor)
    with trace:
        int(host[1]), host.tolist(), host[host > 2], host + 1  # host work: free
        assert trace.snapshot().sync_count == 0 and trace.snapshot().kernels == 0
        int(device_tensor[1])
        device_tensor.tolist()
        torch.nonzero(device_tensor)
        device_tensor[device_tensor > 2]
        torch.where(device_tensor > 2)
        torch.equal(device_tensor, device_tensor)
        device_tensor[torch.tensor([0, 2])]  # a host index: copied to the device, blocking
        host.to("cpu")  # host to device, blocking
        synchronize("cpu")  # a whole-device wait on CUDA
        reads = trace.snapshot()
        view = device_tensor[1:4].unsqueeze(0)  # views: no kernel
        pinned = host.to("cpu", non_blocking=True)  # asynchronous (to_device pins it on CUDA)
        total = (view * 2 + pinned[:3]).sum()  # mul, add, sum: three kernels on the device
        made = torch.zeros(3, device="cpu")  # an explicit device: a device tensor
        float(total), bool(made[0] == 0)
    after = trace.snapshot()
    kinds = " ".join(reads.syncs)
    for kind in (
        "[__int__]",
        "[tolist]",
        "[nonzero]",
        "[boolean-mask indexing]",
        "[where(condition)]",
        "[equal]",
        "[host operand of index]",
        "[blocking host-to-device copy]",
        "[whole-device synchronize]",
    ):
        assert kind in kinds, kind
    assert all(site.startswith("tests/test_trace.py:") for site in reads.syncs)
    assert reads.h2d_bytes == 2 * 8 + 6 * 4  # the index, then the host tensor
    new = after - reads
    assert new.sync_count == 2 and new.h2d_bytes == 6 * 4 and new.kernels >= 4


def endless(model):
    """The same model (weights, caches and streamer shared) with no end-of-sequence token."""
    model = copy.copy(model)
    model.eos_token_ids = ()
    return model


ANSWER_TOKENS = 12  # several passes for every tree below; each traced op costs ~0.1 ms of the tracer's Python


def _trace_specexec(target, draft, params, tree, max_new_tokens=ANSWER_TOKENS) -> tuple[PassTrace, list[int]]:
    """Traces SpecExec on `target` with its end-of-sequence tokens ignored, so that every configuration makes
    several passes whatever the sampled tokens are."""
    totals = PassTrace()
    tokenizer = make_word_tokenizer()
    target = endless(target)
    # a fresh adaptive-depth policy (one per pair of models, learning across answers), so that what a trace
    # drafts does not hang on the tests this process ran before it; the first passes draft in full
    draft = copy.deepcopy(draft)
    chunks = list(
        traced_stream(
            target,
            draft,
            tokenizer,
            PROMPT,
            params,
            DecodingSettings(method="specexec", tree=tree, max_new_tokens=max_new_tokens),
            totals,
        )
    )
    return totals, [t for c in chunks for t in c.token_ids]


TREES = [
    TreeSettings(1, 1, 1),
    TreeSettings(16, 4, 4),
    TreeSettings(128, 32, 8),
    TreeSettings(256, 32, 32, draft_top_p=True),
    TreeSettings(64, 16, 16, adaptive_depth=False),
]
SAMPLING = [
    SamplingParams(temperature=0.0),
    SamplingParams(temperature=0.8, top_p=0.9, seed=4),
    SamplingParams(temperature=1.0, top_k=7, repetition_penalty=1.3, seed=5),
]


@pytest.mark.parametrize("tree", TREES, ids=lambda t: f"K{t.budget}-D{t.max_depth}-B{t.expand}")
@pytest.mark.parametrize("params", SAMPLING, ids=["greedy", "top-p", "penalty"])
def test_specexec_passes_stay_under_the_sync_ceilings(tiny_target, tiny_draft, tree, params, one_torch_thread):
    totals, tokens = _trace_specexec(tiny_target, tiny_draft, params, tree)
    summary = totals.summary()
    assert totals.passes >= 2
    assert summary["max_syncs_in_a_pass"] <= MAX_SYNCS_PER_PASS, summary["sync_sites_per_pass"]
    assert (
        totals.counts.draft_syncs == 0
        and totals.counts.search_syncs == 0
        and totals.counts.draft_forwards > 0  # a pass may draft nothing where the policy finds it not worth it
    )
    assert summary["kernels_per_draft_forward"] > 0
    plain = generate(
        endless(tiny_target),
        None,
        make_word_tokenizer(),
        PROMPT,
        params,
        DecodingSettings(method="sequential", max_new_tokens=ANSWER_TOKENS),
    )
    assert tokens == plain.token_ids  # the GPU path the trace runs is exact too


def test_offloaded_target_stays_under_the_ceiling_and_streams_its_layers(
    tmp_path, tiny_target, tiny_draft, one_torch_thread
):
    tiny_target.model.save_pretrained(str(tmp_path))
    offloaded = load_offloaded(str(tmp_path), "cpu", torch.float64, resident_layers=0, n_slots=1, stream_on_cpu=True)
    assert offloaded.streamer.bytes_streamed_per_pass > 0
    params = SamplingParams(temperature=0.8, seed=3)
    totals, tokens = _trace_specexec(offloaded, tiny_draft, params, TreeSettings(32, 8, 8))
    summary = totals.summary()
    assert summary["max_syncs_in_a_pass"] <= MAX_SYNCS_PER_PASS, summary["sync_sites_per_pass"]
    assert totals.counts.draft_syncs == 0
    # every streamed layer is copied once per pass (asynchronously: no sync for it)
    assert summary["h2d_bytes_per_pass"] >= offloaded.streamer.bytes_streamed_per_pass
    assert not any("blocking" in site for site in totals.counts.syncs)
    resident, resident_tokens = _trace_specexec(tiny_target, tiny_draft, params, TreeSettings(32, 8, 8))
    assert tokens == resident_tokens
    # only token ids cross on a resident target, and the draws' keyed noise (made on the host, one copy a pass)
    from core.decoding.sampling import draw_slots

    noise_bytes = (32 + 1) * draw_slots(tiny_target.model.config.vocab_size) * 8  # at most one draw per tree row
    assert resident.summary()["h2d_bytes_per_pass"] < 1000 + noise_bytes


@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("trace-models")
    return str(save_tiny_model(root / "target", seed=0)), str(save_tiny_model(root / "draft", seed=1))


def test_bench_trace_command_reports_both_targets(tiny_folders, capsys):
    target, draft = tiny_folders
    result = run_cli(
        capsys,
        "bench",
        "trace",
        "--target",
        target,
        "--draft",
        draft,
        "--budgets",
        "4,16",
        "--passes",
        "2",
        "--offload-resident-layers",
        "1",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["rows"]
    assert [(r["target"], r["budget"]) for r in rows] == [
        ("resident", 4),
        ("resident", 16),
        ("offloaded", 4),
        ("offloaded", 16),
    ]
    for row in rows:
        assert row["passes"] == 2 and row["max_syncs_in_a_pass"] <= MAX_SYNCS_PER_PASS
        assert row["syncs_per_draft_forward"] == 0 and row["kernels_per_draft_forward"] > 0
    assert all(r["h2d_bytes_per_pass"] > 10_000 for r in rows if r["target"] == "offloaded")


def test_bench_acceptance_adds_the_trace_columns(tiny_folders, tmp_path, capsys):
    target, draft = tiny_folders
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"text": "w5 w6 w7"}) + "\n")
    result = run_cli(
        capsys,
        "bench",
        "acceptance",
        "--target",
        target,
        "--draft",
        draft,
        "--prompts",
        str(prompts),
        "--budgets",
        "8",
        "--methods",
        "specexec",
        "--max-new-tokens",
        "10",
        "--trace",
        "--no-adaptive-depth",
        "--json",
    )
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(result.stdout)["rows"]
    assert 0 < row["syncs_per_pass"] <= MAX_SYNCS_PER_PASS
    assert row["kernels_per_draft_forward"] > 0 and row["kernels_per_pass"] > row["kernels_per_draft_forward"]
    assert row["h2d_bytes_per_pass"] > 0


@pytest.mark.parametrize(
    "tree", [TreeSettings(16, 4, 4), TreeSettings(64, 16, 16, adaptive_depth=False)], ids=["K16", "K64-fixed"]
)
def test_the_overlap_adds_no_host_sync_to_a_pass(tiny_target, tiny_draft, tree, one_torch_thread):
    """The shadow search and the keep (issue 39) read nothing: a pass with the overlap on syncs no more often
    than one without, its draft forwards (the shadow's included) never, and the tokens stay the sequential ones."""
    params = SamplingParams(temperature=0.8, top_p=0.9, seed=4)
    off, off_tokens = _trace_specexec(tiny_target, tiny_draft, params, tree)
    on, on_tokens = _trace_specexec(
        tiny_target, tiny_draft, params, dataclasses.replace(tree, overlap=True, shadow_forwards=3)
    )
    assert on_tokens == off_tokens
    assert on.summary()["max_syncs_in_a_pass"] <= off.summary()["max_syncs_in_a_pass"] <= MAX_SYNCS_PER_PASS
    assert set(on.counts.syncs) <= set(off.counts.syncs), on.counts.syncs
    assert on.counts.draft_syncs == 0 and on.summary()["shadow_draft_forwards"] > 0
    assert on.summary()["critical_path_draft_forwards"] > 0
    # the search's own kernels outside its forwards: the shadow's forwards run after the search, so they are
    # draft kernels outside it, not subtracted from it (they were, and with a real draft it came out negative)
    assert off.counts.search_draft_kernels == off.counts.draft_kernels
    assert 0 < on.counts.search_draft_kernels < on.counts.draft_kernels


def _plain_answer_trace(target, monkeypatch, fix: str, tokens: int = 40) -> tuple[PassTrace, list[int]]:
    from core.system.env import ATTENTION_FIX_ENV

    monkeypatch.setenv(ATTENTION_FIX_ENV, fix)
    totals = PassTrace()
    chunks = list(
        traced_stream(
            endless(target),
            None,
            make_word_tokenizer(),
            PROMPT,
            SamplingParams(temperature=0.8, seed=2),
            DecodingSettings(method="sequential", max_new_tokens=tokens),
            totals,
        )
    )
    return totals, [t for c in chunks for t in c.token_ids]


def test_bucketed_columns_give_a_plain_answer_a_few_attention_shapes_and_the_same_tokens(
    tiny_target, monkeypatch, one_torch_thread
):
    """Issue 37: without buckets every token's keys are one row longer, a new shape for attention each time
    (cuDNN plans each anew on a GPU); with them a whole answer touches one shape per column bucket and kind of
    forward, and samples the same tokens (the added columns are masked)."""
    before, before_tokens = _plain_answer_trace(tiny_target, monkeypatch, "0")
    after, after_tokens = _plain_answer_trace(tiny_target, monkeypatch, "1")
    assert after_tokens == before_tokens
    assert before.summary()["attention_shapes_whole_answer"] >= 40  # the prefill, then one per token
    assert after.summary()["attention_shapes_whole_answer"] <= 2  # the prefill and the one-token step
    assert all("k [1, 2, 256, 8]" in key for key in after.whole.attention_shapes)  # the first bucket: 256 columns
    # with the fix every traced step is the windowed one-token step a CUDA graph replays on CUDA for a resident
    # target: its decoder stack, most of a token's kernels, becomes a few launches
    assert before.counts.step_forwards == 0 and after.counts.step_forwards == after.passes
    summary = after.summary()
    assert summary["kernels_per_token_step_graphs"] < summary["kernels_per_token"] / 4


def test_draw_noise_is_made_on_the_host_and_copied_once(tiny_target):
    """The keyed noise of a pass costs no device kernel and no host sync: one asynchronous copy."""
    from core.decoding.keyed_random import STREAM_TOKEN, keyed_gumbels
    from core.decoding.sampling import draw_slots, position_noise

    trace = DeviceTrace()
    trace.mark_model(tiny_target)
    with trace:
        noise = position_noise(7, 100, 3, 1000, tiny_target.device)
    assert trace.counts.kernels == 0 and trace.counts.sync_count == 0
    assert trace.counts.h2d_bytes == 3 * draw_slots(1000) * 8 and trace.is_on_device(noise)
    assert torch.equal(noise, keyed_gumbels(7, torch.arange(100, 103), STREAM_TOKEN, draw_slots(1000)))
