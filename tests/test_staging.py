"""The pin budget and the staging ring (issue 40): the limit parsed (hostile values refused), WSL2 recognised,
the budget stopping at the first refusal, the ring's fill order and slot reuse, and offloaded decoding whose
tokens are the same whether every streamed layer stays pinned or stages through the ring. All on the CPU:
the ring runs there with the same code, its copies synchronous."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig

from core.decoding.decode_state import DecodeState
from core.decoding.methods.specexec import specexec_steps
from core.decoding.settings import SamplingParams, TreeSettings
from core.errors import InvalidSettingError
from core.offload import load_offloaded
from core.offload.layout import layer_layout
from core.offload.offloaded_lm import PinningReport
from core.offload.pin_budget import PinBudget, lock_on_cpu
from core.offload.schedule import Copy
from core.offload.staging import StagingRing
from core.offload.weight_store import HostWeightStore
from core.planning.pinning import (
    WSL_LOCKABLE_BYTES,
    is_wsl,
    lockable_bytes,
    parse_pin_limit,
    pin_limit_from_env,
    platform_name,
    ring_depth,
    staged_rate,
)
from core.system.env import PIN_LIMIT_ENV

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WSL_VERSION = "Linux version 5.15.167.4-microsoft-standard-WSL2 (root@f9c826d3017f) (gcc (GCC) 11.2.0) #1 SMP"
NATIVE_VERSION = "Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103) (x86_64-linux-gnu-gcc-13) #49-Ubuntu SMP"


# --- the limit, the platform, the ring's depth (pure) ---------------------------------------------------


def test_pin_limit_in_gigabytes():
    assert parse_pin_limit("2") == 2_000_000_000
    assert parse_pin_limit(" 0.5 ") == 500_000_000
    assert parse_pin_limit("0") == 0
    assert parse_pin_limit(None) is None and parse_pin_limit("  ") is None
    assert pin_limit_from_env({PIN_LIMIT_ENV: "1.5"}) == 1_500_000_000
    assert pin_limit_from_env({}) is None


@pytest.mark.parametrize(
    "text", ["abc", "-1", "nan", "inf", "-inf", "1e400", "2GB", "1e7", "0x10", "\x00", "1,5", "9" * 5000]
)
def test_hostile_pin_limits_are_refused_in_words(text):
    with pytest.raises(InvalidSettingError, match=f"{PIN_LIMIT_ENV} must be a number of gigabytes"):
        parse_pin_limit(text)
    with pytest.raises(InvalidSettingError):
        pin_limit_from_env({PIN_LIMIT_ENV: text})


def test_wsl2_is_recognised_and_its_cap_planned():
    assert is_wsl(WSL_VERSION) and not is_wsl(NATIVE_VERSION)
    assert platform_name("Linux", True) == "WSL2" and platform_name("Linux", False) == "Linux"
    assert lockable_bytes("Linux", True, 64 * 1024**3) == WSL_LOCKABLE_BYTES
    assert lockable_bytes("Windows", False, 64 * 1024**3) == 32 * 1024**3
    assert lockable_bytes("Linux", False, 64 * 1024**3) is None
    assert lockable_bytes("Linux", False, 64 * 1024**3, limit=10**9) == 10**9
    # a budget measured on the machine wins over the platform's estimate, never over a person's limit
    assert lockable_bytes("Windows", False, 64 * 1024**3, measured=3 * 1024**3) == 3 * 1024**3
    assert lockable_bytes("Windows", False, 64 * 1024**3, limit=10**9, measured=3 * 1024**3) == 10**9


def test_ring_depth_follows_the_copy_and_fill_rates():
    assert ring_depth(25e9, 30e9) == 2  # one worker fills faster than the copy engine moves
    assert ring_depth(25e9, 12.5e9) == 3
    assert ring_depth(25e9, 8e9) == 4 and ring_depth(50e9, 1e9) == 4  # capped: more slots, no more speed
    assert ring_depth(0.0, 8e9) == 2  # not measured (the CPU): the least
    assert staged_rate(25e9, 8e9, 4) == 24e9 and staged_rate(25e9, 30e9, 2) == 25e9


# --- the budget ------------------------------------------------------------------------------------------


def test_budget_stops_at_the_first_refusal_and_never_asks_again():
    asked = []

    def refuse_the_third(buffer: torch.Tensor) -> bool:
        asked.append(buffer.numel())
        return len(asked) < 3

    budget = PinBudget(None, refuse_the_third)
    results = [budget.lock(torch.empty(100, dtype=torch.uint8)) for _ in range(5)]
    assert results == [True, True, False, False, False]
    assert len(asked) == 3 and budget.refused and budget.locked_bytes == 200


def test_limit_caps_the_store_but_not_the_ring_slots():
    budget = PinBudget(250, lock_on_cpu)
    assert budget.lock(torch.empty(100, dtype=torch.uint8), within_limit=False)  # a ring slot
    assert budget.lock(torch.empty(200, dtype=torch.uint8))
    assert not budget.lock(torch.empty(100, dtype=torch.uint8)) and budget.limited and not budget.refused
    assert budget.locked_bytes == 300 and budget.store_bytes == 200


# --- the ring --------------------------------------------------------------------------------------------


def _store(layers: int) -> HostWeightStore:
    config = LlamaConfig(
        hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=layers
    )
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    store = HostWeightStore([layer_layout(layer) for layer in model.model.layers], pin=False)
    for index in range(layers):
        store.layer_bytes(index).fill_(index + 1)  # each layer's bytes say which layer they are
    return store


def test_ring_fills_ahead_in_order_and_reuses_its_slots():
    store = _store(5)
    ring = StagingRing(store.layouts[0].nbytes, 3, PinBudget(None, lock_on_cpu), record_trace=True)
    ring.start(store.layer_bytes, (1, 2, 4), torch.device("cpu"))
    assert ring.trace == [(1, 0), (2, 1), (4, 2)]  # filled ahead before anything asked
    seen = []
    for layer in (1, 2, 4) * 3:
        slot, data = ring.acquire(layer)
        assert torch.equal(data, store.layer_bytes(layer))
        seen.append(slot)
        ring.release(slot)
    assert seen == [0, 1, 2] * 3  # slots reused in order
    # each release refilled its slot with the layer three places on in the cycle
    assert ring.trace[:9] == [(1, 0), (2, 1), (4, 2)] * 3
    ring.close()


def test_ring_starts_again_where_a_pass_stopped_half_way():
    store = _store(4)
    ring = StagingRing(store.layouts[0].nbytes, 2, PinBudget(None, lock_on_cpu), record_trace=True)
    ring.start(store.layer_bytes, (0, 1, 2, 3), torch.device("cpu"))
    slot, _ = ring.acquire(0)
    ring.release(slot)  # the pass stops here: layer 1 is never asked for
    for layer in (0, 1, 2, 3, 0):
        slot, data = ring.acquire(layer)
        assert torch.equal(data, store.layer_bytes(layer))
        ring.release(slot)
    with pytest.raises(KeyError):
        ring.acquire(7)
    ring.close()


def test_ring_takes_only_the_slots_the_system_allows():
    store = _store(2)
    slot_bytes = store.layouts[0].nbytes
    budget = PinBudget(None, lambda buffer: budget.locked_bytes == 0)  # the system locks one slot, then refuses
    ring = StagingRing(slot_bytes, 4, budget)
    assert ring.depth == 1 and not ring.usable and budget.refused
    with pytest.raises(ValueError, match="at least two"):
        ring.start(store.layer_bytes, (0, 1), torch.device("cpu"))
    ring.close()
    assert budget.locked_bytes == 0


# --- offloaded decoding through the ring ------------------------------------------------------------------


def test_tokens_are_the_same_pinned_and_staged(tmp_path, tiny_target, tiny_draft):
    """A limit of 0 stages every streamed layer through the ring, one layer's worth stages the rest, no limit
    stages nothing: SpecExec emits the same tokens in all three as with the target in memory."""
    tiny_target.model.save_pretrained(str(tmp_path))
    loads = {
        limit: load_offloaded(
            str(tmp_path),
            "cpu",
            torch.float64,
            resident_layers=0,
            n_slots=2,
            stream_on_cpu=True,
            record_trace=True,
            pin_limit_bytes=limit,
        )
        for limit in (None, 0)
    }
    layer = loads[0].report.layer_bytes
    loads[layer] = load_offloaded(
        str(tmp_path), "cpu", torch.float64, resident_layers=0, n_slots=2, stream_on_cpu=True, pin_limit_bytes=layer
    )
    unlimited, staged, mixed = loads[None].report.pinning, loads[0].report.pinning, loads[layer].report.pinning
    assert unlimited.staged_bytes_per_pass == 0 and unlimited.ring_slots == 0 and loads[None].streamer.ring is None
    assert staged.staged_bytes_per_pass == loads[0].report.bytes_streamed_per_pass and staged.ring_slots == 2
    assert 0 < mixed.staged_bytes_per_pass < loads[layer].report.bytes_streamed_per_pass
    assert "SPECEXEC_PIN_LIMIT_GB caps locking at 0.00 GB" in loads[0].report.summary()
    tree = TreeSettings(budget=16, max_depth=6, expand=4)
    prompt = [1, 5, 9, 12]
    for params in (SamplingParams(temperature=0.0), SamplingParams(temperature=0.8, seed=3)):
        outputs = []
        for target in (tiny_target, *loads.values()):
            state = DecodeState.fresh(prompt, target, tiny_draft)
            outputs.append(
                [t for step in specexec_steps(state, target, tiny_draft, params, tree, 16) for t in step.token_ids]
            )
        assert all(tokens == outputs[0] for tokens in outputs) and len(outputs[0]) == 16
    # the ring served every staged copy, in the streamer's copy order
    copies = [a.layer for a in loads[0].streamer.trace if isinstance(a, Copy)]
    filled = [layer for layer, _ in loads[0].streamer.ring.trace]
    assert filled[: len(copies)] == copies


def test_a_failed_pass_through_the_ring_leaves_the_next_one_correct(tmp_path, tiny_target):
    tiny_target.model.save_pretrained(str(tmp_path))
    model = load_offloaded(
        str(tmp_path), "cpu", torch.float64, resident_layers=0, n_slots=2, stream_on_cpu=True, pin_limit_bytes=0
    )
    ids = torch.tensor([1, 7, 22, 3])
    causal = torch.full((4, 4), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    expected = model.forward(ids, torch.arange(4), causal, model.new_cache())
    with pytest.raises(RuntimeError):
        model.forward(ids, torch.arange(4), torch.zeros(1, 1, 2, 3, dtype=torch.float64), model.new_cache())
    torch.testing.assert_close(model.forward(ids, torch.arange(4), causal, model.new_cache()), expected)


def test_the_report_says_what_copies_how_in_words():
    gib = 1024**3
    refused = PinningReport(
        limit_bytes=None,
        locked_bytes=gib,
        refused=True,
        ring_slots=3,
        staged_bytes_per_pass=30 * gib,
        copy_bytes_per_second=25e9,
        fill_bytes_per_second=9e9,
        system="WSL2",
    )
    sentence = refused.sentence(34 * gib)
    assert sentence.startswith(
        "4.00 GiB of the 34.00 GiB streamed per pass copy from pinned memory and 30.00 GiB "
        "through a ring of 3 pinned buffers"
    )
    assert "WSL2 refused to lock more than 1.00 GiB" in sentence and "Windows itself allows more" in sentence
    assert "copies 25.0 GB/s, filling 9.0 GB/s per worker" in sentence
    pageable = PinningReport(None, 0, True, 0, 2 * gib, 0.0, 0.0, "Windows")
    assert "from pageable memory" in pageable.sentence(2 * gib)
    assert PinningReport(None, 0, False, 0, 0, 0.0, 0.0, "Linux").sentence(gib) == (
        "all 1.00 GiB streamed per pass copy from pinned memory"
    )


# --- the bench option ------------------------------------------------------------------------------------


def test_bench_offload_stages_through_the_ring_with_a_pin_limit(capsys):
    import argparse
    import json

    from core.bench.offload import add_arguments, run

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(
        [
            "--device",
            "cpu",
            "--format",
            "fp16",
            "--layers",
            "3",
            "--width-divisor",
            "8",
            "--tree-sizes",
            "1",
            "--context",
            "8",
            "--vram-budgets",
            "12",
            "--pin-limit-gb",
            "0",
            "--json",
        ]
    )
    assert run(args) == 0
    fp16 = json.loads(capsys.readouterr().out)["formats"][0]
    assert fp16["ring_slots"] == 2 and fp16["pinned_gb"] == 0 and fp16["copy_from"] == "pageable"
    assert fp16["staged_gb_per_pass"] == pytest.approx(3 * fp16["layer_bytes"] / 1e9)
    assert fp16["passes"][0]["pass_s"] > 0


@pytest.mark.parametrize("text", ["-2", "lots", "nan"])
def test_bench_offload_refuses_a_hostile_pin_limit(text, capsys):
    import argparse

    from core.bench.offload import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--pin-limit-gb", text])
    assert "--pin-limit-gb must be a number of gigabytes" in capsys.readouterr().err


# --- the doctor's check -----------------------------------------------------------------------------------


def test_doctor_pinning_check_runs_its_path_on_the_cpu():
    from core.doctor import pinning

    measured = pinning.measure(torch.device("cpu"), layer_bytes=1 << 20, layers=3)
    assert measured.ring_slots == 2 and measured.device == "cpu"
    assert min(measured.pinned_bytes_per_second, measured.pageable_bytes_per_second, measured.ring_bytes_per_second) > 0
    assert pinning.decide(measured).status.value == "pass"


def test_doctor_pinning_check_judges_the_gpu_rates():
    from core.doctor import pinning
    from core.doctor.report import Status

    def on_gpu(ring, pinned=25e9, system="Windows"):
        return pinning.PinningMeasurement("cuda:0", system, 1 << 28, pinned, 9.6e9, ring, 3 if ring else 0)

    good = pinning.decide(on_gpu(23e9))
    assert (
        good.status is Status.PASS
        and "pinned 25.0 GB/s, through the staging ring 23.0 GB/s, pageable 9.6" in good.sentence
    )
    slow = pinning.decide(on_gpu(10e9))
    assert slow.status is Status.DEGRADED and "cannot fill the ring" in slow.sentence
    refused = pinning.decide(on_gpu(None, pinned=None, system="WSL2"))
    assert refused.status is Status.DEGRADED and "WSL2 refused to page-lock" in refused.sentence
    assert "Windows itself allows more" in refused.sentence


def test_the_probe_names_wsl_and_the_installed_triton():
    from importlib import metadata

    from core.hardware.probe import probe_hardware, triton_version

    platform = probe_hardware().platform
    assert platform["wsl"] in ("yes", "no")
    assert platform["triton"] == triton_version() == metadata.version("triton")  # this venv's Triton, not imported


def test_a_hostile_pin_limit_stops_a_load_before_any_file_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv(PIN_LIMIT_ENV, "-5")
    with pytest.raises(InvalidSettingError, match="SPECEXEC_PIN_LIMIT_GB must be a number"):
        load_offloaded(str(tmp_path / "no such folder"), "cpu", torch.float32, stream_on_cpu=True)


def test_the_budget_a_load_measured_is_kept_for_the_fit(tmp_path):
    from core.hardware.description import load_description
    from core.models.copy_paths import copy_paths
    from core.planning.pin_record import measured_pin_budget, record_load

    path = tmp_path / "pin-budget.json"
    assert measured_pin_budget(path) is None
    record_load(3 * 10**9, refused=True, path=path, now=1000.0)
    assert measured_pin_budget(path, now=2000.0) == 3 * 10**9
    assert measured_pin_budget(path, now=1000.0 + 31 * 86400) is None  # a month on: measured again
    record_load(2 * 10**9, refused=False, path=path, now=3000.0)  # locked less, no refusal: the wall stands
    assert measured_pin_budget(path, now=3000.0) == 3 * 10**9
    record_load(5 * 10**9, refused=False, path=path, now=3000.0)  # locked more without a refusal: it moved
    assert measured_pin_budget(path, now=3000.0) is None
    path.write_text("{not json")
    assert measured_pin_budget(path) is None
    for damaged in ({"locked_bytes": float("inf"), "measured_at": 1000.0}, {"locked_bytes": 1, "measured_at": 10**400}):
        path.write_text(json.dumps(damaged))  # edited by hand: no figure, never an error at load
        assert measured_pin_budget(path, now=2000.0) is None
    machine = load_description("tests/fixtures/hw/gpu24-ram64-pcie4.json")
    layer = 428_687_360
    paths, words = copy_paths(layer, 60 * layer, machine, 25e9, measured=4 * 10**9)
    assert paths.pinned_share == pytest.approx((4 * 10**9 - 4 * layer) / (60 * layer))
    assert words.startswith("Linux let the last load here lock only 3.7 GB")
